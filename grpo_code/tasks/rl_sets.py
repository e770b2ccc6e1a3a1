"""Adapters for the sets code RL trains on: LiveCodeBench, TACO, PrimeIntellect and DeepCoder.

Registered in :data:`grpo_code.tasks.adapters.ADAPTERS` (``grpo-code tasks convert FORMAT``):

- ``livecodebench``: ``code_generation_lite`` records (``question_content``, ``starter_code``,
  ``public_test_cases``, ``private_test_cases``, ``metadata.func_name``, ``contest_date``,
  ``platform``, ``difficulty``). stdin problems become ``io`` tests; LeetCode ones ``call``
  tests of ``Solution.method`` (a new ``Solution()`` per call), each argument one JSON line
  of the input, as LiveCodeBench's grader reads them. ``since``/``until`` keep the contests
  of a date window (the window decides LiveCodeBench's numbers). The private tests are
  base64 of zlib of a pickle: they are read by :func:`restricted_unpickle`, which builds
  strings, numbers, lists and dicts only, never an object a pickle names.
- ``taco``: TACO records (APPS's shape plus per-problem ``time_limit``/``memory_limit``).
- ``primeintellect``: ``verification_info.test_cases`` of type ``stdin_stdout`` or
  ``function_call`` (with ``fn_name``), ``gold_standard_solution``.
- ``deepcoder``: rllm's copies, one adapter for the lot: LeetCode records whose ``tests``
  hold a ``functional`` check script (``check(Solution().f)``), and its LiveCodeBench,
  PrimeIntellect, TACO and Codeforces records, told apart by their tests' shape.

Every task gets :data:`JUDGE_PRELUDE` (``Task.prelude``): the imports LiveCodeBench's
grader runs before a program, so ``List`` or ``deque`` without an import works as it does
there and on LeetCode. DeepCoder's LeetCode tasks also get LeetCode's ``ListNode`` and
``TreeNode`` in the program's namespace and, as trusted helpers of the judge, the builders
and comparators its tests call (``tree_node``, ``is_same_tree``, ...: ``executor/nodes.py``).
"""

from __future__ import annotations

import ast
import json
import re
from datetime import datetime
from typing import Any

from grpo_code.sandbox.executor import nodes
from grpo_code.sandbox.values import suite_tree
from grpo_code.tasks.contests import _apps_record, _json_field, _statement, _unwrap
from grpo_code.tasks.extract import fenced_blocks
from grpo_code.tasks.packed import unpack
from grpo_code.tasks.records import (
    STDIN_INSTRUCTION,
    UNREADABLE_JSON,
    Record,
    RecordError,
    convert_each,
    first_key,
    first_solution,
    io_test,
    json_problem,
    parse_json,
)

_MODULES = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random", "statistics",
            "itertools", "functools", "operator", "io", "sys", "json")
JUDGE_PRELUDE = ("; ".join(f"from {m} import *" for m in (*_MODULES, "builtins", "typing"))
                 + "; import " + ", ".join(_MODULES) + "; sys.setrecursionlimit(50000)")
"""LiveCodeBench's grader's imports, in its order (``from builtins import *`` puts back the
builtins the star imports shadow), on one line."""

LCB_CHECKER = '''
from decimal import Decimal, InvalidOperation


def _lines(text):
    return [line.strip() for line in text.strip().split("\\n")]


def check(input, expected, output):
    got, want = _lines(output), _lines(expected)
    if len(got) != len(want):
        return False, f"{len(got)} lines of output, expected {len(want)}"
    for i, (a, b) in enumerate(zip(got, want), 1):
        if a == b:
            continue
        try:
            if [Decimal(x) for x in a.split()] == [Decimal(x) for x in b.split()]:
                continue
        except (InvalidOperation, ValueError):
            pass
        return False, f"line {i} differs"
    return True
'''
"""LiveCodeBench's comparison of a stdin problem's output: the same number of lines
(outer whitespace stripped), each equal as text once stripped, or as a list of decimal
numbers (``1.0`` is ``1.00``; ``Decimal``, not floats, so no tolerance)."""

LCB_TIMEOUT_S = 6
"""LiveCodeBench's per-test time limit."""
# --------------------------------------------------------------------------- livecodebench


