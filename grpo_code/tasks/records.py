"""Public-format records, before any adapter reads them.

What every adapter shares, below :mod:`grpo_code.tasks.adapters` and
:mod:`grpo_code.tasks.contests` so neither imports the other for it: reading records from a
file or the hub (:func:`read_records`), refusing records of another known format
(:func:`wrong_adapter`), and the pieces of a task record several adapters build
(:func:`io_test`, :data:`STDIN_INSTRUCTION`).
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

from grpo_code.errors import MissingFileError, SuiteError

Record = dict[str, Any]

STDIN_INSTRUCTION = ("Write a complete Python program that reads the input from standard input "
                     "and prints the answer to standard output.")


def read_records(src: str) -> list[Record]:
    """Read records from a local file or, where the hub is reachable, a dataset id."""
    path = Path(src).expanduser()
    if path.is_file():
        name = path.name.lower()
        if name.endswith(".parquet"):
            import pyarrow.parquet as pq

            return pq.read_table(path).to_pylist()
        opener = gzip.open if name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as fh:
            text = fh.read()
        # Plain JSON parsing keeps each record's own types (a dataset schema would unify
        # heterogeneous test values such as the `expected` results of call tests).
        stripped = text.lstrip()
        if stripped.startswith("["):
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise SuiteError(f"{src}: not valid JSON ({exc.msg} at line {exc.lineno})", "check the file") from None
            if not all(isinstance(r, dict) for r in data):
                raise SuiteError(f"{src}: expected a list of objects", "check the file")
            return data
        records = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise SuiteError(f"{src}:{lineno}: not valid JSON ({exc.msg})", "one JSON object per line") from None
                if not isinstance(record, dict):
                    raise SuiteError(f"{src}:{lineno}: expected a JSON object", "one JSON object per line")
                records.append(record)
        return records
    if re.fullmatch(r"[\w.-]+/[\w.-]+(@[\w.-]+)?", src) and not path.exists():
        return _hub_records(src)
    raise MissingFileError(f"input {src!r} not found", "give a .jsonl, .jsonl.gz, .json or .parquet file")


def _hub_records(ref: str) -> list[Record]:
    import datasets

    name, _, split = ref.partition("@")
    try:
        ds = datasets.load_dataset(name, split=split or "test")
    except Exception as exc:
        raise SuiteError(f"cannot load dataset {name!r} from the hub ({type(exc).__name__})",
                         "download it and pass the local file instead") from None
    return [dict(r) for r in ds]


def _known_shape(record: Record) -> str | None:
    """The adapter whose format ``record`` clearly has, by its fields (None: not sure)."""
    if "plus_input" in record or "base_input" in record:
        return "evalplus"
    if any(k in record for k in ("public_tests", "private_tests", "generated_tests")) or (
            "problem" in record and "tests" in record):
        return "codecontests"
    if ("question" in record and "input_output" in record) or ("test_list" in record and "sample_io" in record):
        return "apps"
    if "test_list" in record and ("code" in record or "text" in record):
        return "mbpp"
    if "prompt" in record and ("entry_point" in record or ("task_id" in record and "test" in record)
                               or ("tests" in record and "stop_tokens" in record)):
        return "humaneval"
    return None


def wrong_adapter(record: Record, adapter: str, where: str, accepts: tuple[str, ...]) -> None:
    """Refuse a record of another known format (``accepts``: the shapes ``adapter`` reads)."""
    shape = _known_shape(record)
    if shape is None or shape in accepts:
        return
    if shape == "evalplus":
        plus = "MBPP+" if "assertion" in record or str(record.get("task_id", "")).startswith("Mbpp/") else "HumanEval+"
        raise SuiteError(f"{where}: {plus} (evalplus) records: use the evalplus adapter",
                         "`grpo-code tasks convert evalplus ...`")
    raise SuiteError(f"{where}: {shape} records, not {adapter}: use the {shape} adapter",
                     f"`grpo-code tasks convert {shape} ...`")


def io_test(stdin: str, stdout: str, float_tol: float | None = None, ignore_case: bool = False) -> Record:
    """A stdin/stdout test record; ``float_tol`` compares tokens with that tolerance."""
    test: Record = {"kind": "io", "stdin": stdin, "stdout": stdout}
    if float_tol is not None:
        test.update(compare="tokens", float_tol=float_tol)
    if ignore_case:
        test["ignore_case"] = True
    return test
