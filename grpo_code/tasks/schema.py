"""The task record: one programming problem, its tests and how a model is prompted for it.

A task is one line of a suite's ``tasks.jsonl`` (format in docs/tasks.md). Its ``tests``
are sandbox test cases in exactly the sandbox job format, so a task plus a candidate
program is a sandbox job (:meth:`Task.job`). Validation names the file, the line and
the field of every problem.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from grpo_code.errors import SandboxError, SuiteError
from grpo_code.sandbox import native_checker
from grpo_code.sandbox.types import (
    ISOLATION,
    LANGUAGES,
    EncodedTests,
    Job,
    Limits,
    LimitsError,
    TestCase,
    encode_tests,
    testcase_from_dict,
)

MODES = ("complete", "instruct")
FIELDS = ("id", "prompt", "language", "tests", "public_tests", "mode", "entry_point", "reference", "checkers", "limits",
          "metadata", "helpers", "isolation", "prelude", "interactors")


@dataclass(frozen=True)
class Resolved:
    """What the reference oracle resolved for a task."""

    content_hash: str
    """The hash of the task as written, before its expected values were filled in."""
    large_expected: dict[int, str] | None = None
    """The digests of its large expected values, by test index
    (:func:`~grpo_code.sandbox.encoded.large_expected`), which its encoded tests use instead
    of writing those values out again."""


@dataclass(frozen=True)
class Task:
    """One problem. ``mode='complete'``: ``prompt`` is a code prefix the model continues;
    ``mode='instruct'``: ``prompt`` is a problem statement answered with a whole program."""

    id: str
    prompt: str
    tests: tuple[TestCase, ...]
    language: str = "python"
    mode: str = "instruct"
    entry_point: str | None = None
    reference: str | None = None
    """A full program that passes every test (for complete mode: prefix + body)."""
    limits: Limits = field(default_factory=Limits)
    metadata: dict[str, Any] = field(default_factory=dict)
    checkers: dict[str, Any] = field(default_factory=dict)
    """Checkers the tests name (docs/sandbox.md, Checkers): Python ``check(input, expected, output)``."""
    public_tests: tuple[TestCase, ...] = ()
    """Tests the model may see: multi-turn feedback runs them and quotes the first that fails
    (docs/tasks.md, Public tests). They never count in a reward; ``tests`` do."""
    helpers: str | None = None
    """Python source of names the prompt defines and the tests call (HumanEval's
    ``encode_cyclic``, ``poly``): the judge runs it before each script test, so the tests use
    the task's definitions, never the program's (docs/tasks.md, Helpers)."""
    isolation: str = "job"
    """Python ``call`` tests: ``job`` runs them in one program process, one after another;
    ``test`` gives each its own (docs/sandbox.md, Isolation)."""
    interactors: dict[str, str] = field(default_factory=dict)
    """Interactors the interactive io tests name (docs/sandbox.md, Interactive tests): Python
    source that talks with the program and exits 0 to accept it."""
    prelude: str | None = None
    """Python source run before every program of the task, in its namespace: the imports a
    judge provides without the program writing them (LeetCode's ``List``, ``Optional``,
    ``collections``; LiveCodeBench's list). Kept on one line, so the program's line numbers in
    a traceback are off by one at most (docs/tasks.md, Preludes)."""
    resolved: Resolved | None = field(default=None, init=False, compare=False, repr=False)
    """What the reference oracle resolved for this task (:func:`grpo_code.verify.oracle.fill`
    sets it on the task it returns; never passed in). A copy made with
    ``dataclasses.replace`` has none: its tests or prompt may differ from those resolved."""

    @property
    def hidden_tests(self) -> tuple[TestCase, ...]:
        """The tests that never reach a prompt: ``tests`` but those also public."""
        shown = {json.dumps(t.to_dict(), sort_keys=True) for t in self.public_tests}
        return tuple(t for t in self.tests if json.dumps(t.to_dict(), sort_keys=True) not in shown)

    @property
    def split(self) -> str | None:
        value = self.metadata.get("split")
        return str(value) if value is not None else None

    @property
    def needs_oracle(self) -> bool:
        """Some test's expected value is to come from the reference (docs/tasks.md, Reference oracles)."""
        return any(not getattr(t, "has_expected", True) for t in self.tests) and self.reference is not None

    def job(self, program: str, record: bool = False, public: bool = False, stop_on_failure: bool = False) -> Job:
        """The sandbox job that runs ``program`` against this task's tests (``record``: as
        the reference whose answers become the expected values; ``public``: against its
        public tests, the multi-turn check; ``stop_on_failure``: only pass/fail is asked)."""
        if self.needs_oracle and not record and not public:
            raise SuiteError(f"task {self.id!r}: expected values not computed from its reference yet",
                             "resolve the suite first (grpo_code.verify.oracle.resolve)")
        tests = self.public_tests if public else self.tests
        # The reference's time is applied by the oracle (Limits.from_reference): a job's limits never carry it.
        limits = replace(self.limits, reference_factor=None)
        if self.prelude:
            program = with_prelude(self.prelude, program)
        job = Job(program=program, tests=tests, language=self.language, limits=limits,
                   entry_point=self.entry_point if self.language == "python" else None,
                   checkers=self.checkers, interactors=self.interactors, record=record,
                   helpers=self.helpers,
                   isolation=self.isolation, stop_on_failure=stop_on_failure and not record)
        return job if public else job.sharing(self.encoded_tests)

    @cached_property
    def encoded_tests(self) -> EncodedTests:
        """The tests as every job of this task sends them, encoded once (with the digests of
        its large expected values when the reference oracle filled them in and knew them)."""
        return encode_tests(self.tests, self.resolved.large_expected if self.resolved is not None else None)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "prompt": self.prompt,
            "language": self.language,
            "mode": self.mode,
            "tests": [t.to_dict() for t in self.tests],
        }
        if self.public_tests:
            out["public_tests"] = [t.to_dict() for t in self.public_tests]
        if self.entry_point is not None:
            out["entry_point"] = self.entry_point
        if self.reference is not None:
            out["reference"] = self.reference
        limits = self.limits.to_dict()
        if limits:
            out["limits"] = limits
        if self.checkers:
            out["checkers"] = self.checkers
        if self.interactors:
            out["interactors"] = self.interactors
        if self.helpers:
            out["helpers"] = self.helpers
        if self.isolation != "job":
            out["isolation"] = self.isolation
        if self.prelude:
            out["prelude"] = self.prelude
        if self.metadata:
            out["metadata"] = self.metadata
        return out

    def content_hash(self) -> str:
        """A hash of the task as written (a resolved task keeps its hash from before its
        expected values were filled in: they follow from its reference)."""
        return self.resolved.content_hash if self.resolved is not None else self._content_hash

    @cached_property
    def _content_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()


