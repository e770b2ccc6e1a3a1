"""Evaluation: n samples per task -> sandbox -> pass@k, resumable, with the training pipeline.

For each model, ``<out>/<model-slug>/`` holds

- ``config.json``: the settings, written before anything else; a rerun with other
  settings is refused (naming the keys) so a resume never mixes samples;
- ``samples.jsonl``: append-only completions keyed by (task_id, index); prompts are
  generated in fixed seeded chunks, so a killed run resumes to the same samples;
- ``results.jsonl``: per-sample verdicts, appended as jobs finish and keyed by the sample
  and the harness fingerprint (:mod:`~grpo_code.sandbox.fingerprint`), so verdicts of
  another sandbox runtime or other limits are not reused; sandbox infrastructure errors
  are not written, so a rerun retries them;
- ``summary.json``: pass@k (unbiased estimator), a 95% bootstrap interval over tasks,
  per-task counts, the verdict mix and the suite's content hash.

``score_samples`` does the same for an existing samples file, without a model
(:func:`~grpo_code.tasks.samples.read_samples_file`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from grpo_code.errors import GrpoCodeError
from grpo_code.sandbox.fingerprint import harness_fingerprint
from grpo_code.sandbox.types import Result, Status
from grpo_code.tasks.extract import build_program, whole_program
from grpo_code.tasks.prompts import render
from grpo_code.tasks.samples import read_samples_file, sample_style
from grpo_code.tasks.schema import Task
from grpo_code.tasks.suite import Suite


class EvalError(GrpoCodeError):
    """Bad eval input: k > n, unknown task ids, changed settings on resume."""


# --------------------------------------------------------------------------- statistics


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task with ``c`` correct of ``n`` samples (Chen et al. 2021)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod((n - c - i) / (n - i) for i in range(k))


def bootstrap_ci(values: Sequence[float], iters: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of the mean, resampling tasks with replacement."""
    if not values:
        return (0.0, 0.0)
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(iters))
    return (means[int(0.025 * iters)], means[min(iters - 1, int(0.975 * iters))])


def summarize(suite: Suite, counts: dict[str, tuple[int, int]], ks: Sequence[int], mix: Counter,
              extra: dict[str, Any]) -> dict[str, Any]:
    """pass@k and intervals from per-task (n, correct) counts."""
    task_ids = [t.id for t in suite.tasks if t.id in counts]
    pass_k, ci = {}, {}
    for k in ks:
        per_task = [pass_at_k(*counts[t], k) for t in task_ids]
        pass_k[str(k)] = round(sum(per_task) / len(per_task), 6) if per_task else 0.0
        lo, hi = bootstrap_ci(per_task)
        ci[str(k)] = [round(lo, 6), round(hi, 6)]
    n_values = sorted({counts[t][0] for t in task_ids})
    return {
        "pass_at_k": pass_k,
        "ci95": ci,
        "n": n_values[0] if len(n_values) == 1 else n_values,
        "tasks": len(task_ids),
        "suite": suite.name,
        "suite_hash": suite.content_hash(),
        "verdicts": dict(sorted(mix.items())),
        "per_task": {t: {"n": counts[t][0], "correct": counts[t][1]} for t in task_ids},
        **extra,
    }


