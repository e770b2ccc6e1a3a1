"""Reading run and eval directories for the report, and the numbers of its summary tables.

A training run directory holds ``config.yaml`` and ``metrics.jsonl`` (one JSON object per
logged step). An eval directory holds ``summary.json`` (one model, or a scored samples
file), or is the ``--out`` of a multi-model eval whose subdirectories each hold one.
Nothing here imports matplotlib.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_code import metric_names as M
from grpo_code.errors import GrpoCodeError, MissingFileError
from grpo_code.evaluate.files import read_jsonl
from grpo_code.evaluate.summary import EvalSummary, SummaryFormatError
from grpo_code.sandbox.results import Verdict

# Every test verdict, in the order they are stacked (pass first).
TEST_VERDICTS = [v.value for v in Verdict]


class ReportError(GrpoCodeError):
    """A directory the report cannot read (neither a run nor an eval, or a corrupt file)."""


@dataclass
class RunData:
    """A training run: its metrics per logged step (later lines win for a step logged twice)."""

    name: str
    path: Path
    rows: list[dict[str, Any]]
    config: dict[str, Any] = field(default_factory=dict)

    def series(self, key: str) -> tuple[list[float], list[float]]:
        """(steps, values) of the rows that logged ``key`` with a finite number."""
        pairs = step_values(self.rows, key)
        return [float(s) for s, _ in pairs], [v for _, v in pairs]

    def steps_of(self, key: str) -> list[tuple[int, float]]:
        """``(step, value)`` of the rows that logged ``key`` with a finite number."""
        return step_values(self.rows, key)

    def completion_limit(self) -> int | None:
        """The completion length limit the run sampled with (tokens)."""
        trl = self.config.get("train", {}).get("trl", {}) or {}
        limit = trl.get("max_completion_length", self.config.get("generation", {}).get("max_new_tokens"))
        return int(limit) if isinstance(limit, (int, float)) else None


@dataclass
class EvalData:
    """One model's (or samples file's) eval: its ``summary.json``."""

    name: str
    path: Path
    summary: EvalSummary

    @property
    def ks(self) -> list[int]:
        return sorted(self.summary.pass_at_k)

    def pass_at(self, k: int) -> tuple[float, float, float] | None:
        """(pass@k, CI low, CI high), or None when this eval did not compute that k."""
        if k not in self.summary.pass_at_k:
            return None
        return (self.summary.pass_at_k[k], *self.summary.ci95[k])

    def per_task(self) -> dict[str, float]:
        """Share of samples passing, per task id."""
        return self.summary.shares()

    def mix(self, tests: bool) -> Counter:
        """Sample statuses (``tests=False``) or test verdicts (``tests=True``) with their counts."""
        out: Counter = Counter()
        for key, count in self.summary.verdicts.items():
            if key.startswith("test_") == tests:
                out[key.removeprefix("test_") if tests else key] += count
        return out


@dataclass
class AuditData:
    """A ``grpo-code tasks audit --out DIR``: its ``audit.json`` (the report's summary)."""

    name: str
    path: Path
    summary: dict[str, Any]

    def scores(self) -> list[float]:
        return [t["score"] for t in self.summary.get("per_task", []) if isinstance(t.get("score"), (int, float))]


Item = RunData | EvalData | AuditData


# --------------------------------------------------------------------------- detection

RUN_FILES = ("config.yaml", "metrics.jsonl")
EXPECTED = ("config.yaml + metrics.jsonl (a training run), summary.json or <model>/summary.json (an eval), or "
            "audit.json (a test audit)")


def _read_summary(path: Path) -> EvalSummary:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path} cannot be read: {exc}", "rerun the eval that wrote it") from None
    try:
        return EvalSummary.from_json(data, name=path.parent.resolve().name)
    except SummaryFormatError as exc:
        raise ReportError(f"{path} is {exc}", "pass a directory written by grpo-code eval") from None


