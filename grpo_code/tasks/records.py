"""Public-format records, before any adapter reads them.

What every adapter shares, below :mod:`grpo_code.tasks.adapters` and
:mod:`grpo_code.tasks.contests` so neither imports the other for it: reading records from a
file or the hub (:func:`read_records`), the loop that converts every record and collects
the ones it cannot read (:func:`convert_each`), refusing records of another known format
(:func:`wrong_adapter`), and the pieces of a task record several adapters build
(:func:`io_test`, :data:`STDIN_INSTRUCTION`).

Unreadable records: an adapter's per-record function raises :class:`RecordError` naming the
record's field and the reason; :func:`convert_each` tries every record, turns each such
error into an :class:`Unreadable` (index, id, field, reason) and, when there are any, raises
:class:`UnreadableRecordsError` listing them all, with the tasks of the other records
attached (``grpo-code tasks convert --skip-invalid`` writes those). An error that concerns
the whole file (records of another format, an option that does not apply) is a plain
:class:`~grpo_code.errors.SuiteError` and stops at once.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_code.errors import MissingFileError, SuiteError

Record = dict[str, Any]

STDIN_INSTRUCTION = ("Write a complete Python program that reads the input from standard input "
                     "and prints the answer to standard output.")
HINT = "is this file in the format you named? (docs/tasks.md, Converting public benchmarks)"
SKIP_HINT = "`grpo-code tasks convert ... --skip-invalid` converts the other records and lists the skipped ones"


class RecordError(SuiteError):
    """One record cannot be read. ``where`` is the record and its field, as adapters write
    them (``apps[3] (42): test_list[0].input``), ``reason`` what is wrong there."""

    def __init__(self, where: str, reason: str, hint: str | None = HINT):
        super().__init__(f"{where}: {reason}", hint)
        self.where = where
        self.reason = reason


@dataclass(frozen=True)
class Unreadable:
    """A record left out of a conversion: its index in the file, its id (None: it has
    none), the field that could not be read and why."""

    index: int
    id: str | None
    field: str
    reason: str
    hint: str | None = None

    def describe(self, source: str) -> str:
        return f"{record_where(source, self.index, self.id)}: {self.field}: {self.reason}"

    def to_dict(self) -> Record:
        """The entry ``suite.yaml`` keeps under ``skipped:``."""
        return {"index": self.index, "id": self.id, "field": self.field, "reason": self.reason}


@dataclass(frozen=True)
class Conversion:
    """What an adapter made of a file: the tasks of the records it read (``indices``: the
    record each came from) and the records it could not read."""

    tasks: tuple[Record, ...]
    indices: tuple[int, ...]
    skipped: tuple[Unreadable, ...] = ()

    @property
    def total(self) -> int:
        return len(self.tasks) + len(self.skipped)


class UnreadableRecordsError(SuiteError):
    """Some records of a file cannot be read: ``conversion`` lists them all and holds the
    tasks of the others."""

    SHOWN = 5

    def __init__(self, source: str, conversion: Conversion):
        self.source = source
        self.conversion = conversion
        problems = conversion.skipped
        shown = "; ".join(p.describe(source) for p in problems[:self.SHOWN])
        more = f"; +{len(problems) - self.SHOWN} more" if len(problems) > self.SHOWN else ""
        count = f"{len(problems)} of {conversion.total} records cannot be read: " if len(problems) > 1 else ""
        own = problems[0].hint if len(problems) == 1 and problems[0].hint else "fix or remove them"
        super().__init__(count + shown + more, f"{own}; {SKIP_HINT}")


MAX_INT_DIGITS = 2_000_000
"""Digits of the largest integer a record's JSON may hold (a LiveCodeBench answer runs to
hundreds of thousands); each parses in about 2.5 s at most."""
MAX_BIG_DIGITS = 4_000_000
"""Digits of all integers past Python's 4300-digit limit in one JSON text together: parsing
them costs bounded time (seconds), however large the field."""


class JsonTooLarge(ValueError):
    """A JSON text holds integers past :data:`MAX_INT_DIGITS` or :data:`MAX_BIG_DIGITS`."""


def _split_int(digits: str, powers: dict[int, int]) -> int:
    """A long string of decimal digits as an int by halves: subquadratic where ``int()`` is
    quadratic (1.6 million digits: 1.8 s, against minutes)."""
    n = len(digits)
    if n <= 3000:
        return int(digits)
    k = n // 2
    power = powers.get(k)
    if power is None:
        power = powers[k] = 10 ** k
    return _split_int(digits[:-k], powers) * power + _split_int(digits[-k:], powers)


def parse_json(text: str | bytes) -> Any:
    """``json.loads`` for dataset text: integers of any length up to :data:`MAX_INT_DIGITS`
    (read in bounded time, never with the digit limit lifted); a too-large integer is a
    :class:`JsonTooLarge`, nesting deeper than the parser's stack a ``RecursionError``:
    callers turn both into a one-line error or an unreadable record."""
    return json.loads(text, cls=json_decoder())


def json_decoder() -> type[json.JSONDecoder]:
    """A ``json.JSONDecoder`` class whose integers are read as :func:`parse_json` reads them
    (its own budget of big digits; for one field, or one stream of values)."""
    budget = [MAX_BIG_DIGITS]
    powers: dict[int, int] = {}

    def big(token: str) -> int:
        if len(token) <= 4000:
            return int(token)
        digits = token.lstrip("-")
        budget[0] -= len(digits)
        if len(digits) > MAX_INT_DIGITS or budget[0] < 0:
            raise JsonTooLarge(f"an integer of {len(digits)} digits (the most read is {MAX_INT_DIGITS}, "
                               f"{MAX_BIG_DIGITS} in one field)")
        value = _split_int(digits, powers)
        return -value if token.startswith("-") else value

    class Decoder(json.JSONDecoder):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**{**kwargs, "parse_int": big})

    return Decoder


def json_problem(exc: BaseException) -> str:
    """What is wrong with a JSON text that :func:`parse_json` refused, in a few words."""
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc.msg})"
    if isinstance(exc, RecursionError):
        return "JSON nested too deeply to read"
    if isinstance(exc, MemoryError):
        return "JSON too large to read in memory"
    return f"not readable JSON ({str(exc).split(';')[0]})"


UNREADABLE_JSON = (ValueError, RecursionError, MemoryError)
"""What :func:`parse_json` raises on text it cannot read (``JSONDecodeError`` is a ``ValueError``)."""


def record_where(source: str, index: int, ident: Any = None) -> str:
    """How errors name a record: ``apps.jsonl[3] (4123)`` (the id when it has one)."""
    return f"{source}[{index}]" + (f" ({ident})" if ident is not None else "")


def first_key(*keys: str) -> Callable[[Record], Any]:
    """A record's id: the first of ``keys`` it has a non-empty value for (None: none)."""
    return lambda r: next((r[k] for k in keys if r.get(k) not in (None, "")), None)