def _lcb_cases(value: Any, where: str) -> list[Record]:
    if isinstance(value, str):
        try:
            value = parse_json(value)
        except json.JSONDecodeError:
            value = unpack(value, where)
        except UNREADABLE_JSON as exc:
            raise RecordError(where, json_problem(exc)) from None
    if not isinstance(value, list):
        raise RecordError(where, f"is {type(value).__name__}, expected a list of tests")
    for j, case in enumerate(value):
        if not (isinstance(case, dict) and isinstance(case.get("input"), str) and isinstance(case.get("output"), str)
                and case.get("testtype") in ("stdin", "functional")):
            raise RecordError(f"{where}[{j}]", "expected {input: str, output: str, testtype: stdin|functional}")
    return value


def _lcb_test(case: Record, fn: str | None, where: str) -> Record:
    if case["testtype"] == "stdin":
        return {**io_test(case["input"], case["output"]), "checker": "lcb"}
    if fn is None:
        raise RecordError(f"{where}.testtype", "functional, but metadata has no func_name")
    args = [_json_field(line, f"{where}.input") for line in case["input"].split("\n")]
    return {"kind": "call", "fn": fn, "args": suite_tree(args),
            "expected": suite_tree(_json_field(case["output"], f"{where}.output"))}


def _method_prompt(text: str, starter: str, callee: str) -> str:
    return (f"{text.strip()}\n\nComplete this Python code; {callee} is called with each test's arguments and its "
            f"return value checked:\n```python\n{starter.strip()}\n```")


def _contest_date(r: Record, where: str) -> datetime:
    value = r.get("contest_date")
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        raise RecordError(f"{where}: contest_date", f"{value!r} is not an ISO date") from None


def _window(day: str | None, flag: str) -> datetime | None:
    if day is None:
        return None
    try:
        return datetime.strptime(day, "%Y-%m-%d")
    except ValueError:
        from grpo_code.errors import SuiteError

        raise SuiteError(f"{flag} {day!r} is not a date", f"give it as YYYY-MM-DD, e.g. {flag} 2024-08-01") from None


def livecodebench(records: list[Record], source: str = "livecodebench", since: str | None = None,
                  until: str | None = None) -> list[Record]:
    """LiveCodeBench problems; ``since``/``until`` (``YYYY-MM-DD``) keep the contests from
    ``since`` to ``until`` (both included, as LiveCodeBench's own window)."""
    start, end = _window(since, "--since"), _window(until, "--until")

    def keep(r: Record) -> bool:
        try:
            day = datetime.fromisoformat(str(r.get("contest_date")))
        except ValueError:
            return True  # its conversion says what is wrong with it
        return (start is None or start <= day) and (end is None or day <= end)

    def one(r: Record, i: int, where: str) -> Record:
        text = _statement(r, ("question_content",), where)
        date = _contest_date(r, where)
        meta = r.get("metadata") or {}
        meta = _json_field(meta, f"{where}: metadata")
        if not isinstance(meta, dict):
            raise RecordError(f"{where}: metadata", f"is {type(meta).__name__}, expected an object")
        starter = r.get("starter_code") or ""
        func = meta.get("func_name")
        if func is not None and not (isinstance(func, str) and func.isidentifier()):
            raise RecordError(f"{where}: metadata.func_name", f"{func!r} is not a method name")
        method = bool(re.search(r"^\s*class\s+Solution\b", starter, re.M))
        fn = (f"Solution.{func}" if method else func) if func else None
        public = _lcb_cases(r.get("public_test_cases") or [], f"{where}: public_test_cases")
        private = _lcb_cases(r.get("private_test_cases") or [], f"{where}: private_test_cases")
        tests = [_lcb_test(c, fn, f"{where}: public_test_cases[{j}]") for j, c in enumerate(public)]
        tests += [_lcb_test(c, fn, f"{where}: private_test_cases[{j}]") for j, c in enumerate(private)]
        if not tests:
            raise RecordError(f"{where}: private_test_cases", "no tests", "remove the record")
        if fn is not None:
            prompt = _method_prompt(text, starter, f"`Solution().{func}`" if method else f"`{func}`")
        else:
            prompt = f"{text.strip()}\n\n{STDIN_INSTRUCTION}"
        task: Record = {
            "id": f"lcb/{r.get('question_id') or i}", "prompt": prompt, "language": "python", "mode": "instruct",
            "tests": tests, "public_tests": [{k: v for k, v in t.items() if k != "checker"} for t in tests[:len(public)]],
            "prelude": JUDGE_PRELUDE,
            "limits": {"timeout_s": LCB_TIMEOUT_S},
            "metadata": {"source": "livecodebench", "split": "test", "contest_date": date.isoformat(),
                         **{k: r[k] for k in ("platform", "difficulty", "contest_id", "question_title") if r.get(k)}},
        }
        if fn is not None:
            task["entry_point"] = "Solution" if method else func
        if any(t.get("checker") for t in tests):
            task["checkers"] = {"lcb": LCB_CHECKER}
        return task

    return convert_each([r for r in records if keep(r)], source, one, first_key("question_id"))