def step_values(rows: list[dict[str, Any]], key: str) -> list[tuple[int, float]]:
    """``(step, value)`` of the metric rows that logged ``key`` with a finite number."""
    out = []
    for row in rows:
        value = row.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out.append((int(row["step"]), float(value)))
    return out


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The step rows of a run's ``metrics.jsonl``, one a step in step order (the one reader
    of that file: ``train``'s summary and the report read the same rows). A step logged
    twice (a resumed run repeats the steps after its checkpoint) keeps its last values; a
    torn last line is ignored, a damaged one named."""
    by_step: dict[int, dict[str, Any]] = {}
    for row in read_jsonl(path):
        # Step rows carry the reward, a held-out eval's line its pass@1 (train.eval_every, at
        # the step of its policy version); the trainer's closing line (train_runtime, ...) neither.
        if (M.REWARD in row or M.EVAL_PASS1 in row) and isinstance(row.get("step"), int):
            by_step.setdefault(row["step"], {}).update(row)
    return [by_step[s] for s in sorted(by_step)]


def _read_config(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def load_dir(path: Path) -> list[Item]:
    """The run or eval(s) in ``path``; names are the directory names (made unique by the caller)."""
    if not path.exists():
        raise MissingFileError(f"{path} not found", "pass a run directory (runs/...) or an eval directory (evals/...)")
    if not path.is_dir():
        raise ReportError(f"{path} is not a directory", f"expected a directory holding {EXPECTED}")
    if all((path / f).is_file() for f in RUN_FILES):
        return [RunData(path.resolve().name, path, read_metrics(path / "metrics.jsonl"),
                        _read_config(path / "config.yaml"))]
    if (path / "summary.json").is_file():
        return [EvalData(path.resolve().name, path, _read_summary(path / "summary.json"))]
    if (path / "audit.json").is_file():
        try:
            audit = json.loads((path / "audit.json").read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ReportError(f"{path / 'audit.json'} cannot be read: {exc}", "rerun the audit that wrote it") from None
        if not isinstance(audit, dict) or not isinstance(audit.get("per_task"), list):
            raise ReportError(f"{path / 'audit.json'} is not an audit", "pass a directory of `tasks audit --out`")
        return [AuditData(path.resolve().name, path, audit)]
    evals = [EvalData(sub.name, sub, _read_summary(sub / "summary.json"))
             for sub in sorted(path.iterdir()) if (sub / "summary.json").is_file()]
    if evals:
        return evals
    raise ReportError(f"{path} is neither a training run nor an eval", f"expected {EXPECTED}")


def load_dirs(paths: list[Path]) -> list[Item]:
    """Every run and eval in ``paths``, in order, with unique names for legends."""
    items = [item for p in paths for item in load_dir(p)]
    counts = Counter(i.name for i in items)
    for item in items:
        if counts[item.name] > 1:  # e.g. the same model evaluated into two directories
            item.name = f"{item.path.resolve().parent.name}/{item.name}"
    seen: Counter = Counter()
    for item in items:
        seen[item.name] += 1
        if seen[item.name] > 1:
            item.name = f"{item.name} ({seen[item.name]})"
    return items


# --------------------------------------------------------------------------- summary tables


@dataclass(frozen=True)
class Window:
    """Steps at one end of a run: which, how many, their mean reward with its standard error, mean pass rate."""

    start: int
    """Its first step number."""
    steps: int
    reward: float
    reward_se: float | None
    """Standard error of the mean over the steps' rewards; None for a single step."""
    pass_rate: float | None


def quarters(rewards: list[tuple[int, float]], passes: list[tuple[int, float]]) -> tuple[Window | None, Window | None]:
    """The first and the last quarter (at least one step each) of per-step ``(step, value)`` series.

    The standard error is taken over the per-step means of the quarter: the steps of a quarter
    train on different prompts, and that spread, not the spread between completions of one
    prompt, is what a change of the reward has to stand out from.
    """
    if not rewards:
        return None, None
    q = max(1, len(rewards) // 4)
    pass_of = dict(passes)

    def window(part: list[tuple[int, float]]) -> Window:
        values = [v for _, v in part]
        mean = sum(values) / len(values)
        se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
        rates = [pass_of[step] for step, _ in part if step in pass_of]
        return Window(part[0][0], len(values), mean, se, sum(rates) / len(rates) if rates else None)

    return window(rewards[:q]), window(rewards[-q:])


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def run_summary(run: RunData) -> dict[str, Any]:
    """Steps, reward and pass rate in the first and last quarter of steps, step time, reward wait."""
    first, last = quarters(run.steps_of(M.REWARD), run.steps_of(M.PASS_RATE))
    _, step_s = run.series(M.STEP_S)
    _, wait = run.series(M.REWARD_WAIT_S)
    _, busy = run.series(M.SANDBOX_BUSY_S)
    return {
        "name": run.name,
        "steps": int(run.rows[-1]["step"]) if run.rows else 0,
        # The windows `grpo-code train` prints at its end, so the two never disagree.
        "reward_first": first.reward if first else None,
        "reward_last": last.reward if last else None,
        "pass_first": first.pass_rate if first else None,
        "pass_last": last.pass_rate if last else None,
        "step_s": _mean(step_s),
        # Share of step time blocked on rewards, and the same wait next to the sandbox's busy time.
        "wait_share": sum(wait) / sum(step_s) if wait and sum(step_s) > 0 else None,
        "wait_of_busy": sum(wait) / sum(busy) if wait and sum(busy) > 0 else None,
    }


def eval_summary(ev: EvalData) -> dict[str, Any]:
    s = ev.summary
    split = (s.settings or {}).get("split")
    return {
        "name": ev.name,
        "model": s.model,
        "suite": s.suite + (f" ({split})" if split and split != "all" else ""),
        "tasks": s.tasks,
        "n": s.n,
        "pass": {k: ev.pass_at(k) for k in ev.ks},
    }