_SOURCE_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def char_column(line: str, col_offset: int) -> int:
    """A parser column (``ast``'s ``col_offset``, counted in UTF-8 bytes) as an index into ``line``."""
    return len(line.encode()[:col_offset].decode(errors="ignore"))


def with_prelude(prelude: str, program: str) -> str:
    """``program`` with ``prelude`` as its first line, or, when it has ``from __future__``
    imports (which must come first), right after the last of them on its own line (``from
    __future__ import annotations; PRELUDE``), so no line is added there and a statement that
    follows on the same line or runs over several lines is never split. Found by parsing the
    program (not inside a string), lines counted as the parser counts them."""
    last = None
    if "__future__" in program:
        try:
            tree = ast.parse(program)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None  # it does not compile either way
        if tree is not None:
            futures = [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "__future__"]
            last = futures[-1] if futures else None
    if last is None:
        return f"{prelude}\n{program}"
    # Lines as the parser counts them (\n, \r\n, \r): str.splitlines also breaks at form
    # feeds and other separators that Python's source allows inside a line.
    lines = _SOURCE_LINES.findall(program)
    row = (last.end_lineno or last.lineno) - 1
    line = lines[row]
    col = char_column(line, last.end_col_offset or 0)
    lines[row] = f"{line[:col]}; {prelude}{line[col:]}"
    return "".join(lines)


