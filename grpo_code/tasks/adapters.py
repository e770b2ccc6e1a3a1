"""Adapters from public benchmark formats to our task records.

Each adapter is a function ``(records, **options) -> list[dict]`` registered in
:data:`ADAPTERS`; adding a format is one function plus one line there. Records come from
local files (``.jsonl``, ``.jsonl.gz``, ``.json`` holding a list, ``.parquet``) or a
Hugging Face dataset id (``org/name[@split]``) where the hub is reachable
(:mod:`grpo_code.tasks.records`).

- ``humaneval``: HumanEval-style records (``task_id``, ``prompt``, ``canonical_solution``,
  ``test``, ``entry_point``); the model completes the prompt. ``language`` option for
  multi-language files of that shape (HumanEval-X, MultiPL-E: JavaScript, C++), whose
  asserts become ``call`` tests where they can (:mod:`grpo_code.tasks.native_asserts`).
- ``mbpp``: MBPP full (``text``, ``code``, ``test_list``, ``test_setup_code``) and sanitized
  (``prompt``, ``code``, ``test_list``, ``test_imports``). The prompt shows one test so the
  function name is known; each assert is its own test; customary id-range splits.
- ``stdio``: APPS / CodeContests style: a problem text and stdin/stdout pairs.
- ``call``: LiveCodeBench / TACO functional style: a function name, argument lists and
  expected return values.
- ``codecontests``, ``apps``: those datasets with their test groups, limits, call-based
  problems and judging notes kept (:mod:`grpo_code.tasks.contests`).
- ``livecodebench``, ``taco``, ``primeintellect``, ``deepcoder``: the sets code RL trains
  on (:mod:`grpo_code.tasks.rl_sets`); ``kodcode``: pytest-style test modules, collected
  here and run without a runner (:mod:`grpo_code.tasks.kodcode`); ``codeforces``: open-r1's
  Codeforces problems, interactive ones included (:mod:`grpo_code.tasks.codeforces`).

``convert("auto", ...)`` tells the format from the records' fields
(:func:`~grpo_code.tasks.records.detect_format`).

Records of a clearly different known format are refused with the adapter to use, rather
than converted with tests missing (HumanEval+ records read as HumanEval lose their plus tests).

Each adapter reads one record at a time through :func:`~grpo_code.tasks.records.convert_each`:
a record it cannot read raises :class:`~grpo_code.tasks.records.RecordError` (field and
reason), every other record is still read, and the adapter then raises
:class:`~grpo_code.tasks.records.UnreadableRecordsError` listing all of them.
:func:`convert` is strict; :func:`convert_all` returns the readable tasks and the
unreadable records instead (``tasks convert --skip-invalid``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grpo_code.errors import SuiteError
from grpo_code.sandbox.languages import ALIASES, FACTS, last_function
from grpo_code.tasks import native_asserts, rl_sets
from grpo_code.tasks.codeforces import codeforces
from grpo_code.tasks.contests import apps, codecontests
from grpo_code.tasks.evalplus import evalplus
from grpo_code.tasks.examples import docstring_examples
from grpo_code.tasks.helpers import native_helpers, prompt_helpers
from grpo_code.tasks.kodcode import kodcode
from grpo_code.tasks.records import (
    STDIN_INSTRUCTION,
    UNREADABLE_JSON,
    Conversion,
    Record,
    RecordError,
    UnreadableRecordsError,
    convert_each,
    detect_format,
    first_key,
    io_test,
    json_problem,
    parse_json,
    read_records,
    wrong_adapter,
)

# read_records and wrong_adapter live in records.py (shared with contests.py); they stay
# importable from here, where callers have always found them.
__all__ = ["ADAPTERS", "Record", "call", "convert", "convert_all", "humaneval", "mbpp", "read_records", "stdio",
           "wrong_adapter"]


def _need(record: Record, key: str, where: str) -> Any:
    if key not in record or record[key] is None:
        raise RecordError(f"{where}: {key}", "missing", "is this file in the format you named?")
    return record[key]


# --------------------------------------------------------------------------- humaneval

# MultiPL-E names languages by file extension (sandbox/languages.py knows the aliases).
_LANGUAGE_ALIASES = ALIASES
# How a test names the function under test (MultiPL-E: `let candidate = f;`, `auto candidate = f;`).
_CANDIDATE = re.compile(r"\bcandidate\s*=\s*([A-Za-z_$][\w$]*)\s*;")
_CHECKED = re.compile(r"^check\(\s*([A-Za-z_]\w*)\s*\)", re.M)
_LAST_FUNCTION = {k: pattern for k in FACTS if (pattern := last_function(k)) is not None}


def _entry_point(language: str, prompt: str, test: str) -> str | None:
    """The function a HumanEval-style record tests, for files without an ``entry_point``."""
    match = _CANDIDATE.search(test) or _CHECKED.search(test)  # MultiPL-E's candidate, HumanEval-X's check(f)
    if match:
        return match.group(1)
    pattern = _LAST_FUNCTION.get(language)
    found = [next(g for g in m.groups() if g) for m in pattern.finditer(prompt)] if pattern else []
    return found[-1] if found else None


def _script_test(language: str, test: str, entry: str | None) -> str:
    if language == "python":
        if re.search(r"^def check\(", test, re.M) and not re.search(r"^check\(", test, re.M):
            return f"{test}\n\ncheck({entry})\n"
        return test
    if language == "cpp":
        # MultiPL-E's C++ tests open with the `}` that closes the prompt's function (its
        # completions stop before it); here programs are whole functions, so it goes.
        return re.sub(r"\A\s*}[ \t]*\n", "", test, count=1)
    return test


def _tests(language: str, test: str, entry: str | None, prompt: str) -> list[Record]:
    """A record's tests: for JavaScript and C++, ``call`` tests judged outside the program's
    process where every statement converts (:mod:`~grpo_code.tasks.native_asserts`); else
    one ``script`` test (for those languages unattested: docs/rewards.md)."""
    code = _script_test(language, test, entry)
    calls = native_asserts.call_tests(language, code, entry, prompt)
    return calls if calls else [{"kind": "script", "code": code}]


def humaneval(records: list[Record], language: str = "python", source: str = "humaneval") -> list[Record]:
    """HumanEval and its multi-language versions with the same shape: HumanEval-X
    (``declaration``, ``canonical_solution``) and MultiPL-E (``name``, ``tests``, no
    ``entry_point`` or solution). Python tests become one ``script`` test; JavaScript and
    C++ asserts become ``call`` tests where they all convert (:func:`_tests`)."""

    def one(r: Record, i: int, where: str) -> Record:
        wrong_adapter(r, "humaneval", where, accepts=("humaneval",))
        declared = _LANGUAGE_ALIASES.get(str(r.get("language", "")).lower())
        if declared is not None and declared != language:  # the file's language: no record would fit
            raise SuiteError(f"{where}: the record's language is {r['language']!r}, not {language}",
                             f"pass --language {declared}")
        task_id = r.get("task_id") if r.get("task_id") is not None else _need(r, "name", where)
        prompt = _need(r, "prompt", where)
        test = r.get("test") if r.get("test") is not None else _need(r, "tests", where)
        for key, value in (("prompt", prompt), ("test" if r.get("test") is not None else "tests", test)):
            if not isinstance(value, str):
                raise RecordError(f"{where}: {key}", f"is {type(value).__name__}, expected a string")
        declaration = r.get("declaration")
        defines = _LAST_FUNCTION.get(language)
        if isinstance(declaration, str) and declaration.strip() and defines is not None and not defines.search(prompt):
            # HumanEval-X's Rust: the prompt is the doc comment, the declaration the `use`
            # lines and the signature the solution continues.
            prompt = prompt + declaration
        if isinstance(r.get("test_setup"), str) and r["test_setup"].strip():
            test = r["test_setup"] + "\n" + test  # HumanEval-X's Go: the test file's package and imports
        entry = r.get("entry_point") or _entry_point(language, prompt, test)
        if entry is None and language == "python":
            _need(r, "entry_point", where)
        task: Record = {
            "id": str(task_id),
            "prompt": prompt,
            "language": language,
            "mode": "complete",
            "tests": _tests(language, test, entry, prompt),
            "metadata": {"source": source, "split": "test"},
        }
        if entry:
            task["entry_point"] = entry
        examples = docstring_examples(prompt, entry) if language == "python" else []
        if examples:
            task["public_tests"] = examples
        if r.get("canonical_solution") is not None:
            task["reference"] = prompt + r["canonical_solution"]
        if language == "python":
            helpers = prompt_helpers(prompt, entry)
        elif any(t["kind"] == "script" for t in task["tests"]):  # for the script test's judge
            helpers = native_helpers(language, prompt, entry)
        else:
            helpers = None
        if helpers:  # the prompt's encode_cyclic, poly: the tests call these, not the program's
            task["helpers"] = helpers
        return task

    return convert_each(records, source, one, first_key("task_id", "name"))


# --------------------------------------------------------------------------- mbpp

MBPP_SPLITS = (("prompt", 1, 10), ("test", 11, 510), ("validation", 511, 600), ("train", 601, 974))


def _mbpp_split(task_id: int) -> str:
    for name, lo, hi in MBPP_SPLITS:
        if lo <= task_id <= hi:
            return name
    return "train"


def _called_name(assertion: str, code: str) -> str | None:
    defined = re.findall(r"^def\s+([A-Za-z_]\w*)", code, re.M)
    for name in re.findall(r"([A-Za-z_]\w*)\s*\(", assertion):
        if name in defined:
            return name
    return defined[-1] if defined else None


def mbpp(records: list[Record], source: str = "mbpp") -> list[Record]:
    def one(r: Record, i: int, where: str) -> Record:
        wrong_adapter(r, "mbpp", where, accepts=("mbpp",))
        raw_id = _need(r, "task_id", where)
        try:
            task_id = int(raw_id)
        except (TypeError, ValueError):
            raise RecordError(f"{where}: task_id", f"{raw_id!r} is not a task number") from None
        tests = _need(r, "test_list", where)
        if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
            raise RecordError(f"{where}: test_list", "expected a list of assert statements")
        if not tests:
            raise RecordError(f"{where}: test_list", "empty", "every MBPP task needs tests")
        code = r.get("code")
        key = "prompt" if r.get("prompt") is not None else "text"
        text = _need(r, key, where)
        if not isinstance(text, str):
            raise RecordError(f"{where}: {key}", f"is {type(text).__name__}, expected a string")
        setup = "\n".join(r.get("test_imports") or [])
        if r.get("test_setup_code"):
            setup = (setup + "\n" + r["test_setup_code"]).strip()
        prefix = setup + "\n" if setup.strip() else ""
        prompt = f"{text.strip()}\nYour code should pass this test:\n{tests[0].strip()}"
        task: Record = {
            "id": f"Mbpp/{task_id}",
            "prompt": prompt,
            "language": "python",
            "mode": "instruct",
            "tests": [{"kind": "script", "code": prefix + t} for t in tests],
            "public_tests": [{"kind": "script", "code": prefix + tests[0]}],  # the one the prompt shows
            "limits": {"timeout_s": 10},
            "metadata": {"source": source, "split": _mbpp_split(task_id)},
        }
        if code:
            task["reference"] = code
            entry = _called_name(tests[0], code)
            if entry:
                task["entry_point"] = entry
        return task

    return convert_each(records, source, one, first_key("task_id"))


# --------------------------------------------------------------------------- stdio


def _maybe_json(value: Any) -> Any:
    """JSON text parsed, other text as it is (a stdin that starts with a bracket)."""
    if isinstance(value, str) and value.strip()[:1] in "[{":
        try:
            return parse_json(value)
        except json.JSONDecodeError:
            return value
        except UNREADABLE_JSON as exc:  # JSON, but too deep or too large to read
            raise RecordError("(record)", json_problem(exc)) from None
    return value


def _first(record: Record, keys: tuple[str, ...]) -> Any:
    for key in keys:
        if record.get(key) not in (None, "", []):
            return record[key]
    return None


def _values(value: Any, where: str, name: str) -> list:
    """The per-test values of one side; one string is one test, not one per character."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise RecordError(f"{where}: {name}", f"is {type(value).__name__}, expected a list", "one value per test")
    return value


