"""Adapters for competitive-programming sets: CodeContests and APPS.

Registered in :data:`grpo_code.tasks.adapters.ADAPTERS` as ``codecontests`` and ``apps``
(``grpo-code tasks convert codecontests|apps SRC DST``). Unlike the generic ``stdio``
adapter they keep what these datasets say about their tests:

- ``codecontests``: DeepMind CodeContests records (``description``, ``public_tests``,
  ``private_tests``, ``generated_tests``, ``solutions``, ``time_limit``,
  ``memory_limit_bytes``, ...) and the DeepCoder/rllm copy (``problem``, ``tests``). The
  test groups stay apart (public, private, generated, in that order, counted in
  ``metadata.test_groups``; the ``tests`` option selects groups); the contest's time and
  memory limits become the task's limits; the reference is the first Python 3 solution.
- ``apps``: APPS records (``question``, ``input_output``, ``solutions``, ``starter_code``)
  and MapCoder's APPS selection (``description``, ``test_list``, ``starter_code``).
  stdin/stdout problems become ``io`` tests; call-based ones (``fn_name``, or a function
  in MapCoder's starter code) become ``call`` tests, or ``script`` tests calling
  ``Solution().method(...)`` for LeetCode-style class starters. MapCoder's one-argument-
  per-line inputs are read by :mod:`grpo_code.tasks.mapcoder`.

Statements read for how answers are judged: "print any of them" and the like set
``metadata.needs_checker`` (exact comparison would fail a different correct answer);
"YES/NO in any case" sets ``ignore_case`` on the io tests. Nothing is dropped quietly: a
record that cannot be read, or a task left without tests, is a
:class:`~grpo_code.tasks.records.RecordError` naming the record and the field, collected
with every other such record (:func:`~grpo_code.tasks.records.convert_each`).
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

from grpo_code.errors import SuiteError
from grpo_code.tasks.mapcoder import DEF, call_args, starter_function
from grpo_code.tasks.records import (
    HINT,
    STDIN_INSTRUCTION,
    UNREADABLE_JSON,
    Record,
    RecordError,
    convert_each,
    first_key,
    io_test,
    json_problem,
    parse_json,
    wrong_adapter,
)

GROUPS = ("public", "private", "generated")

# CodeContests enums (its problem proto): solution languages, difficulties, sources.
_PYTHON3 = (3, "PYTHON3")
_DIFFICULTY = ("UNKNOWN_DIFFICULTY", "EASY", "MEDIUM", "HARD", "HARDER", "HARDEST", "EXTERNAL",
               *"ABCDEFGHIJKLMNOPQRSTUV")
_SOURCE = ("UNKNOWN_SOURCE", "CODECHEF", "CODEFORCES", "HACKEREARTH", "CODEJAM", "ATCODER", "AIZU")

# "Any correct answer is accepted": the dataset's exact expected output is one of several.
_ANY_ANSWER = re.compile("|".join([
    r"\b(?:print|output|find|choose|display)\s+any\s+(?:one\s+)?of\s+them\b",
    r"\b(?:answers|solutions|ways|options)\b[^.]{0,120}\bany\s+of\s+them\b",
    r"\bif\s+there\s+(?:are|exist)\s+(?:several|multiple|many|more\s+than\s+one)\s+"
    r"(?:possible\s+|valid\s+|correct\s+|optimal\s+|suitable\s+)?(?:answers|solutions)[^.]{0,80}\b(?:any|either)\b",
    r"(?<!not )(?<!n't )\b(?:print|output)\s+any\b(?!\s+(?:extra|other|additional|more)\b)",
    r"\bany\s+(?:valid|correct|possible|optimal|suitable)\s+(?:answer|solution|one)\b",
    r"\bany\s+valid\b",
]), re.IGNORECASE)
# "YES/NO in any case": the answer word may be printed in upper or lower case.
_ANY_CASE = re.compile(r"\b(?:any|arbitrary)\s+(?:letter\s+)?(?:case|register)\b|\bcase[- ]insensitive\b"
                       r"|\b(?:upper|lower)(?:case)?\s+or\s+(?:upper|lower)(?:case)?\b", re.IGNORECASE)
_YES = re.compile(r"\byes\b", re.IGNORECASE)


def needs_checker(statement: str) -> bool:
    """Whether a statement accepts any of several answers (exact tests then reject correct ones)."""
    return bool(_ANY_ANSWER.search(statement))


def case_insensitive(statement: str) -> bool:
    """Whether a statement lets YES/NO answers be printed in any letter case."""
    return bool(_ANY_CASE.search(statement) and _YES.search(statement))


def _bad(where: str, problem: str, hint: str = HINT) -> RecordError:
    return RecordError(where, problem, hint)


def _json_field(value: Any, where: str) -> Any:
    """A field that copies store either as JSON text or already parsed (integers past
    Python's 4300-digit limit are data here: read whole, in bounded time)."""
    if isinstance(value, str):
        try:
            return parse_json(value)
        except UNREADABLE_JSON as exc:
            raise _bad(where, json_problem(exc)) from None
    return value


def _text(value: Any, where: str) -> str:
    """A stdin or stdout: a string, or a list of lines (joined, with a final newline)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return "\n".join(value) + "\n"
    raise _bad(where, f"is {type(value).__name__}, expected a string or a list of lines")


def _list(value: Any, where: str) -> list:
    if not isinstance(value, list):
        raise _bad(where, f"is {type(value).__name__}, expected a list")
    return value


def _statement(r: Record, keys: tuple[str, ...], where: str) -> str:
    for key in keys:
        value = r.get(key)
        if isinstance(value, str) and value.strip():
            return value
    raise _bad(f"{where}: {keys[0]}", "missing or empty (the problem statement)")


# --------------------------------------------------------------------------- codecontests


def _groups(tests: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    names = [t.strip() for t in (tests.split(",") if isinstance(tests, str) else tests) if t.strip()]
    hint = "name groups among " + ", ".join(GROUPS) + ", comma-separated"
    for name in names:
        if name not in GROUPS:
            raise SuiteError(f"--tests: unknown test group {name!r}", hint)
    if not names:
        raise SuiteError("--tests: no test group named", hint)
    return tuple(g for g in GROUPS if g in names)


def _limits(r: Record, where: str) -> Record:
    limits: Record = {}
    tl = _json_field(r.get("time_limit"), f"{where}: time_limit")
    if tl is not None:
        parts = [tl.get(k) or 0 for k in ("seconds", "nanos")] if isinstance(tl, dict) else None
        if parts is None or not all(isinstance(p, (int, float)) and not isinstance(p, bool) for p in parts):
            raise _bad(f"{where}: time_limit", f"{tl!r} is not {{seconds, nanos}}")
        seconds = parts[0] + parts[1] / 1e9
        if seconds > 0:
            limits["timeout_s"] = min(float(seconds), 600.0)
    memory = r.get("memory_limit_bytes")
    if memory:
        if isinstance(memory, bool) or not isinstance(memory, int) or memory < 0:
            raise _bad(f"{where}: memory_limit_bytes", f"{memory!r} is not a number of bytes")
        limits["memory_mb"] = max(16, math.ceil(memory / 2**20))
    return limits


def _python3_solution(solutions: Any, where: str) -> str | None:
    solutions = _json_field(solutions, f"{where}: solutions")
    if solutions is None:
        return None
    if not isinstance(solutions, dict) or not isinstance(solutions.get("solution"), list):
        raise _bad(f"{where}: solutions", "expected {language: [...], solution: [...]}")
    for lang, code in zip(solutions.get("language") or [], solutions["solution"]):
        if lang in _PYTHON3 and isinstance(code, str) and code.strip():
            return code
    return None


def _group_pairs(r: Record, key: str, where: str) -> list[tuple[str, str]]:
    block = _json_field(r.get(key), f"{where}: {key}")
    if block is None:
        return []
    if not isinstance(block, dict):
        raise _bad(f"{where}: {key}", f"is {type(block).__name__}, expected {{input: [...], output: [...]}}")
    inputs = _list(block.get("input", []), f"{where}: {key}.input")
    outputs = _list(block.get("output", []), f"{where}: {key}.output")
    if len(inputs) != len(outputs):
        raise _bad(f"{where}: {key}", f"{len(inputs)} inputs but {len(outputs)} outputs")
    return [(_text(a, f"{where}: {key}.input[{j}]"), _text(b, f"{where}: {key}.output[{j}]"))
            for j, (a, b) in enumerate(zip(inputs, outputs))]


_STDIN_ONLY = ("this adapter reads stdin/stdout problems; `grpo-code tasks convert deepcoder` reads the "
               "function-call ones too")


def _rllm_pairs(r: Record, where: str) -> list[tuple[str, str]]:
    """The DeepCoder/rllm copy: ``tests`` is ``{inputs, outputs}`` or a list of
    ``{input, output, type}``, either possibly as JSON text."""
    tests = _json_field(r["tests"], f"{where}: tests")
    if isinstance(tests, dict):
        if "functional" in tests:
            raise _bad(f"{where}: tests", "a LeetCode check script (functional), not stdin/stdout", _STDIN_ONLY)
        if tests.get("fn_name"):
            raise _bad(f"{where}: tests", "call-based (fn_name) tests, not stdin/stdout", _STDIN_ONLY)
        inputs = _list(tests.get("inputs"), f"{where}: tests.inputs")
        outputs = _list(tests.get("outputs"), f"{where}: tests.outputs")
        if len(inputs) != len(outputs):
            raise _bad(f"{where}: tests", f"{len(inputs)} inputs but {len(outputs)} outputs")
        pairs = zip(inputs, outputs)
        return [(_text(a, f"{where}: tests.inputs[{j}]"), _text(b, f"{where}: tests.outputs[{j}]"))
                for j, (a, b) in enumerate(pairs)]
    out = []
    for j, t in enumerate(_list(tests, f"{where}: tests")):
        if not isinstance(t, dict) or "input" not in t or "output" not in t:
            raise _bad(f"{where}: tests[{j}]", "expected {input, output}")
        kind = t.get("testtype", t.get("type"))
        if kind not in (None, "stdin", "stdin_stdout"):
            raise _bad(f"{where}: tests[{j}]", f"is a {kind!r} test, not stdin/stdout", _STDIN_ONLY)
        out.append((_text(t["input"], f"{where}: tests[{j}].input"), _text(t["output"], f"{where}: tests[{j}].output")))
    return out


def _contest_metadata(r: Record) -> Record:
    meta: Record = {}
    difficulty = r.get("difficulty")
    if isinstance(difficulty, int) and 0 < difficulty < len(_DIFFICULTY):
        meta["difficulty"] = _DIFFICULTY[difficulty]
    elif isinstance(difficulty, str) and difficulty:
        meta["difficulty"] = difficulty
    platform = r.get("source")
    if isinstance(platform, int) and 0 < platform < len(_SOURCE):
        meta["platform"] = _SOURCE[platform].lower()
    if r.get("cf_tags"):
        meta["tags"] = list(r["cf_tags"])
    if r.get("cf_rating"):
        meta["rating"] = r["cf_rating"]
    if r.get("cf_contest_id"):
        meta["contest"] = f"{r['cf_contest_id']}{r.get('cf_index') or ''}"
    return meta


def codecontests(records: list[Record], source: str = "codecontests",
                 tests: str | list[str] | tuple[str, ...] = GROUPS, split: str | None = None,
                 float_tol: float | None = None) -> list[Record]:
    """CodeContests problems as ``instruct`` tasks with ``io`` tests.

    ``tests``: the groups to keep (``"public,private"``); ``split``: ``metadata.split`` of
    every task (else a record's own ``split``); ``float_tol``: compare tokens with this
    tolerance."""
    chosen = _groups(tests)
    ident = first_key("name", "id", "problem_id")

    def one(r: Record, i: int, where: str) -> Record:
        name = ident(r)
        wrong_adapter(r, "codecontests", where, accepts=("codecontests", "deepcoder"))
        if "description" not in r and "problem" in r and "tests" in r:
            text = _statement(r, ("problem",), where)
            if chosen != GROUPS:  # about the option, not this record: stop
                raise SuiteError(f"{where}: its tests are not split into groups, so --tests {','.join(chosen)} "
                                 "cannot select from them", "drop --tests for this file")
            pairs = {"tests": _rllm_pairs(r, where)}
            limits, reference, meta = {}, None, {}
        else:
            text = _statement(r, ("description",), where)
            pairs = {g: _group_pairs(r, f"{g}_tests", where) for g in chosen}
            limits, reference, meta = _limits(r, where), _python3_solution(r.get("solutions"), where), \
                _contest_metadata(r)
        if not any(pairs.values()):
            fields = ",".join(g if g == "tests" else f"{g}_tests" for g in pairs)
            raise _bad(f"{where}: {fields}", f"no tests in groups {','.join(pairs)}",
                       "select more groups with --tests, or remove the record")
        ignore_case = case_insensitive(text)
        task: Record = {
            "id": str(name) if name is not None else f"codecontests/{i}",
            "prompt": f"{text.strip()}\n\n{STDIN_INSTRUCTION}",
            "language": "python",
            "mode": "instruct",
            "tests": [io_test(a, b, float_tol, ignore_case) for group in pairs.values() for a, b in group],
            "metadata": {"source": "codecontests", "test_groups": {g: len(p) for g, p in pairs.items()}, **meta},
        }
        if pairs.get("public"):  # the examples of the statement
            task["public_tests"] = [io_test(a, b, float_tol, ignore_case) for a, b in pairs["public"]]
        if split or r.get("split"):
            task["metadata"]["split"] = split or r["split"]
        if needs_checker(text):
            task["metadata"]["needs_checker"] = True
        if limits:
            task["limits"] = limits
        if reference:
            task["reference"] = reference
        return task

    return convert_each(records, source, one, ident)


# --------------------------------------------------------------------------- apps


def _apps_id(r: Record) -> Any:
    return r.get("problem_id", r.get("id"))


def _literal(value: Any, where: str) -> str:
    """``value`` as Python source, when that source reads back as the same value."""
    text = repr(value)
    try:
        same = ast.literal_eval(text) == value
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        same = False
    if not same:
        raise _bad(where, f"{text[:60]} cannot be written as a Python literal",
                   "this method-style (class Solution) test cannot be converted; remove the record")
    return text


def _unwrap(expected: Any) -> Any:
    """APPS stores a call's expected value wrapped in a one-element list."""
    return expected[0] if isinstance(expected, list) and len(expected) == 1 else expected


def _call_tests(fn: str, method: bool, cases: list[tuple[list, Any]], where: str) -> list[Record]:
    if not method:
        return [{"kind": "call", "fn": fn, "args": args, "expected": expected} for args, expected in cases]
    # The sandbox calls module-level functions; a method is called from a script test.
    return [{"kind": "script", "code": f"assert Solution().{fn}("
             + ", ".join(_literal(a, f"{where}: tests[{j}].args") for a in args) + ") == "
             + _literal(expected, f"{where}: tests[{j}].expected") + "\n"}
            for j, (args, expected) in enumerate(cases)]


def _call_prompt(text: str, fn: str, method: bool, starter: str) -> str:
    callee = f"Solution().{fn}" if method else f"`{fn}`"
    if not starter.strip():
        return f"{text.strip()}\n\nWrite a Python function {callee} that solves this; its return value is checked."
    return (f"{text.strip()}\n\nComplete this Python code; {callee if method else f'the function {callee}'} "
            f"is called and its return value checked:\n```python\n{starter.strip()}\n```")


def _apps_fields(text: str, starter: str, float_tol: float | None, where: str,
                 call: tuple[str, bool, list[tuple[list, Any]]] | None = None,
                 io: list[tuple[str, str]] | None = None) -> tuple[Record, Record]:
    """Tests, prompt and metadata of an APPS problem: ``call`` = (function, is a method,
    (args, expected) cases), else ``io`` = (stdin, stdout) pairs."""
    meta: Record = {"needs_checker": True} if needs_checker(text) else {}
    if call is not None:
        fn, method, cases = call
        fields = {"prompt": _call_prompt(text, fn, method, starter), "entry_point": "Solution" if method else fn,
                  "tests": _call_tests(fn, method, cases, where)}
        if method:
            meta.update(call_style="method", fn_name=fn)
        return fields, meta
    ignore_case = case_insensitive(text)
    return {"prompt": f"{text.strip()}\n\n{STDIN_INSTRUCTION}",
            "tests": [io_test(a, b, float_tol, ignore_case) for a, b in io or []]}, meta


def _starter(r: Record, where: str) -> str:
    starter = r.get("starter_code") or ""
    if not isinstance(starter, str):
        raise _bad(f"{where}: starter_code", f"is {type(starter).__name__}, expected a string")
    return starter


def _apps_record(r: Record, where: str, float_tol: float | None) -> tuple[Record, Record]:
    """APPS's own shape: ``input_output`` holds ``inputs``, ``outputs`` and, for call-based
    problems, ``fn_name`` (each input the argument list, each output ``[expected]``)."""
    text = _statement(r, ("question",), where)
    io = _json_field(r.get("input_output") or None, f"{where}: input_output")
    if not io:
        raise _bad(f"{where}: input_output", "empty (the record has no tests)", "remove the record")
    if not isinstance(io, dict):
        raise _bad(f"{where}: input_output", f"is {type(io).__name__}, expected {{inputs, outputs}}")
    inputs = _list(io.get("inputs"), f"{where}: input_output.inputs")
    outputs = _list(io.get("outputs"), f"{where}: input_output.outputs")
    if len(inputs) != len(outputs):
        raise _bad(f"{where}: input_output", f"{len(inputs)} inputs but {len(outputs)} outputs")
    if not inputs:
        raise _bad(f"{where}: input_output", "no tests", "remove the record")
    starter = _starter(r, where)
    fn = io.get("fn_name")
    if fn:
        if not isinstance(fn, str) or not fn.isidentifier():
            raise _bad(f"{where}: input_output.fn_name", f"{fn!r} is not a function name")
        method = bool(re.search(r"^\s*class\s+Solution\b", starter, re.M))
        cases = [(_list(a, f"{where}: input_output.inputs[{j}]"), _unwrap(b))
                 for j, (a, b) in enumerate(zip(inputs, outputs))]
        fields, meta = _apps_fields(text, starter, float_tol, where, call=(fn, method, cases))
    else:
        pairs = [(_text(a, f"{where}: input_output.inputs[{j}]"), _text(b, f"{where}: input_output.outputs[{j}]"))
                 for j, (a, b) in enumerate(zip(inputs, outputs))]
        fields, meta = _apps_fields(text, starter, float_tol, where, io=pairs)
    solutions = _json_field(r.get("solutions") or None, f"{where}: solutions")
    if solutions is not None:
        solutions = _list(solutions, f"{where}: solutions")
        if solutions and isinstance(solutions[0], str):
            fields["reference"] = solutions[0]
    if r.get("url"):
        meta["url"] = r["url"]
    return fields, meta


def _mapcoder_record(r: Record, where: str, float_tol: float | None) -> tuple[Record, Record]:
    """MapCoder's APPS selection: ``test_list`` of ``{input, output: [...]}``; call-based
    problems (a function in ``starter_code``) have their arguments one per line."""
    text = _statement(r, ("description",), where)
    tests = _list(r.get("test_list"), f"{where}: test_list")
    if not tests:
        raise _bad(f"{where}: test_list", "empty (the record has no tests)", "remove the record")
    for j, t in enumerate(tests):
        if not isinstance(t, dict) or not isinstance(t.get("input"), str) or not isinstance(t.get("output"), list):
            raise _bad(f"{where}: test_list[{j}]", "expected {input: str, output: [...]}")
    starter = _starter(r, where)
    if DEF.search(starter):
        fn = starter_function(starter, where)
        cases = [(call_args(t["input"], fn, f"{where}: test_list[{j}].input"), _unwrap(t["output"]))
                 for j, t in enumerate(tests)]
        return _apps_fields(text, starter, float_tol, where, call=(fn.name, fn.method, cases))
    # A one-element output list holds the stdout; a longer one, its lines.
    pairs = [(t["input"], _text(t["output"][0] if len(t["output"]) == 1 else t["output"],
                                f"{where}: test_list[{j}].output")) for j, t in enumerate(tests)]
    return _apps_fields(text, starter, float_tol, where, io=pairs)


def apps(records: list[Record], source: str = "apps", split: str | None = None,
         float_tol: float | None = None) -> list[Record]:
    """APPS problems (APPS's own records or MapCoder's selection) as ``instruct`` tasks.

    ``split``: ``metadata.split`` of every task (else a record's own ``split``, else
    ``test``); ``float_tol``: io tests compare tokens with this tolerance."""

    def one(r: Record, i: int, where: str) -> Record:
        ident = _apps_id(r)
        wrong_adapter(r, "apps", where, accepts=("apps", "taco"))
        if "test_list" in r:
            fields, meta = _mapcoder_record(r, where, float_tol)
        else:
            fields, meta = _apps_record(r, where, float_tol)
        task: Record = {"id": f"apps/{ident if ident is not None else i}", "prompt": fields.pop("prompt"),
                        "language": "python", "mode": "instruct", **fields}
        task["metadata"] = {"source": "apps", "split": split or r.get("split") or "test", **meta}
        # APPS keeps no separate examples: a test whose input the statement quotes is one.
        shown = [t for t in task["tests"] if t.get("kind") == "io" and t.get("stdin", "").strip()
                 and t.get("checker") is None and t["stdin"].strip() in task["prompt"]]
        if shown:
            task["public_tests"] = shown[:2]
        if r.get("difficulty"):
            task["metadata"]["difficulty"] = r["difficulty"]
        return task

    return convert_each(records, source, one, _apps_id)