# --------------------------------------------------------------------------- taco


_SECONDS = re.compile(r"^\s*([\d.]+)\s*(?:s|sec|secs|second|seconds)?\s*$", re.I)
_MEGABYTES = re.compile(r"^\s*([\d.]+)\s*(?:mb|megabytes?|m)?\s*$", re.I)


def _amount(value: Any, pattern: re.Pattern, where: str) -> float | None:
    if value in (None, ""):
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    match = pattern.match(str(value))
    if not match:
        raise RecordError(where, f"{value!r} is not an amount this adapter reads")
    return float(match.group(1))


def _limits(time_limit: Any, memory_limit: Any, where: str) -> Record:
    limits: Record = {}
    seconds = _amount(time_limit, _SECONDS, f"{where}: time_limit")
    if seconds is not None and seconds > 0:
        limits["timeout_s"] = min(max(seconds, 0.1), 600.0)
    megabytes = _amount(memory_limit, _MEGABYTES, f"{where}: memory_limit")
    if megabytes is not None and megabytes > 0:
        limits["memory_mb"] = max(int(megabytes), 16)
    return limits


def taco(records: list[Record], source: str = "taco", split: str | None = None) -> list[Record]:
    """TACO: APPS's fields (read as the ``apps`` adapter reads them) with its limits."""

    def one(r: Record, i: int, where: str) -> Record:
        fields, meta = _apps_record(r, where, None)
        task: Record = {"id": f"taco/{r.get('id', i)}", "prompt": fields.pop("prompt"), "language": "python",
                        "mode": "instruct", **fields, "prelude": JUDGE_PRELUDE}
        limits = _limits(r.get("time_limit"), r.get("memory_limit"), where)
        if limits:
            task["limits"] = limits
        task["metadata"] = {**meta, "source": "taco", "split": split or r.get("split") or "train",
                            **{k: r[k] for k in ("difficulty", "url") if r.get(k)}}
        if r.get("source"):  # where TACO took the problem from (codeforces, codechef, ...)
            task["metadata"]["platform"] = r["source"]
        return task

    return convert_each(records, source, one, first_key("id", "name"))


# --------------------------------------------------------------------------- primeintellect


def _pi_tests(cases: Any, where: str) -> tuple[list[Record], str | None]:
    if not isinstance(cases, list) or not cases:
        raise RecordError(where, "expected a non-empty list of test cases")
    tests: list[Record] = []
    fns = set()
    for j, case in enumerate(cases):
        here = f"{where}[{j}]"
        kind = case.get("type") if isinstance(case, dict) else None
        if kind == "stdin_stdout":
            if not (isinstance(case.get("input"), str) and isinstance(case.get("output"), str)):
                raise RecordError(here, "a stdin_stdout case needs input and output strings")
            tests.append(io_test(case["input"], case["output"]))
        elif kind == "function_call":
            fn = case.get("fn_name")
            if not (isinstance(fn, str) and fn.isidentifier()):
                raise RecordError(f"{here}.fn_name", f"{fn!r} is not a function name")
            args = case.get("input")
            args = args if isinstance(args, list) else [args]
            fns.add(fn)
            tests.append({"kind": "call", "fn": fn, "args": suite_tree(args), "expected": suite_tree(_unwrap(
                case.get("output")))})
        else:
            raise RecordError(f"{here}.type", f"{kind!r} (expected stdin_stdout or function_call)")
    if len(fns) > 1 or (fns and len(tests) != sum(t["kind"] == "call" for t in tests)):
        raise RecordError(where, "mixes functions or test kinds", "one problem calls one function or reads stdin")
    return tests, next(iter(fns), None)