def _zip(inputs: Any, outputs: Any, where: str, names: tuple[str, str] = ("inputs", "outputs")) -> list[tuple[Any, Any]]:
    inputs, outputs = _values(inputs, where, names[0]), _values(outputs, where, names[1])
    if len(inputs) != len(outputs):
        raise RecordError(f"{where}: {names[1]}", f"{len(inputs)} inputs but {len(outputs)} outputs",
                          "each input needs its output")
    return list(zip(inputs, outputs, strict=True))


def _maybe_list(value: Any) -> Any:
    """A JSON list of test values held as text; other text is one stdin/stdout."""
    parsed = _maybe_json(value)
    if isinstance(parsed, list) and all(isinstance(v, (str, list)) for v in parsed):
        return parsed
    return value


def _io_pairs(r: Record, where: str) -> list[tuple[Any, Any]]:
    """Every stdin/stdout pair of a record, whatever the keys its dataset keeps them under."""
    pairs: list[tuple[Any, Any]] = []
    io = _maybe_json(r.get("input_output"))
    if isinstance(io, dict) and "inputs" in io:
        pairs += _zip(io.get("inputs"), io.get("outputs"), f"{where}: input_output")
    for key in ("public_tests", "private_tests", "generated_tests"):
        block = _maybe_json(r.get(key))
        if isinstance(block, dict):
            pairs += _zip(block.get("input"), block.get("output"), f"{where}: {key}", ("input", "output"))
    if "inputs" in r and "outputs" in r:
        pairs += _zip(_maybe_list(r["inputs"]), _maybe_list(r["outputs"]), where)
    return pairs


