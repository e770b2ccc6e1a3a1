"""Samples files: ``{"task_id", "completion"}`` or ``{"task_id", "solution"}`` JSONL lines,
the formats of the common HumanEval/evalplus tools. Read by ``grpo-code eval --samples``
and ``grpo-code tasks check --solutions``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from grpo_code.errors import MissingFileError, SuiteError


def sample_style(task: Any) -> str:
    """How a ``completion`` of a samples file is read: HumanEval-style files hold the body
    that continues the prefix (``raw``); instruct tasks hold a chat answer (``chat``)."""
    return "raw" if task.mode == "complete" else "chat"


def read_samples_file(path: Path, suite: Any) -> list[dict[str, Any]]:
    """Samples in file order, each with its ``index`` among the samples of its task."""
    if not path.is_file():
        raise MissingFileError(f"samples file {str(path)!r} not found", "give a JSONL file of task_id + completion")
    ids = {t.id for t in suite.tasks}
    counter: Counter = Counter()
    out = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            raise SuiteError(f"{path}:{lineno}: not valid JSON", "one JSON object per line") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("task_id"), str):
            raise SuiteError(f"{path}:{lineno}: task_id missing", 'each line needs "task_id"')
        if rec["task_id"] not in ids:
            raise SuiteError(f"{path}:{lineno}: task_id {rec['task_id']!r} is not in suite {suite.name!r}",
                             "use the samples with the suite they were made for (--tasks)")
        sample: dict[str, Any] = {"task_id": rec["task_id"], "index": counter[rec["task_id"]]}
        if isinstance(rec.get("solution"), str):
            sample["solution"] = rec["solution"]
        elif isinstance(rec.get("completion"), str):
            sample["completion"] = rec["completion"]
        else:
            raise SuiteError(f"{path}:{lineno}: needs a 'completion' or 'solution' string", "see docs/tasks.md")
        counter[rec["task_id"]] += 1
        out.append(sample)
    if not out:
        raise SuiteError(f"{path} holds no samples", "one JSON object per line")
    return out