def _pi_task(r: Record, tests: list[Record], fn: str | None, where: str, source: str) -> Record:
    text = _statement(r, ("prompt", "problem", "question"), where)
    prompt = (f"{text.strip()}\n\nWrite a Python function `{fn}` that solves this; its return value is checked."
              if fn else text.strip() if "standard input" in text.lower() else f"{text.strip()}\n\n{STDIN_INSTRUCTION}")
    meta = r.get("metadata") or {}
    meta = _json_field(meta, f"{where}: metadata")
    task: Record = {"id": f"{source}/{r.get('problem_id') or r.get('in_source_id') or r.get('id')}",
                    "prompt": prompt, "language": "python", "mode": "instruct", "tests": tests,
                    "prelude": JUDGE_PRELUDE, "metadata": {"source": source, "split": "train"}}
    if fn:
        task["entry_point"] = fn
    if isinstance(meta, dict):
        limits = _limits(meta.get("time_limit"), meta.get("memory_limit"), f"{where}: metadata")
        if limits:
            task["limits"] = limits
        if meta.get("difficulty"):
            task["metadata"]["difficulty"] = meta["difficulty"]
    reference = r.get("gold_standard_solution") or r.get("solution")
    if isinstance(reference, str) and reference.strip():
        task["reference"] = _fenced(reference)
    return task


def _fenced(text: str) -> str:
    """The code of a reference written as a fenced Markdown block (PrimeIntellect's are)."""
    blocks = fenced_blocks(text)
    return blocks[0] if blocks else text


def primeintellect(records: list[Record], source: str = "primeintellect") -> list[Record]:
    """PrimeIntellect's verifiable coding problems (SYNTHETIC-1)."""

    def one(r: Record, i: int, where: str) -> Record:
        info = r.get("verification_info")
        info = _json_field(info, f"{where}: verification_info")
        if not isinstance(info, dict):
            raise RecordError(f"{where}: verification_info", "missing, or not an object with test_cases")
        if info.get("language", "python") != "python":
            raise RecordError(f"{where}: verification_info.language", f"{info['language']!r}: Python tasks only")
        tests, fn = _pi_tests(info.get("test_cases"), f"{where}: verification_info.test_cases")
        return _pi_task(r, tests, fn, where, "primeintellect")

    return convert_each(records, source, one, first_key("problem_id", "in_source_id", "id"))


# --------------------------------------------------------------------------- deepcoder


_CHECKED = re.compile(r"^check\(\s*(?:Solution\(\)\.)?([A-Za-z_]\w*)\s*\)\s*$", re.M)


def _check_tests(script: str, where: str) -> tuple[list[Record], str]:
    """A LeetCode ``check(candidate)`` script as script tests: one per assert of ``check``
    when its body is asserts only (each test passes or fails alone), else the whole script."""
    called = _CHECKED.search(script)
    if called is None:
        raise RecordError(where, "no check(Solution().method) call", "the functional script must call check")
    method = called.group(1)
    candidate = f"candidate = Solution().{method}" if "Solution()." in called.group(0) else f"candidate = {method}"
    try:
        tree = ast.parse(script)
    except SyntaxError as exc:
        raise RecordError(where, f"not Python ({exc.msg}, line {exc.lineno})") from None
    except ValueError as exc:  # a NUL byte
        raise RecordError(where, f"not Python ({exc})") from None
    check = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
    if check is None:
        raise RecordError(where, "defines no check(candidate)")
    if all(isinstance(s, ast.Assert) for s in check.body) and len(tree.body) == 2:
        lines = script.splitlines()
        return [{"kind": "script", "code": f"{candidate}\n" + "\n".join(
            line.strip() for line in lines[s.lineno - 1:s.end_lineno]) + "\n"} for s in check.body], method
    return [{"kind": "script", "code": script if script.endswith("\n") else script + "\n"}], method