def _reference(r: Record) -> str | None:
    sols = _maybe_json(r.get("solutions") if r.get("solutions") is not None else r.get("reference"))
    if isinstance(sols, str):
        return sols
    if isinstance(sols, dict) and "solution" in sols:  # CodeContests: {language: [...], solution: [...]}
        for lang, sol in zip(sols.get("language") or [], sols.get("solution") or [], strict=False):
            if lang in (3, "PYTHON3", "python3", "python"):
                return sol
        return None
    if isinstance(sols, list) and sols and isinstance(sols[0], str):
        return sols[0]
    return None


_ID_KEYS = ("id", "task_id", "problem_id", "name", "question_id")


def _record_id(r: Record, i: int, prefix: str) -> str:
    value = _first(r, _ID_KEYS)
    return str(value) if value is not None else f"{prefix}/{i}"


def _side(value: Any, where: str) -> str:
    """One stdin or stdout: a string, or a list of lines (joined, with a final newline)."""
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return "\n".join(value) + "\n"
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    raise RecordError(where, f"is {type(value).__name__}, expected a string or a list of lines")


def stdio(records: list[Record], source: str = "stdio", float_tol: float | None = None) -> list[Record]:
    """Any problem text with stdin/stdout pairs. CodeContests and APPS records are read
    too, but every test lands in one list: the ``codecontests`` and ``apps`` adapters keep
    the test groups, time and memory limits, call-based problems and judging notes."""

    def one(r: Record, i: int, where: str) -> Record:
        wrong_adapter(r, "stdio", where, accepts=("codecontests", "apps", "taco"))
        text = _first(r, ("prompt", "question", "description", "problem", "text", "question_content"))
        if not isinstance(text, str):
            raise RecordError(f"{where}: prompt", "problem text missing (looked for prompt, question, description, "
                              "problem)", "is this a stdin/stdout problem file?")
        pairs = _io_pairs(r, where)
        if not pairs:
            raise RecordError(f"{where}: input_output", "no stdin/stdout pairs (looked for input_output, "
                              "public_tests, inputs/outputs)", "is this a stdin/stdout problem file?")
        tests = [io_test(_side(stdin, f"{where}: tests[{j}].input"), _side(stdout, f"{where}: tests[{j}].output"),
                         float_tol) for j, (stdin, stdout) in enumerate(pairs)]
        prompt = f"{text.strip()}\n\n{STDIN_INSTRUCTION}"
        task: Record = {"id": _record_id(r, i, source), "prompt": prompt, "language": "python",
                        "mode": "instruct", "tests": tests, "metadata": {"source": source}}
        if r.get("split"):
            task["metadata"]["split"] = r["split"]
        ref = _reference(r)
        if ref:
            task["reference"] = ref
        return task

    return convert_each(records, source, one, first_key(*_ID_KEYS))


