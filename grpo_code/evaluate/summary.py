"""The eval summary as a typed record: what ``eval_model`` and ``score_samples`` return, what
``summary.json`` holds and what the report reads back.

On disk the keys of ``pass_at_k`` and ``ci95`` are strings (``"1"``), as JSON needs; in the
record they are ints. ``from_json`` reads summaries written by earlier versions too (no
``tasks_in_suite``/``missing_tasks``: every task of the suite was scored)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class SummaryFormatError(ValueError):
    """A ``summary.json`` that is not an eval summary; the message says what is wrong."""


@dataclass(frozen=True)
class TaskCount:
    """Samples of one task, and how many of them passed."""

    n: int
    correct: int


@dataclass(frozen=True)
class TurnsSummary:
    """Multi-turn eval (``--turns`` > 1): the share of samples solved by each turn."""

    max: int
    pass_at_1: tuple[float, ...]
    """Per turn: samples solved by then (any answer so far passed) over all samples."""
    mean_turns: float
    samples_per_turn: tuple[int, ...]
    """Answers generated and run at each turn (samples stop once their public tests pass)."""
    verdicts: tuple[dict[str, int], ...]

    def to_json(self) -> dict[str, Any]:
        return {"max": self.max, "pass_at_1": list(self.pass_at_1), "mean_turns": self.mean_turns,
                "samples_per_turn": list(self.samples_per_turn), "verdicts": [dict(v) for v in self.verdicts]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TurnsSummary:
        return cls(int(data["max"]), tuple(float(r) for r in data["pass_at_1"]), float(data["mean_turns"]),
                   tuple(int(n) for n in data.get("samples_per_turn", ())),
                   tuple({str(k): int(v) for k, v in m.items()} for m in data.get("verdicts", ())))


@dataclass(frozen=True)
class EvalSummary:
    """pass@k of one model (or one samples file) over a suite."""

    model: str
    """The model id, or ``samples:<file name>`` for a scored samples file."""
    suite: str
    suite_hash: str
    pass_at_k: dict[int, float]
    ci95: dict[int, tuple[float, float]]
    """95% bootstrap interval over tasks, per k."""
    per_task: dict[str, TaskCount]
    """The tasks scored, in suite order."""
    verdicts: dict[str, int]
    """Sample statuses (``pass``, ``fail``, ``no_code``...) and ``test_<verdict>`` counts."""
    tasks_in_suite: int
    missing_tasks: tuple[str, ...] = ()
    """Tasks of the suite without samples (a samples file that leaves some out): not counted."""
    settings: dict[str, Any] | None = None
    """The eval settings (backend, style, sampling...) of a model eval."""
    samples_file: str | None = None
    turns: TurnsSummary | None = None

    @property
    def tasks(self) -> int:
        """Tasks scored."""
        return len(self.per_task)

    @property
    def n(self) -> int | list[int]:
        """Samples per task: one number, or the sorted distinct numbers when tasks differ."""
        values = sorted({c.n for c in self.per_task.values()})
        return values[0] if len(values) == 1 else values

    def shares(self) -> dict[str, float]:
        """Per task with samples: the share of them that passed (its pass@1)."""
        return {t: c.correct / c.n for t, c in self.per_task.items() if c.n}

    @property
    def samples(self) -> int:
        """Samples scored (statuses, not test verdicts)."""
        return sum(v for key, v in self.verdicts.items() if not key.startswith("test_"))

    def to_json(self) -> dict[str, Any]:
        """The ``summary.json`` format (docs/eval.md)."""
        out: dict[str, Any] = {
            "pass_at_k": {str(k): v for k, v in self.pass_at_k.items()},
            "ci95": {str(k): list(v) for k, v in self.ci95.items()},
            "n": self.n,
            "tasks": self.tasks,
            "tasks_scored": self.tasks,
            "tasks_in_suite": self.tasks_in_suite,
            "missing_tasks": list(self.missing_tasks),
            "suite": self.suite,
            "suite_hash": self.suite_hash,
            "verdicts": dict(sorted(self.verdicts.items())),
            "per_task": {t: {"n": c.n, "correct": c.correct} for t, c in self.per_task.items()},
            "model": self.model,
        }
        if self.settings is not None:
            out["settings"] = self.settings
        if self.samples_file is not None:
            out["samples_file"] = self.samples_file
        if self.turns is not None:
            out["turns"] = self.turns.to_json()
        return out

    @classmethod
    def from_json(cls, data: Any, name: str = "") -> EvalSummary:
        """The record of a ``summary.json``'s contents; ``name`` stands in for a missing model
        id. Raises :class:`SummaryFormatError` naming the first thing that is wrong."""
        if not isinstance(data, dict) or not isinstance(data.get("pass_at_k"), dict):
            raise SummaryFormatError("not an eval summary (no pass_at_k)")
        if not isinstance(data.get("settings"), (dict, type(None))):
            raise SummaryFormatError(f"malformed eval summary (settings is {type(data['settings']).__name__})")
        try:
            pass_k = {int(k): float(v) for k, v in data["pass_at_k"].items()}
            ci = {int(k): (float(v[0]), float(v[1])) for k, v in (data.get("ci95") or {}).items()}
            per_task = {str(t): TaskCount(int(c["n"]), int(c["correct"]))
                        for t, c in (data.get("per_task") or {}).items()}
            missing = tuple(str(t) for t in data.get("missing_tasks") or ())
            return cls(
                model=str(data.get("model") or name), suite=str(data.get("suite", "?")),
                suite_hash=str(data.get("suite_hash", "")), pass_at_k=pass_k,
                ci95={k: ci.get(k, (v, v)) for k, v in pass_k.items()}, per_task=per_task,
                verdicts={str(k): int(v) for k, v in (data.get("verdicts") or {}).items()},
                tasks_in_suite=int(data.get("tasks_in_suite", len(per_task) + len(missing))),
                missing_tasks=missing, settings=data.get("settings"), samples_file=data.get("samples_file"),
                turns=TurnsSummary.from_json(data["turns"]) if data.get("turns") else None)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise SummaryFormatError(f"malformed eval summary ({type(exc).__name__}: {exc})") from None
