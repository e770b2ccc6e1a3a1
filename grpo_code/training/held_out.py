"""Held-out eval during training (``train.eval_every: N``): pass@1 on the suite's held-out
split (``tasks.eval_split``) with the weights of one policy version, measured on the run's
rollout engine.

When the policy a generation call samples with is version ``v`` (``v`` updates made) and
``v`` is a multiple of ``N``, the call carries the held-out rows too: each held-out task
``train.eval_n`` times, after the training rows, in the same engine batch (each row seeded as
the call's rows are), so they cost the batch's extra decode steps and no engine call or
weight sync of their own. Their programs start as their
rows end, on their own verifier (eval's rules: every test must pass, attested verdicts
only); nothing waits for them, the step goes on. When a version's last verdict is in, one
line goes to ``metrics.jsonl``: ``step`` ``v``, ``eval/pass@1``, ``eval/policy_version``
``v`` and the counts. After the last step the final version, when due, is evaluated the
same way on the engine (the run waits for those rows: it is the last thing it does).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from grpo_code import metric_names as M
from grpo_code.generation.stream import Sample, derive_seed

EVAL_PART = 0x4556414C
"""The seed part of held-out rows (below the run's seed, then the version)."""


@dataclass(frozen=True)
class HeldOutPoint:
    """Held-out pass@1 of one policy version."""

    version: int
    pass_at_1: float
    tasks: int
    samples: int
    masked: int
    """Samples the sandbox could not judge (left out of pass@1)."""
    generate_s: float
    """How long the generation call that carried the held-out rows took (the training rows included)."""

    def row(self) -> dict[str, Any]:
        """Its line in ``metrics.jsonl``."""
        return {"step": self.version, M.EVAL_PASS1: self.pass_at_1, M.EVAL_VERSION: self.version,
                M.EVAL_TASKS: self.tasks, M.EVAL_SAMPLES: self.samples, M.EVAL_MASKED: self.masked,
                M.EVAL_GENERATE_S: self.generate_s}


class HeldOut:
    """The held-out rows of a run and their verdicts. ``prompts``: each held-out task's
    prompt ids; ``verifier``: eval's verifier over the held-out tasks; ``write``: where a
    finished point goes (a line of ``metrics.jsonl``)."""

    def __init__(self, every: int, task_ids: Sequence[str], prompts: Sequence[list[int]], n: int, verifier: Any,
                 style: str, seed: int, tokenizer: Any, write: Callable[[HeldOutPoint], None]):
        self.every = every
        self.task_ids = list(task_ids)
        self.prompts = list(prompts)
        self.n = n
        self.verifier = verifier
        self.style = style
        self.seed = seed
        self.tokenizer = tokenizer
        self.write = write
        self.points: list[HeldOutPoint] = []
        self._asked: set[int] = set()
        self._threads: list[threading.Thread] = []
        self._expected: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def due(self, version: int) -> bool:
        """Whether the policy of ``version`` is to be evaluated and was not yet."""
        return version > 0 and version % self.every == 0 and version not in self._asked

    def rows(self, version: int) -> Rows:
        """The held-out rows of ``version`` (each task ``n`` times); it counts as asked."""
        self._asked.add(version)
        ids = [p for p in self.prompts for _ in range(self.n)]
        tasks = [t for t in self.task_ids for _ in range(self.n)]
        return Rows(self, version, ids, tasks)

    def row_seed(self, version: int) -> int:
        return derive_seed(self.seed, EVAL_PART, version)

    def expect(self, collect: Callable[[], None]) -> None:
        """Rows generated elsewhere (the rollout worker ahead of the update): ``collect``
        blocks until they are back and hands them to their :class:`Rows` (:meth:`wait` calls it
        for those not yet collected)."""
        self._expected.append(collect)

    def wait(self) -> list[HeldOutPoint]:
        """Block until every version asked for is written; the points in version order."""
        while self._expected:
            self._expected.pop(0)()
        for thread in list(self._threads):
            thread.join()
        return sorted(self.points, key=lambda p: p.version)

    def judge_later(self, version: int, handles: list[Any], generate_s: float) -> None:
        """Wait for ``handles`` on a thread of their own, then write the point."""
        thread = threading.Thread(target=self._finish, args=(version, handles, generate_s),
                                  name=f"grpo-code-held-out-{version}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _finish(self, version: int, handles: list[Any], generate_s: float) -> None:
        judged = self.verifier.judge(handles)
        counts: dict[str, list[int]] = {t: [0, 0] for t in self.task_ids}
        masked = 0
        for j in judged:
            if j.masked:
                masked += 1
                continue
            counts[j.task_id][0] += 1
            counts[j.task_id][1] += int(j.passed)
        scored = [c / n for n, c in counts.values() if n]
        point = HeldOutPoint(version, sum(scored) / len(scored) if scored else 0.0, len(scored),
                             sum(n for n, _ in counts.values()), masked, round(generate_s, 3))
        with self._lock:
            self.points.append(point)
        self.write(point)


class Rows:
    """One version's held-out rows on their way through a generation call: each is judged
    the moment it ends (:meth:`end`), and :meth:`done` hands the verdicts to a thread that
    writes the point once the last is in."""

    def __init__(self, held: HeldOut, version: int, prompt_ids: list[list[int]], task_ids: list[str]):
        self.held = held
        self.version = version
        self.prompt_ids = prompt_ids
        self.task_ids = task_ids
        self.handles: dict[int, Any] = {}
        self.started = time.perf_counter()

    def task(self, i: int) -> Any:
        return self.held.verifier.task(self.task_ids[i])

    def whole(self, i: int, so_far: list[int]) -> bool:
        """Whether row ``i``'s program is whole (``train.stop_after_code`` stops it there)."""
        text = self.held.tokenizer.decode(so_far, skip_special_tokens=True)
        return self.held.verifier.whole(self.task(i), text, self.held.style)

    def end(self, i: int, sample: Sample) -> None:
        text = self.held.tokenizer.decode(sample.ids, skip_special_tokens=True)
        self.handles[i] = self.held.verifier.submit(self.task(i), text, self.held.style, sample.cut)

    def done(self, samples: Sequence[Sample], generate_s: float, version: int | None = None) -> None:
        """The call returned ``samples`` (the held-out rows', in order) in ``generate_s``;
        ``version``: the policy that sampled them, when not the one asked for (the rollout
        worker samples with the newest weights it holds)."""
        for i, sample in enumerate(samples):
            if i not in self.handles:
                self.end(i, sample)
        self.held.judge_later(self.version if version is None else version,
                              [self.handles[i] for i in range(len(samples))], generate_s)


def final_eval(held: HeldOut, engine: Any, trainer: Any, stop_after_code: bool) -> None:
    """Evaluate the policy the run ended with, when its version is due (after the last
    step no generation call carries held-out rows): its weights into the engine, one call
    of the held-out rows, their verdicts written before this returns."""
    version = int(trainer.state.global_step)
    if held.due(version):
        engine.sync_weights()
        engine.start_eval(held.rows(version), held.row_seed(version), stop_after_code)
    held.wait()