# --------------------------------------------------------------------------- call


def call(records: list[Record], source: str = "call", unwrap_outputs: bool = False) -> list[Record]:
    """``unwrap_outputs``: expected values are wrapped in one-element lists (TACO/APPS style)."""

    def one(r: Record, i: int, where: str) -> Record:
        wrong_adapter(r, "call", where, accepts=("apps", "taco"))
        io = _maybe_json(r.get("input_output"))
        io = io if isinstance(io, dict) else r
        meta = _maybe_json(r.get("metadata"))
        fn = _first(io, ("fn_name", "func_name", "entry_point")) or (
            meta.get("func_name") if isinstance(meta, dict) else None)
        if not fn:
            raise RecordError(f"{where}: fn_name", "function name missing (looked for fn_name, func_name, "
                              "entry_point)", "is this a functional (call-based) problem file?")
        if not isinstance(fn, str) or not fn.isidentifier():
            raise RecordError(f"{where}: fn_name", f"{fn!r} is not a function name")
        inputs, outputs = _maybe_json(io.get("inputs")), _maybe_json(io.get("outputs"))
        if not isinstance(inputs, list) or not isinstance(outputs, list) or not inputs:
            raise RecordError(f"{where}: inputs", "inputs/outputs must be non-empty lists",
                              "one argument list per expected value")
        tests = []
        for args, expected in _zip(inputs, outputs, where):
            if not isinstance(args, list):
                args = [args]
            if unwrap_outputs and isinstance(expected, list) and len(expected) == 1:
                expected = expected[0]
            tests.append({"kind": "call", "fn": fn, "args": args, "expected": expected})
        text = _first(r, ("prompt", "question", "description", "problem", "question_content", "text"))
        if not isinstance(text, str):
            raise RecordError(f"{where}: prompt", "problem text missing", "is this a functional problem file?")
        starter = r.get("starter_code")
        prompt = text.strip() + (f"\n\nStart from:\n```python\n{starter.strip()}\n```" if starter else
                                 f"\n\nWrite a Python function `{fn}` that solves this.")
        task: Record = {"id": _record_id(r, i, source), "prompt": prompt, "language": "python",
                        "mode": "instruct", "entry_point": fn, "tests": tests, "metadata": {"source": source}}
        ref = _reference(r)
        if ref:
            task["reference"] = ref
        return task

    return convert_each(records, source, one, first_key(*_ID_KEYS))