def convert_each(records: list[Record], source: str, one: Callable[[Record, int, str], Record],
                 ident: Callable[[Record], Any]) -> list[Record]:
    """The loop every adapter shares: ``one(record, index, where)`` turns a record into a task
    or raises :class:`RecordError`. Every record is tried; when some cannot be read,
    :class:`UnreadableRecordsError` lists them all and carries the others' tasks."""
    tasks: list[Record] = []
    indices: list[int] = []
    skipped: list[Unreadable] = []
    for i, record in enumerate(records):
        raw = ident(record)
        rid = None if raw is None else str(raw)
        where = record_where(source, i, rid)
        try:
            tasks.append(one(record, i, where))
        except RecordError as exc:
            field = exc.where.removeprefix(where).removeprefix(": ").replace(": ", ".") or "(record)"
            skipped.append(Unreadable(i, rid, field, exc.reason, exc.hint))
            continue
        except RecursionError:  # a record nested past the interpreter's stack (its JSON, its code)
            skipped.append(Unreadable(i, rid, "(record)", "nested too deeply to read", "remove the record"))
            continue
        except MemoryError:
            skipped.append(Unreadable(i, rid, "(record)", "too large to convert in memory", "remove the record"))
            continue
        indices.append(i)
    if skipped:
        raise UnreadableRecordsError(source, Conversion(tuple(tasks), tuple(indices), tuple(skipped)))
    return tasks