# --------------------------------------------------------------------------- files


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of an append-only file; a torn last line (killed mid-write) is ignored."""
    if not path.is_file():
        return []
    out = []
    with path.open() as fh:
        for line in fh:
            if line.endswith("\n"):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    return out


class _Appender:
    def __init__(self, path: Path):
        if path.is_file() and path.stat().st_size:
            with path.open("rb") as fh:  # drop a torn last line so appends start on a fresh line
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    data = path.read_bytes()
                    path.write_bytes(data[: data.rfind(b"\n") + 1])
        self.fh = path.open("a")

    def write(self, record: dict[str, Any]) -> None:
        self.fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".partial")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)


def slug(name: str) -> str:
    return re.sub(r"[^\w.-]+", "-", name.strip("/").replace("/", "--")).strip("-")[-100:] or "model"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- execution


@dataclass
class Hooks:
    """Progress callbacks: ``start(what, total)`` then ``advance(what, amount)``."""

    start: Callable[[str, int], None] = lambda what, total: None
    advance: Callable[[str, int], None] = lambda what, amount: None


def _status(result: Result | None) -> str:
    return "no_code" if result is None else result.status.value


def _execute(suite: Suite, samples: list[dict[str, Any]], results_path: Path, style_of: Callable[[Task], str],
             sandbox: Any, hooks: Hooks, which: str = "last") -> dict[str, list[dict]]:
    """Run every sample lacking a result and return the results per task. Sandbox
    infrastructure errors are not written, and are reported once the rest is saved. A
    record is reused only under the same harness fingerprint (records without one are
    older than it and run again)."""
    done = {(r["task_id"], r["index"], r.get("sample_sha"), r.get("harness")): r for r in _read_jsonl(results_path)}
    by_language = {lang: harness_fingerprint(lang, sandbox.config) for lang in {t.language for t in suite.tasks}}
    harness = {t.id: by_language[t.language] for t in suite.tasks}
    keyed = [(s, (s["task_id"], s["index"], _sha(s.get("completion", "") + "\0" + s.get("solution", "")),
                  harness[s["task_id"]]))
             for s in samples]
    pending = [(s, key) for s, key in keyed if key not in done]
    hooks.start("execute", len(pending))
    appender = _Appender(results_path)
    infra = 0
    try:
        futures = []
        for s, key in pending:
            task = suite.get(s["task_id"])
            if "solution" in s:
                program, how = s["solution"], "solution"
            else:
                built = build_program(task, s["completion"], style_of(task), which)
                program, how = built.program, built.how
            fut = sandbox.submit(task.job(program)) if program is not None else None
            futures.append((s, key, how, fut))
        for s, key, how, fut in futures:
            result = fut.result() if fut is not None else None
            hooks.advance("execute", 1)
            if result is not None and result.status is Status.INFRA_ERROR:
                infra += 1
                continue
            record = {"task_id": s["task_id"], "index": s["index"], "sample_sha": key[2], "harness": key[3],
                      "status": _status(result),
                      "passed": result.passed if result else 0, "total": result.total if result else 0,
                      "extraction": how,
                      "verdicts": [t.verdict.value for t in result.tests] if result else [],
                      "duration_ms": result.duration_ms if result else 0.0}
            appender.write(record)
            done[key] = record
    finally:
        appender.close()
    if infra:
        raise EvalError(f"{infra} samples hit sandbox infrastructure errors and were not scored",
                        "rerun the same command to retry them (finished results are kept)")
    per_task: dict[str, list[dict]] = {}
    for _, key in keyed:
        if key in done:
            per_task.setdefault(key[0], []).append(done[key])
    return per_task


def _tally(per_task: dict[str, list[dict]]) -> tuple[dict[str, tuple[int, int]], Counter]:
    counts = {t: (len(rs), sum(r["status"] == "pass" for r in rs)) for t, rs in per_task.items()}
    mix: Counter = Counter()
    for rs in per_task.values():
        for r in rs:
            mix[r["status"]] += 1
            for v in r["verdicts"]:
                mix[f"test_{v}"] += 1
    return counts, mix


def check_ks(ks: Sequence[int], n: int) -> None:
    bad = [k for k in ks if k < 1 or k > n]
    if bad:
        raise EvalError(f"k={bad[0]} is larger than n={n} samples per task" if bad[0] > n else f"k={bad[0]} < 1",
                        "pass@k needs 1 <= k <= n; raise --n or lower --k")


# --------------------------------------------------------------------------- model eval


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
    stop_after_code: bool = False
    """End each completion once its program is whole (``hf`` backend)."""
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
        _write_json(path, mine)


def eval_model(generator_factory: Callable[[], Any], settings: EvalSettings, suite: Suite, ks: Sequence[int],
               out_dir: Path, sandbox: Any, hooks: Hooks | None = None) -> dict[str, Any]:
    """Sample, execute and summarise one model; resumes whatever ``out_dir`` already holds."""
    hooks = hooks or Hooks()
    check_ks(ks, settings.n)
    _guard_settings(out_dir / "config.json", settings)
    samples_path = out_dir / "samples.jsonl"
    have: dict[tuple[str, int], dict] = {}
    for rec in _read_jsonl(samples_path):
        have[(rec["task_id"], rec["index"])] = rec
    per_chunk = max(1, settings.batch_size // settings.n)
    chunks = [list(suite.tasks[i:i + per_chunk]) for i in range(0, len(suite.tasks), per_chunk)]
    todo = [(ci, chunk) for ci, chunk in enumerate(chunks)
            if any((t.id, j) not in have for t in chunk for j in range(settings.n))]
    generator = None
    from grpo_code.generation.base import Sampling

    sampling = Sampling(n=settings.n, temperature=settings.temperature, top_p=settings.top_p, top_k=settings.top_k,
                        max_new_tokens=settings.max_new_tokens, seed=settings.seed)
    hooks.start("generate", sum(len(c) for _, c in todo))
    if todo:
        generator = generator_factory()
        appender = _Appender(samples_path)
        try:
            for ci, chunk in todo:
                prompts = [render(t, settings.style, settings.system_prompt if settings.system_prompt is not None
                                  else suite.system_prompt, suite.prompt_template) for t in chunk]
                seed = settings.seed * 1_000_003 + ci
                if settings.stop_after_code:
                    completions = generator.generate(prompts, sampling, seed=seed, done=lambda i, text, chunk=chunk:
                                                     whole_program(chunk[i], text, settings.style, settings.extract))
                else:
                    completions = generator.generate(prompts, sampling, seed=seed)
                for task, outs in zip(chunk, completions, strict=True):
                    for j, text in enumerate(outs):
                        rec = {"task_id": task.id, "index": j, "completion": text, "chunk": ci}
                        appender.write(rec)
                        have[(task.id, j)] = rec
                hooks.advance("generate", len(chunk))
        finally:
            appender.close()
            generator.close()
    samples = [have[(t.id, j)] for t in suite.tasks for j in range(settings.n)]
    per_task = _execute(suite, samples, out_dir / "results.jsonl", lambda t: settings.style, sandbox, hooks,
                        settings.extract)
    counts, mix = _tally(per_task)
    summary = summarize(suite, counts, ks, mix, {"model": settings.model, "settings": asdict(settings)})
    _write_json(out_dir / "summary.json", summary)
    return summary


# --------------------------------------------------------------------------- samples file


def score_samples(path: Path, suite: Suite, ks: Sequence[int], out_dir: Path, sandbox: Any,
                  hooks: Hooks | None = None, extract: str = "last") -> dict[str, Any]:
    """pass@k of an existing samples file; only tasks present in the file count."""
    hooks = hooks or Hooks()
    samples = read_samples_file(path, suite)
    n_min = min(Counter(s["task_id"] for s in samples).values())
    check_ks(ks, n_min)
    present = {s["task_id"] for s in samples}
    scored = Suite(**{**suite.__dict__, "tasks": tuple(t for t in suite.tasks if t.id in present)})
    out_dir.mkdir(parents=True, exist_ok=True)

    per_task = _execute(scored, samples, out_dir / "results.jsonl", sample_style, sandbox, hooks, extract)
    counts, mix = _tally(per_task)
    summary = summarize(scored, counts, ks, mix, {"model": f"samples:{path.name}", "samples_file": str(path)})
    _write_json(out_dir / "summary.json", summary)
    return summary
