"""Which answers the judge sees, when their judgments start, and how they move the reward.

The judge reads an answer's *program* (what the sandbox ran), never the prose around it, so
talk aimed at the judge does not reach it; an answer with no program scores 0 without a
request. Which answers are judged depends on ``rewards.judge.blend``:

- ``sum``: every scored answer; ``reward = test + weight * judge`` (``normalize: group``:
  judge scores min-max scaled and centred within the group, so the judge moves a reward
  by at most ``weight / 2``).
- ``gate``: only answers whose test reward equals another's in their group; the judge
  orders them by less than half the gap to the next test level, so it never reorders
  answers with different test rewards.
- ``failing``: only answers that did not pass; each gets ``weight * judge``, kept below
  half the gap to the lowest passing answer of its group.

Timing: with ``overlap`` on, an answer's judgment starts as soon as its program is whole:
when the trainer starts that program in the sandbox, as its code block closes while the
completion still generates, or as the completion ends (``sum``; ``gate`` too, before anyone
knows whether the answer will tie: a judgment that turns out unneeded is not used); or
the moment its verdict arrives (``failing``); a ``group_rank`` judgment needs its group's answers (and, gated,
their verdicts) and starts as soon as the reward function has them. Every judgment is content-keyed in the
:class:`~.client.Judge`, so the reward function finds those started early. It then waits
at most ``deadline_s``; a judgment not in by then is masked (``timeout``), and stored
when it lands, for the next time. A failed request is masked (``error``), and so is a
judgment none of whose votes parse (``unparseable``). Each is counted, and none ever helps
its answer, since an answer can provoke each of them (instructions written into its code,
a prompt too long for the server, a critique slow enough to miss the deadline): in the
blend a masked answer counts as the lowest judge score of its group.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from grpo_code import metric_names as M
from grpo_code.config import JudgeConfig
from grpo_code.errors import RewardError
from grpo_code.rewards.blend import blend, groups_of, tie_levels
from grpo_code.rewards.judge import parse, prompts
from grpo_code.rewards.judge.client import Ballot, Judge, Outcome, auc, busy_s, votes_at
from grpo_code.rewards.metrics import percentile

MASK_REASONS = ("timeout", "unparseable", "error")


class JudgeScoring:
    """One training run's judge: starts judgments, waits for them, blends them in."""

    def __init__(self, config: JudgeConfig, judge: Judge, tasks: Any = None):
        self.config = config
        self.judge = judge
        self.step = 0
        """The training step the latest batch belonged to (sets the votes of a schedule)."""
        if config.mode == "anchor_rank" and tasks is not None:
            missing = [t.id for t in tasks.tasks if not t.reference]
            if missing:
                raise RewardError(f"rewards.judge.mode is anchor_rank but {len(missing)} task(s) have no reference "
                                  f"solution (e.g. {missing[0]})",
                                  "give every task a reference, or use pointwise or group_rank")

    def close(self) -> None:
        self.judge.close()

    @property
    def votes(self) -> int:
        return votes_at(self.step, self.config.votes, self.config.votes_schedule)

    # ----------------------------------------------------------------- ballots

    def _single(self, task: Any, program: str) -> Ballot:
        k = self.votes
        if self.config.mode == "anchor_rank":
            first = prompts.anchor(task.prompt, program, task.reference, anchor_first=True)
            second = prompts.anchor(task.prompt, program, task.reference, anchor_first=False)
            return Ballot(((first, (k + 1) // 2),) + (((second, k // 2),) if k > 1 else ()), parse.comparison)
        return Ballot(((prompts.pointwise(task.prompt, program), k),), parse.pointwise)

    def _ranked(self, task: Any, programs: list[str]) -> Ballot:
        return Ballot(((prompts.group(task.prompt, programs), self.votes),), parse.ranking, len(programs))

    def start(self, task: Any, program: str | None) -> None:
        """An answer's inputs exist: start its judgment if its mode judges answers one by one."""
        if program and self.config.mode != "group_rank":
            self.judge.ballot(self._single(task, program), claim=False)

    def early(self, task: Any, program: str | None, verdict: Future | None) -> None:
        """The trainer's hook (``EarlyJobs(on_program=...)``): an answer's program is whole, as
        its completion ended or, still generating, closed its code block (``verdict`` is then
        ``None``: the judgment starts only where the blend needs no verdict)."""
        if not self.config.overlap or self.config.mode == "group_rank":
            return
        if self.config.blend in ("sum", "gate"):
            self.start(task, program)
        elif self.config.blend == "failing" and verdict is not None:
            def judged(future: Future) -> None:
                if future.exception() is None and future.result().status.value != "pass":
                    self.start(task, program)
            verdict.add_done_callback(judged)

    # ----------------------------------------------------------------- scoring

    def selected(self, tests: Sequence[float | None], passed: Sequence[bool], keys: Sequence[Any]) -> list[list[int]]:
        """The sets of answers judged together (one answer each, or a group's tied answers)."""
        out: list[list[int]] = []
        for group in groups_of(keys):
            live = [i for i in group if tests[i] is not None]
            if self.config.blend == "failing":
                live = [i for i in live if not passed[i]]
            if self.config.blend == "gate":
                sets = sorted((m for _, m in tie_levels(tests, live) if len(m) > 1), key=min)  # in row order
            else:
                sets = [live] if live else []
            out.extend(sets if self.config.mode == "group_rank" else [[i] for s in sets for i in s])
        return out

    async def scores(self, tasks: Sequence[Any], programs: Sequence[str | None], tests: Sequence[float | None],
                     passed: Sequence[bool], keys: Sequence[Any], step: int = 0) -> tuple[list[float | None], dict[str, float]]:
        """Judge scores in [0, 1] (``None``: not judged or masked) and the batch's judge metrics."""
        self.step = step
        judged: list[float | None] = [None] * len(tasks)
        waits: list[tuple[list[int], list[int], Future[Outcome]]] = []  # (answers, their place in the ballot)
        for chosen in self.selected(tests, passed, keys):
            with_code = [i for i in chosen if programs[i]]
            for i in chosen:
                if not programs[i]:
                    judged[i] = 0.0  # nothing to judge: the lowest score, not a masked one
            if self.config.mode != "group_rank":
                waits.extend(([i], [0], self.judge.ballot(self._single(tasks[i], programs[i]))) for i in with_code)
                continue
            unique = sorted({programs[i] for i in with_code}, key=lambda p: hashlib.sha256(p.encode()).digest())
            if len(unique) < 2:  # nothing to rank against: equal answers get equal (middle) scores
                for i in with_code:
                    judged[i] = 0.5 if len(with_code) > 1 else None
                continue
            # At most 26 answers to a ranking: larger sets are ranked in balanced chunks.
            chunks = -(-len(unique) // len(prompts.LABELS))
            for part in (unique[c::chunks] for c in range(chunks)):  # each of 13 to 26 answers
                place = {p: n for n, p in enumerate(part)}
                members = [i for i in with_code if programs[i] in place]
                waits.append((members, [place[programs[i]] for i in members],
                              self.judge.ballot(self._ranked(tasks[members[0]], part))))
        started = time.monotonic()
        futures = {id(f): f for _, _, f in waits}
        if futures:
            await asyncio.wait([asyncio.wrap_future(f) for f in futures.values()], timeout=self.config.deadline_s)
        waited = time.monotonic() - started
        outcomes: dict[int, Outcome] = {}
        masked: Counter[str] = Counter()
        masked_answers: set[int] = set()
        for answers, places, future in waits:
            outcome = future.result() if future.done() else Outcome((None,), "timeout")
            outcomes[id(future)] = outcome
            for i, p in zip(answers, places):
                if outcome.masked:
                    masked[outcome.masked] += 1
                    masked_answers.add(i)
                else:
                    judged[i] = outcome.scores[p]
        metrics = self._metrics(judged, passed, list(outcomes.values()), masked, waited, len(waits))
        # An answer can provoke a masked judgment (instructions in its code, a prompt too long
        # for the server, a critique slow enough to miss the deadline): it never helps, so a
        # masked answer counts as its group's lowest judge score.
        for group in groups_of(keys):
            present = [judged[i] for i in group if judged[i] is not None]
            for i in masked_answers.intersection(group):
                judged[i] = min(present) if present else None  # type: ignore[type-var]
        return judged, metrics

    def _metrics(self, judged: list[float | None], passed: Sequence[bool], outcomes: list[Outcome],
                 masked: Counter[str], waited: float, items: int) -> dict[str, float]:
        fresh = [o for o in outcomes if not o.cached and o.masked != "timeout"]
        out = {M.JUDGE_ITEMS: float(items), M.JUDGE_CALLS: float(sum(o.calls for o in fresh)),
               M.JUDGE_CACHE_HITS: float(sum(o.cached for o in outcomes)),
               M.JUDGE_TOKENS: float(sum(o.tokens for o in fresh)),
               M.JUDGE_BUSY_S: busy_s([o.span for o in fresh if o.span is not None]),
               M.JUDGE_WAIT_S: waited, M.JUDGE_VOTES: float(self.votes)}
        for reason in MASK_REASONS:
            out[M.judge_masked(reason)] = float(masked.get(reason, 0))
        latencies = [o.latency_s for o in fresh]
        if latencies:
            out[M.JUDGE_LATENCY_P50_S] = percentile(latencies, 50)
            out[M.JUDGE_LATENCY_P99_S] = percentile(latencies, 99)
        present = [(s, p) for s, p in zip(judged, passed) if s is not None]
        if present:
            out[M.JUDGE_SCORE_MEAN] = sum(s for s, _ in present) / len(present)
            area = auc([s for s, _ in present], [p for _, p in present])
            if area is not None:
                out[M.JUDGE_AUC] = area
        return out

    def blend(self, base: Sequence[float | None], tests: Sequence[float | None], judged: Sequence[float | None],
              passed: Sequence[bool], keys: Sequence[Any]) -> list[float | None]:
        """``base`` (the reward so far) moved by the judge scores as ``blend`` says; test levels
        and group membership come from ``tests`` and ``keys``."""
        if self.config.blend != "failing":
            return blend(tests, judged, keys, self.config.weight, self.config.blend, self.config.normalize, base)
        out = list(base)
        for group in groups_of(keys):
            live = [i for i in group if tests[i] is not None and out[i] is not None]
            passing = [tests[i] for i in live if passed[i]]
            for i in live:
                if not passed[i] and judged[i] is not None:
                    room = (min(passing) - tests[i]) / 2 if passing else self.config.weight  # type: ignore[operator]
                    out[i] = out[i] + min(self.config.weight, max(0.0, room)) * judged[i]  # type: ignore[operator]
        return out


def build_judge(config: JudgeConfig, tasks: Any = None) -> JudgeScoring | None:
    """The run's judge, or ``None`` when it is off (``weight: 0``)."""
    if config.weight <= 0:
        return None
    if not (config.url and config.model):
        raise RewardError("rewards.judge.weight > 0 but url or model is null",
                          "set rewards.judge.url (the server's base URL, e.g. http://127.0.0.1:8000/v1) and model")
    judge = Judge(config.url, config.model, temperature=config.temperature, max_tokens=config.max_tokens,
                  timeout_s=config.timeout_s, retries=config.retries, concurrency=config.concurrency,
                  cache_size=config.cache_size, aggregation=config.aggregate, guided=config.guided)
    return JudgeScoring(config, judge, tasks)