MAX_RECORD_MB = int(os.environ.get("GRPO_CODE_MAX_RECORD_MB", "256"))
"""The longest record (one JSONL line, or a whole JSON file) read, in MiB of text: a
compressed file is checked while it streams, so a small gzip that unpacks to gigabytes is
refused at this size, never read whole first."""


def read_records(src: str) -> list[Record]:
    """Read records from a local file or, where the hub is reachable, a dataset id. JSONL
    (plain or gzip) streams line by line, parquet row group by row group: memory follows the
    records kept, not what a file unpacks to."""
    path = Path(src).expanduser()
    if path.is_file():
        name = path.name.lower()
        if name.endswith(".parquet"):
            return _parquet_records(path, src)
        opener = gzip.open if name.endswith(".gz") else open
        try:
            with opener(path, "rt", encoding="utf-8") as fh:
                return _text_records(fh, src)
        except (OSError, EOFError, UnicodeDecodeError, zlib.error) as exc:
            raise SuiteError(f"{src}: cannot be read ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})",
                             "check the file (a truncated or corrupt download?)") from None
    if re.fullmatch(r"[\w.-]+/[\w.-]+(@[\w.-]+)?", src) and not path.exists():
        return _hub_records(src)
    raise MissingFileError(f"input {src!r} not found", "give a .jsonl, .jsonl.gz, .json or .parquet file")


def _long_line(fh: Any, cap: int) -> str | None:
    """The next line if it is at most ``cap`` characters; else the rest of it is skipped
    without being kept and None returned."""
    line = fh.readline(cap + 1)
    if len(line) <= cap or line.endswith("\n"):
        return line
    while True:
        rest = fh.readline(1 << 20)
        if not rest or rest.endswith("\n"):
            return None


def _text_records(fh: Any, src: str) -> list[Record]:
    cap = MAX_RECORD_MB << 20
    first = fh.read(1)
    while first.isspace():
        first = fh.read(1)
    if first == "[":  # one JSON list: read whole, up to the cap
        text = first + fh.read(cap)
        if fh.read(1):
            raise SuiteError(f"{src}: a JSON file over {MAX_RECORD_MB} MiB",
                             "write it as JSONL (one record per line), or raise GRPO_CODE_MAX_RECORD_MB")
        data = _json_or_error(text, src, "check the file", "check the file")
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise SuiteError(f"{src}: expected a list of objects", "check the file")
        return data
    # Plain JSON parsing keeps each record's own types (a dataset schema would unify
    # heterogeneous test values such as the `expected` results of call tests).
    records = []
    lineno = 0
    pending = first
    while True:
        line = _long_line(fh, cap)
        lineno += 1
        if line is None:
            raise SuiteError(f"{src}:{lineno}: a record over {MAX_RECORD_MB} MiB",
                             "remove it, or raise GRPO_CODE_MAX_RECORD_MB")
        line, pending = pending + line, ""
        if not line:
            return records
        if not line.strip():
            continue
        record = _json_or_error(line, f"{src}:{lineno}", "one JSON object per line", "remove the record")
        if not isinstance(record, dict):
            raise SuiteError(f"{src}:{lineno}: expected a JSON object", "one JSON object per line")
        records.append(record)


def _json_or_error(text: str, where: str, invalid_hint: str, unreadable_hint: str) -> Any:
    """The value of a file's (or a line's) JSON text, or a one-line error naming ``where``."""
    try:
        return parse_json(text)
    except json.JSONDecodeError as exc:
        at = f" at line {exc.lineno}" if exc.lineno > 1 else ""
        raise SuiteError(f"{where}: not valid JSON ({exc.msg}{at})", invalid_hint) from None
    except UNREADABLE_JSON as exc:
        raise SuiteError(f"{where}: {json_problem(exc)}", unreadable_hint) from None


