"""Eval with execution feedback: up to ``turns`` answers per sample (``grpo-code eval --turns``).

Turn 1 is the ordinary eval (``samples.jsonl``, ``results.jsonl``). The later turns are
training's turns (:class:`~grpo_code.verify.turns.TurnLoop`): each sample still going has
its latest program checked on the task's public tests (or, for a task without any, whether
it compiles); if something is to fix (or the answer had no code), the failure goes back to
the model as a user message and it answers again (one completion, seeded by turn and chunk). A sample
stops once its public tests pass or its turns are used. Every answer is run on the task's
tests (the hidden tests the reward uses), and a sample counts as solved at turn ``t`` when
one of its programs up to ``t`` passed them, so pass@1 never falls from one turn to the next.

Files, besides turn 1's: ``turns.jsonl`` (the later answers, keyed by task, index and turn,
with the feedback they answered) and ``turn_results.jsonl`` (their verdicts, keyed like
``results.jsonl``). A rerun resumes both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grpo_code.evaluate.execute import EvalError, execute, sample_record
from grpo_code.evaluate.files import Appender, read_jsonl
from grpo_code.evaluate.summary import TurnsSummary
from grpo_code.generation.base import Completion, Sampling, seeded_chunks
from grpo_code.generation.stream import derive_seed
from grpo_code.verify import feedback
from grpo_code.tasks.prompts import Prompt, render
from grpo_code.tasks.suite import Suite
from grpo_code.verify.turns import Conversation, TurnLoop
from grpo_code.verify.verifier import Verifier

Key = tuple[str, int]


def conversation(base: Prompt, answers: list[str], notes: list[str]) -> Prompt:
    """The chat so far: the task's prompt, then each answer and the feedback on it."""
    return Prompt("chat", messages=(*base.messages, *feedback.turns(answers, notes)))


def as_answer(sample: dict[str, Any]) -> Completion:
    """A written sample as an answer that knows whether it was cut at the length limit."""
    return Completion(sample["completion"], bool(sample.get("truncated")))


def run_turns(settings: Any, suite: Suite, out_dir: Path, verifier: Verifier, hooks: Any, first: dict[Key, dict],
              first_results: dict[Key, dict], generator: Callable[[], Any]) -> TurnsSummary:
    """Turns 2..``settings.turns`` for every sample; returns the summary's ``turns`` record.

    ``first``/``first_results``: turn 1's sample and verdict record per (task id, index);
    ``generator()`` gives the (lazily loaded) model."""
    system = settings.system_prompt if settings.system_prompt is not None else suite.system_prompt
    base = {t.id: render(t, "chat", system, suite.prompt_template) for t in suite.tasks}
    keys = [(t.id, j) for t in suite.tasks for j in range(settings.n)]
    talks = [Conversation(verifier.task(k[0])) for k in keys]
    latest = dict(first_results)
    solved = {k for k in keys if latest[k]["status"] == "pass"}
    by_turn = [len(solved)]
    mixes = [Counter(latest[k]["status"] for k in keys)]
    turns_path = out_dir / "turns.jsonl"
    have = {(r["task_id"], r["index"], r["turn"]): r for r in read_jsonl(turns_path)}
    sampling = Sampling(n=1, temperature=settings.temperature, top_p=settings.top_p, top_k=settings.top_k,
                        max_new_tokens=settings.max_new_tokens, seed=settings.seed, row_seeds=settings.row_seeds)

    def generate(turn: int, active: list[int]) -> list[str]:
        if turn == 1:
            return [as_answer(first[k]) for k in keys]
        pending = [(keys[r], r) for r in active]
        # 7_919 marks multi-turn seeds, apart from a single-turn eval's chunks of the same seed
        chunks = seeded_chunks(pending, settings.batch_size, 1, derive_seed(settings.seed, 7_919, turn))
        todo = [(seed, chunk) for seed, chunk in chunks if any((*k, turn) not in have for k, _ in chunk)]
        hooks.start(f"turn {turn}", sum(len(c) for _, c in todo))
        if todo:
            model = generator()
            appender = Appender(turns_path)
            try:
                for seed, chunk in todo:
                    prompts = [conversation(base[k[0]], talks[r].answers, talks[r].notes) for k, r in chunk]
                    if settings.stop_after_code:
                        outs = model.generate(prompts, sampling, seed=seed, done=lambda i, text, chunk=chunk: (
                            verifier.whole(talks[chunk[i][1]].task, text, "chat")))
                    else:
                        outs = model.generate(prompts, sampling, seed=seed)
                    for (k, r), texts in zip(chunk, outs, strict=True):
                        rec = sample_record(k[0], k[1], texts[0], turn=turn, feedback=talks[r].notes[-1])
                        appender.write(rec)
                        have[(*k, turn)] = rec
                    hooks.advance(f"turn {turn}", len(chunk))
            finally:
                appender.close()
        samples = [have[(*k, turn)] for k, _ in pending]
        # Every answer is also run on the task's tests: a sample is solved once one passed them.
        per_task = execute(verifier, samples, out_dir / "turn_results.jsonl",
                            lambda task, s: verifier.program(task, s["completion"], "chat"), hooks)
        seen: Counter = Counter()
        for k, _ in pending:
            latest[k] = per_task[k[0]][seen[k[0]]]
            seen[k[0]] += 1
            if latest[k]["status"] == "pass":
                solved.add(k)
        by_turn.append(len(solved))
        mixes.append(Counter(latest[k]["status"] for k, _ in pending))
        return [as_answer(s) for s in samples]

    def check_failed(message: str) -> None:
        raise EvalError(f"a public-test run hit a sandbox infrastructure error ({message})",
                        "rerun the same command to retry (finished turns are kept)")

    stats = TurnLoop(verifier, settings.turns, settings.feedback_template, check_failed).run(talks, generate)
    ran = list(stats.rows)
    while len(by_turn) < settings.turns:  # every sample stopped early: the later turns change nothing
        by_turn.append(by_turn[-1])
        mixes.append(Counter())
        ran.append(0)
    # pass@1 is the mean over tasks of solved/n, and every task has n samples.
    rates = [round(count / len(keys), 6) if keys else 0.0 for count in by_turn]
    return TurnsSummary(max=settings.turns, pass_at_1=tuple(rates),
                        mean_turns=round(sum(len(t.answers) for t in talks) / len(keys), 4) if keys else 0.0,
                        samples_per_turn=tuple(ran), verdicts=tuple(dict(sorted(m.items())) for m in mixes))