def task_from_dict(
    data: Any,
    where: str,
    default_language: str = "python",
    default_mode: str = "instruct",
    default_limits: Limits | None = None,
    headers: dict[str, str] | None = None,
) -> Task:
    """Validate one task record; ``where`` (e.g. ``tasks.jsonl:12``) prefixes every error.
    ``headers``: the suite's ``include/`` files, given to its C++ checkers and interactors."""

    def bad(fld: str, problem: str) -> SuiteError:
        return SuiteError(f"{where}: {fld}: {problem}", "fix the task record; the format is in docs/tasks.md")

    if not isinstance(data, dict):
        raise bad("record", f"is {type(data).__name__}, expected a JSON object")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise bad(unknown[0], f"unknown field (known: {', '.join(FIELDS)})")
    for key in ("id", "prompt"):
        if key not in data:
            raise bad(key, "missing")
        if not isinstance(data[key], str) or not data[key].strip():
            raise bad(key, f"{data[key]!r} must be a non-empty string")
    language = data.get("language", default_language)
    if language not in LANGUAGES:
        raise bad("language", f"{language!r} is not supported (supported: {', '.join(LANGUAGES)})")
    mode = data.get("mode", default_mode)
    if mode not in MODES:
        raise bad("mode", f"{mode!r} is invalid (expected complete or instruct)")
    for key in ("entry_point", "reference", "helpers", "prelude"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise bad(key, "must be a string")
    if data.get("prelude") and (language != "python" or "\n" in data["prelude"].strip()):
        raise bad("prelude", "is one line of Python run before the program (a Python task's imports)")
    isolation = data.get("isolation", "job")
    if isolation not in ISOLATION:
        raise bad("isolation", f"{isolation!r} is not one of {', '.join(ISOLATION)}")
    tests_raw = data.get("tests")
    if tests_raw is None:
        raise bad("tests", "missing")
    if not isinstance(tests_raw, list) or not tests_raw:
        raise bad("tests", "must be a non-empty list of script/io/call tests")
    tests = _tests(tests_raw, "tests", where)
    public_raw = data.get("public_tests") or []
    if not isinstance(public_raw, list):
        raise bad("public_tests", "must be a list of script/io/call tests")
    public = _tests(public_raw, "public_tests", where)
    for i, test in enumerate(public):
        if not getattr(test, "has_expected", True) or getattr(test, "checker", None) is not None:
            raise bad(f"public_tests[{i}]", "needs its expected value written out (no oracle, no checker): "
                                            "the model is shown it")
    try:
        limits = Limits.from_dict(data.get("limits")).over(default_limits or Limits())
    except LimitsError as exc:
        raise bad(exc.field, exc.problem) from None
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise bad("metadata", "must be an object")
    checkers = data.get("checkers") or {}
    if not isinstance(checkers, dict) or not all(isinstance(k, str) for k in checkers):
        raise bad("checkers", "must map names to Python source defining check(input, expected, output), or to "
                              "C++ checkers (docs/tasks.md)")
    for name, found in checkers.items():
        wrong = native_checker.problem(found)
        if wrong is not None:
            raise bad(f"checkers.{name}", wrong)
    interactors = data.get("interactors") or {}
    if not isinstance(interactors, dict) or not all(isinstance(k, str) for k in interactors):
        raise bad("interactors", "must map names to interactors (docs/sandbox.md, Interactive tests)")
    for name, found in interactors.items():
        wrong = native_checker.problem(found)
        if wrong is not None:
            raise bad(f"interactors.{name}", wrong)
    if headers:  # the suite's include/ files, for its C++ checkers and interactors (their own headers win)
        checkers, interactors = ({k: {**c, "headers": {**headers, **(c.get("headers") or {})}}
                                  if native_checker.is_native(c) else c for k, c in named.items()}
                                 for named in (checkers, interactors))
    for i, test in enumerate(tests):
        if getattr(test, "interactor", None) is not None and test.interactor not in interactors:
            raise bad(f"tests[{i}].interactor", f"{test.interactor!r} is not in the task's interactors "
                                                f"({', '.join(interactors) or 'none'})")
        name = getattr(test, "checker", None)
        if name is not None and name not in checkers:
            raise bad(f"tests[{i}].checker", f"{name!r} is not in the task's checkers ({', '.join(checkers) or 'none'})")
        if name is not None and native_checker.is_native(checkers[name]) and test.kind != "io":
            raise bad(f"tests[{i}].checker", f"{name!r} is a C++ checker, which judges io tests only")
        if not getattr(test, "has_expected", True) and name is None and data.get("reference") is None:
            raise bad(f"tests[{i}]", "has no expected value, and the task has no reference to compute it from "
                                     "(give the expected value, a reference, or a checker)")
    task = Task(
        id=data["id"],
        prompt=data["prompt"],
        tests=tuple(tests),
        language=language,
        mode=mode,
        entry_point=data.get("entry_point"),
        reference=data.get("reference"),
        limits=limits,
        metadata=metadata,
        checkers=checkers,
        interactors=interactors,
        public_tests=public,
        helpers=data.get("helpers") or None,
        isolation=isolation,
        prelude=(data.get("prelude") or "").strip() or None,
    )
    if limits.reference_factor is None or task.needs_oracle:
        return task
    if (data.get("limits") or {}).get("reference_factor") is None:  # suite.yaml's default is for its oracle tasks
        return replace(task, limits=replace(limits, reference_factor=None))
    again = (" (a suite converted by an earlier `grpo-code tasks convert evalplus`: convert it again)"
             if str(metadata.get("source", "")).endswith("+") else "")
    raise bad("limits.reference_factor",
              "scales the reference's time, so it applies only to tasks whose expected values the reference "
              f"oracle computes (tests without expected values, and a reference); use limits.timeout_s here{again}")


def _tests(raw: list[Any], key: str, where: str) -> list[TestCase]:
    out = []
    for i, item in enumerate(raw):
        try:
            out.append(testcase_from_dict(item, f"{key}[{i}]"))
        except SandboxError as exc:
            raise SuiteError(f"{where}: {exc.what.removeprefix('bad job: ')}",
                             "fix the test; test kinds are script, io and call (docs/sandbox.md)") from None
    return out