def _deepcoder_leetcode(r: Record, tests: dict, i: int, where: str) -> Record:
    script = tests.get("functional")
    if not isinstance(script, str):
        raise RecordError(f"{where}: tests.functional", "expected the check script as a string")
    cases, method = _check_tests(script, f"{where}: tests.functional")
    text = _statement(r, ("problem", "question", "prompt"), where)
    reference = first_solution(r.get("solutions"))
    signature = re.search(rf"^\s*def\s+{method}\s*\(.*$", reference or "", re.M)
    starter = f"class Solution:\n    {signature.group(0).strip()}\n        " if signature else ""
    prompt = (_method_prompt(text, starter, f"`Solution().{method}`") if starter and "class Solution" not in text
              else f"{text.strip()}\n\nWrite a Python class `Solution` with the method `{method}`.")
    task: Record = {"id": f"leetcode/{r.get('id', r.get('question_id', i))}", "prompt": prompt,
                    "language": "python", "mode": "instruct", "entry_point": "Solution", "tests": cases,
                    "prelude": f"{JUDGE_PRELUDE}; {nodes.PRELUDE}", "helpers": nodes.HELPERS,
                    "metadata": {"source": "deepcoder-leetcode", "split": "train"}}
    if reference:
        task["reference"] = reference
    return task


def _inner(adapter: Any, record: Record, where: str) -> Record:
    """One record through another adapter, its problem raised as this record's."""
    from grpo_code.tasks.records import UnreadableRecordsError

    try:
        return adapter([record], where)[0]
    except UnreadableRecordsError as exc:
        problem = exc.conversion.skipped[0]
        raise RecordError(f"{where}: {problem.field}", problem.reason, problem.hint) from None


def deepcoder(records: list[Record], source: str = "deepcoder") -> list[Record]:
    """rllm's DeepCoder records (``problem``, ``solutions``, ``tests``), by their tests' shape:
    a ``functional`` check script (LeetCode), LiveCodeBench cases (``testtype``),
    PrimeIntellect cases (``type``), TACO's ``{inputs, outputs[, fn_name]}``, or Codeforces
    ``{input, output}`` pairs."""

    def one(r: Record, i: int, where: str) -> Record:
        tests = r.get("tests")
        tests = _json_field(tests, f"{where}: tests")
        if isinstance(tests, dict) and "functional" in tests:
            return _deepcoder_leetcode(r, tests, i, where)
        text = _statement(r, ("problem", "question", "prompt"), where)
        meta = r.get("metadata") if isinstance(r.get("metadata"), dict) else {}
        if isinstance(tests, list) and tests and all(isinstance(t, dict) and "testtype" in t for t in tests):
            converted = _inner(livecodebench, {"question_content": text, "contest_date": "1970-01-01",
                                               "public_test_cases": tests, "question_id": r.get("id", i),
                                               "starter_code": r.get("starter_code") or "",
                                               "metadata": {"func_name": meta.get("func_name")}}, where)
            converted["metadata"]["source"] = "deepcoder-lcb"
            converted["metadata"]["split"] = "train"
            converted["metadata"].pop("contest_date", None)
        elif isinstance(tests, list) and tests and all(isinstance(t, dict) and "type" in t for t in tests):
            cases, fn = _pi_tests(tests, f"{where}: tests")
            converted = _pi_task({**r, "prompt": text}, cases, fn, where, "deepcoder-primeintellect")
        elif isinstance(tests, dict) and "inputs" in tests:
            converted = _inner(taco, {"question": text, "input_output": tests, "solutions": r.get("solutions"),
                                      "starter_code": r.get("starter_code") or "", "id": r.get("id", i)}, where)
            converted["metadata"]["source"] = "deepcoder-taco"
        elif isinstance(tests, list) and tests and all(isinstance(t, dict) and {"input", "output"} <= set(t)
                                                       for t in tests):
            converted = {"id": f"deepcoder/{r.get('id', i)}", "prompt": f"{text.strip()}\n\n{STDIN_INSTRUCTION}",
                         "language": "python", "mode": "instruct", "prelude": JUDGE_PRELUDE,
                         "tests": [io_test(str(t["input"]), str(t["output"])) for t in tests],
                         "metadata": {"source": "deepcoder-codeforces", "split": "train"}}
        else:
            raise RecordError(f"{where}: tests", "not a shape DeepCoder uses (a functional script, or test cases "
                                                 "with testtype, type, inputs/outputs or input/output)")
        reference = first_solution(r.get("solutions"))
        if "reference" not in converted and reference is not None:
            converted["reference"] = reference
        return converted

    return convert_each(records, source, one, first_key("id", "question_id"))