ADAPTERS: dict[str, Callable[..., list[Record]]] = {
    "livecodebench": rl_sets.livecodebench,
    "taco": rl_sets.taco,
    "primeintellect": rl_sets.primeintellect,
    "deepcoder": rl_sets.deepcoder,
    "kodcode": kodcode,
    "codeforces": codeforces,
    "humaneval": humaneval,
    "mbpp": mbpp,
    "stdio": stdio,
    "call": call,
    "evalplus": evalplus,
    "codecontests": codecontests,
    "apps": apps,
}


def convert(fmt: str, src: str, records: list[Record] | None = None, **options: Any) -> list[Record]:
    """Read ``src`` (unless its ``records`` were read already) and turn it into task records
    with the adapter ``fmt``; a record that cannot be read is an
    :class:`UnreadableRecordsError` naming every such record."""
    if fmt not in ADAPTERS and fmt != "auto":
        raise SuiteError(f"unknown format {fmt!r}", "formats: auto, " + ", ".join(ADAPTERS))
    if records is None:
        records = read_records(src)
    if not records:
        raise SuiteError(f"{src} holds no records", "check the input file")
    if fmt == "auto":
        fmt = detect_format(records)
    return ADAPTERS[fmt](records, source=Path(src).name, **options)


def convert_all(fmt: str, src: str, records: list[Record] | None = None, **options: Any) -> Conversion:
    """:func:`convert`, but the records that cannot be read come back in
    ``Conversion.skipped`` beside the tasks of the others instead of as an error."""
    try:
        tasks = convert(fmt, src, records, **options)
    except UnreadableRecordsError as exc:
        return exc.conversion
    return Conversion(tuple(tasks), tuple(range(len(tasks))))