def _parquet_records(path: Path, src: str) -> list[Record]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    records: list[Record] = []
    try:
        shard = pq.ParquetFile(path)
        for group in range(shard.num_row_groups):
            for batch in shard.iter_batches(batch_size=256, row_groups=[group]):
                records.extend(batch.to_pylist())
    except (pa.ArrowException, OSError) as exc:
        raise SuiteError(f"{src}: not a readable parquet file ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})",
                         "check the file (a truncated or corrupt download?)") from None
    return records


def _hub_records(ref: str) -> list[Record]:
    import datasets

    name, _, split = ref.partition("@")
    try:
        ds = datasets.load_dataset(name, split=split or "test")
    except Exception as exc:
        raise SuiteError(f"cannot load dataset {name!r} from the hub ({type(exc).__name__})",
                         "download it and pass the local file instead") from None
    return [dict(r) for r in ds]


_TACO_ONLY = ("raw_tags", "skill_types", "Expected Time Complexity", "Expected Auxiliary Space", "picture_num")
"""Fields TACO has and APPS does not."""


def _rllm_tests(tests: Any) -> bool:
    """rllm's DeepCoder tests the ``codecontests`` adapter does not read (it reads their
    stdin/stdout ones): a LeetCode ``functional`` script, function-call cases."""
    if isinstance(tests, str):
        return any(word in tests for word in ('"functional"', '"function_call"', '"fn_name"'))
    if isinstance(tests, dict):
        return "functional" in tests or bool(tests.get("fn_name"))
    return isinstance(tests, list) and any(isinstance(t, dict) and (
        t.get("testtype") == "functional" or t.get("type") == "function_call") for t in tests)


def detect_format(records: list[Record]) -> str:
    """The adapter that reads these records, by their fields; a :class:`SuiteError` that
    lists the fields seen when no known shape fits them all."""
    shapes = {_known_shape(r) for r in records[:200]}
    if len(shapes) == 1 and None not in shapes:
        return shapes.pop()
    fields = sorted({k for r in records[:200] for k in r})
    if len(shapes - {None}) > 1:
        raise SuiteError("the records are of several formats: " + ", ".join(sorted(s for s in shapes if s)),
                         "convert each format's records on their own")
    raise SuiteError(f"cannot tell the format of these records (fields: {', '.join(fields[:30])})",
                     "name it: grpo-code tasks convert FORMAT ... (docs/tasks.md, Converting public benchmarks)")


def _known_shape(record: Record) -> str | None:
    """The adapter whose format ``record`` clearly has, by its fields (None: not sure)."""
    if "plus_input" in record or "base_input" in record:
        return "evalplus"
    if "question_content" in record and ("public_test_cases" in record or "private_test_cases" in record):
        return "livecodebench"
    if "verification_info" in record:
        return "primeintellect"
    if "question" in record and "test" in record and ("test_info" in record or "gpt_difficulty" in record):
        return "kodcode"
    if "official_tests" in record or ("interaction_format" in record and "input_format" in record):
        return "codeforces"
    if "problem" in record and "tests" in record and _rllm_tests(record["tests"]):
        return "deepcoder"
    if any(k in record for k in ("public_tests", "private_tests", "generated_tests")) or (
            "problem" in record and "tests" in record):
        return "codecontests"
    if "question" in record and "input_output" in record and any(k in record for k in _TACO_ONLY):
        return "taco"
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


def first_solution(value: Any) -> str | None:
    """The first solution of a record's ``solutions``, in each shape the public copies use:
    a list of programs (DeepCoder's TACO and Codeforces records), one program as a string
    (rllm's LeetCode test file), or a list as JSON text (TACO's own)."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            decoded = parse_json(value)
        except UNREADABLE_JSON:
            decoded = None
        if isinstance(decoded, list):
            value = decoded
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, list):
        return next((s for s in value if isinstance(s, str) and s.strip()), None)
    return None


def io_test(stdin: str, stdout: str, float_tol: float | None = None, ignore_case: bool = False) -> Record:
    """A stdin/stdout test record; ``float_tol`` compares tokens with that tolerance."""
    test: Record = {"kind": "io", "stdin": stdin, "stdout": stdout}
    if float_tol is not None:
        test.update(compare="tokens", float_tol=float_tol)
    if ignore_case:
        test["ignore_case"] = True
    return test
