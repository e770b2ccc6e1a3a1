"""Jobs and results: the public, JSON-serialisable contract of the sandbox.

A :class:`Job` is a program plus its tests (``script``, ``io`` or ``call``) and limits; a
:class:`Result` holds one :class:`TestResult` per test and a job-level :class:`Status`.
``to_dict``/``from_dict`` (and ``to_json``/``from_json``) match the format documented in
docs/sandbox.md exactly; malformed input raises :class:`~grpo_code.errors.SandboxError`
naming the field. Verdicts are decided by the executor's harness, never by these types.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from grpo_code.errors import SandboxError
from grpo_code.sandbox.executor import codec
from grpo_code.sandbox.executor.runners import RUNNERS

LANGUAGES = tuple(RUNNERS)
"""Languages with a runner (grpo_code/sandbox/executor/runners.py); each has its own image."""
JOB_PART_BYTES = 16 * 1024 * 1024
"""A job whose JSON is larger (tests with large expected values) runs as several parts of
at most this size, one after another in one worker, and comes back as one result."""
MAX_TEST_BYTES = 48 * 1024 * 1024
"""The largest one test may be; the containers' memory allows for a part this large."""
COMPARE_MODES = ("exact", "lines", "tokens")
"""How ``io`` output is compared (grpo_code/sandbox/executor/compare.py)."""
VALUE_COMPARE_MODES = ("value", "python")
"""How ``call`` values are compared: plain-data equality, or Python's ``==`` (evalplus)."""


class Verdict(str, enum.Enum):
    """The outcome of one test."""

    PASS = "pass"
    FAIL = "fail"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    RUNTIME_ERROR = "runtime_error"
    COMPILE_ERROR = "compile_error"
    OUTPUT_LIMIT = "output_limit"
    """The returned value is over the sandbox's size limits (docs/sandbox.md, Values)."""


class Status(str, enum.Enum):
    """The outcome of a job: every test passed, some did not, or the sandbox failed."""

    PASS = "pass"
    FAIL = "fail"
    INFRA_ERROR = "infra_error"


@dataclass(frozen=True)
class Limits:
    """Per-test limits; ``None`` fields take the values of the sandbox config."""

    timeout_s: float | None = None
    memory_mb: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            k: v for k, v in (("timeout_s", self.timeout_s), ("memory_mb", self.memory_mb)) if v is not None
        }


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

    def _checking(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
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
    kind: str = field(default="io", init=False)

    @property
    def has_expected(self) -> bool:
        return self.stdout is not None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "io", "stdin": self.stdin}
        if self.stdout is not None:
            out["stdout"] = self.stdout
        if self.compare != "lines":
            out["compare"] = self.compare
        if self.ignore_case:
            out["ignore_case"] = True
        return {**out, **self._checking()}


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
        return {**out, **self._checking()}


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


def _checking(data: dict, where: str) -> dict[str, Any]:
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


def testcase_from_dict(data: Any, where: str = "tests[0]") -> TestCase:
    """Build a test from its JSON form, with errors that name the field."""
    _want(isinstance(data, dict), where, "must be an object")
    kind = data.get("kind")
    allowed = {
        "script": {"kind", "code"},
        "io": {"kind", "stdin", "stdout", "compare", "ignore_case"} | _CHECKING,
        "call": {"kind", "fn", "args", "expected", "compare"} | _CHECKING,
    }
    _want(kind in allowed, f"{where}.kind", f"is {kind!r} (expected script, io or call)")
    extra = sorted(set(data) - allowed[kind])
    _want(not extra, where, f"has unknown keys {extra} for a {kind} test")
    if kind == "script":
        _want(isinstance(data.get("code"), str), f"{where}.code", "must be a string")
        return ScriptTest(code=data["code"])
    checking = _checking(data, where)
    if kind == "io":
        _want(isinstance(data.get("stdin", ""), str), f"{where}.stdin", "must be a string")
        _want(data.get("stdout") is None or isinstance(data["stdout"], str), f"{where}.stdout", "must be a string")
        compare = data.get("compare", "lines")
        _want(compare in COMPARE_MODES, f"{where}.compare", f"is {compare!r} (expected exact, lines or tokens)")
        return IoTest(stdin=data.get("stdin", ""), stdout=data.get("stdout"), compare=compare,
                      ignore_case=data.get("ignore_case", False), **checking)
    fn = data.get("fn")
    _want(isinstance(fn, str) and fn.isidentifier(), f"{where}.fn", "must be a function name")
    args = data.get("args", [])
    _want(isinstance(args, list), f"{where}.args", "must be a list")
    _value(args, f"{where}.args")
    if "expected" in data:
        _value(data["expected"], f"{where}.expected")
    compare = data.get("compare", "value")
    _want(compare in VALUE_COMPARE_MODES, f"{where}.compare", f"is {compare!r} (expected value or python)")
    return CallTest(fn=fn, args=tuple(args), expected=data["expected"] if "expected" in data else NO_VALUE,
                    compare=compare, **checking)


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
    checkers: dict[str, str] = field(default_factory=dict)
    """Checkers by name: Python source defining ``check(input, expected, output)``, trusted
    suite code that the judge runs once the program is done (docs/sandbox.md, Checkers)."""
    record: bool = False
    """Run the program as a reference: tests need no expected values, and each passing
    test's result carries the answer (``value`` or ``stdout``). How oracles are computed."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "tests", tuple(self.tests))
        _want(isinstance(self.checkers, dict) and all(isinstance(k, str) and isinstance(v, str)
                                                       for k, v in self.checkers.items()),
              "checkers", "must map names to Python source")
        for i, test in enumerate(self.tests):
            checker = getattr(test, "checker", None)
            _want(checker is None or checker in self.checkers, f"tests[{i}].checker",
                  f"names {checker!r}, which the job's checkers do not define")
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
        if not RUNNERS[self.language].call_tests:
            for i, test in enumerate(self.tests):
                _want(
                    test.kind != "call",
                    f"tests[{i}]",
                    f"is a call test, which {self.language} does not support (use script or io tests)",
                )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "language": self.language,
            "program": self.program,
            "tests": [t.to_dict() for t in self.tests],
        }
        limits = self.limits.to_dict()
        if limits:
            out["limits"] = limits
        if self.entry_point is not None:
            out["entry_point"] = self.entry_point
        if self.checkers:
            out["checkers"] = dict(self.checkers)
        if self.record:
            out["record"] = True
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def key(self) -> str:
        """A content hash of the job (program, tests, limits, language)."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()

    @classmethod
    def from_dict(cls, data: Any) -> Job:
        _want(isinstance(data, dict), "job", "must be a JSON object")
        extra = sorted(set(data) - {"language", "program", "tests", "limits", "entry_point", "checkers", "record"})
        _want(not extra, "job", f"has unknown keys {extra}")
        _want(isinstance(data.get("program"), str), "program", "must be a string")
        tests = data.get("tests")
        _want(isinstance(tests, list) and tests, "tests", "must be a non-empty list")
        limits = data.get("limits") or {}
        _want(isinstance(limits, dict), "limits", "must be an object")
        bad = sorted(set(limits) - {"timeout_s", "memory_mb"})
        _want(not bad, "limits", f"has unknown keys {bad} (expected timeout_s, memory_mb)")
        timeout = limits.get("timeout_s")
        memory = limits.get("memory_mb")
        _want(
            timeout is None
            or (isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and 0 < timeout <= 600),
            "limits.timeout_s",
            f"is {timeout!r} (expected seconds in (0, 600])",
        )
        _want(
            memory is None or (isinstance(memory, int) and not isinstance(memory, bool) and memory >= 16),
            "limits.memory_mb",
            f"is {memory!r} (expected an integer >= 16)",
        )
        return cls(
            program=data["program"],
            tests=tuple(testcase_from_dict(t, f"tests[{i}]") for i, t in enumerate(tests)),
            language=data.get("language", "python"),
            limits=Limits(timeout_s=float(timeout) if timeout is not None else None, memory_mb=memory),
            entry_point=data.get("entry_point"),
            checkers=data.get("checkers") or {},
            record=data.get("record", False) is True,
        )

    @classmethod
    def from_json(cls, text: str) -> Job:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise SandboxError(
                f"bad job: not JSON ({exc})", "see docs/sandbox.md for the job format"
            ) from None
        return cls.from_dict(data)


@dataclass(frozen=True)
class TestResult:
    """The verdict of one test and what the harness saw (output truncated to the cap)."""

    __test__ = False  # not a pytest class
    verdict: Verdict
    duration_ms: float = 0.0
    """Wall-clock time of the test (fork to verdict)."""
    stdout: str = ""
    stderr: str = ""
    message: str = ""
    cpu_ms: float = 0.0
    """CPU time of the test's processes (program and judge): what the time limit is decided on."""
    attested: bool = True
    """False when the test's asserts ran next to the program (JavaScript and C++ script
    tests): a program written to forge that pass could (docs/sandbox.md, threat model)."""
    value: Any = None
    """A record job's call test: the returned value (codec tree); else None."""

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASS

    @property
    def why(self) -> str:
        """What the harness said of a test that did not pass: its message, else its stderr."""
        return self.message or self.stderr

    def last_line(self, limit: int = 300) -> str:
        """The last line of :attr:`why` (where the exception is), cut at ``limit``."""
        lines = self.why.strip().splitlines()
        return lines[-1][:limit] if lines else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "duration_ms": self.duration_ms,
            "cpu_ms": self.cpu_ms,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "message": self.message,
            "attested": self.attested,
            **({"value": self.value} if self.value is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TestResult:
        return cls(
            verdict=Verdict(data["verdict"]),
            duration_ms=float(data.get("duration_ms", 0.0)),
            stdout=str(data.get("stdout", "")),
            stderr=str(data.get("stderr", "")),
            message=str(data.get("message", "")),
            cpu_ms=float(data.get("cpu_ms", 0.0)),
            attested=bool(data.get("attested", True)),
            value=data.get("value"),
        )


@dataclass(frozen=True)
class Result:
    """The outcome of one job. ``infra_error`` means the sandbox failed, not the program."""

    status: Status
    passed: int
    total: int
    tests: tuple[TestResult, ...] = ()
    duration_ms: float = 0.0
    error: str | None = None

    def first_failure(self) -> tuple[int, TestResult] | None:
        """The first test that did not pass, with its index, or None."""
        return next(((i, t) for i, t in enumerate(self.tests) if not t.passed), None)

    @property
    def pass_fraction(self) -> float | None:
        """Share of tests passed, or None for an infrastructure error (mask it, don't score 0)."""
        if self.status is Status.INFRA_ERROR or not self.total:
            return None
        return self.passed / self.total

    @classmethod
    def infra_error(cls, total: int, error: str, duration_ms: float = 0.0) -> Result:
        return cls(
            status=Status.INFRA_ERROR, passed=0, total=total, tests=(), duration_ms=duration_ms, error=error
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "passed": self.passed,
            "total": self.total,
            "tests": [t.to_dict() for t in self.tests],
            "duration_ms": self.duration_ms,
            "error": self.error,
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        tests = tuple(TestResult.from_dict(t) for t in data.get("tests", []))
        return cls(
            status=Status(data["status"]),
            passed=int(data["passed"]),
            total=int(data["total"]),
            tests=tests,
            duration_ms=float(data.get("duration_ms", 0.0)),
            error=data.get("error"),
        )

    @classmethod
    def from_json(cls, text: str) -> Result:
        return cls.from_dict(json.loads(text))


def load_jobs(text: str, source: str = "job file") -> list[Job]:
    """Parse a job file holding one job object or a list of them."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SandboxError(
            f"{source}: not valid JSON ({exc})", "a job file holds one job object or a list of them"
        ) from None
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


def wire_job(
    job: Job,
    timeout_s: float,
    memory_mb: int,
    max_output_bytes: int,
    file_size_mb: int,
    compile_timeout_s: float = 10.0,
    compile_memory_mb: int = 1024,
) -> dict[str, Any]:
    """The job as the executor receives it: limits resolved against the config."""
    out = job.to_dict()
    out["limits"] = {
        "timeout_s": job.limits.timeout_s if job.limits.timeout_s is not None else timeout_s,
        "memory_mb": job.limits.memory_mb if job.limits.memory_mb is not None else memory_mb,
        "max_output_bytes": max_output_bytes,
        "file_size_mb": file_size_mb,
    }
    if RUNNERS[job.language].compiled:
        out["limits"]["compile_timeout_s"] = compile_timeout_s
        out["limits"]["compile_memory_mb"] = compile_memory_mb
    return out


def wire_for(job: Job, config: Any) -> dict[str, Any]:
    """``wire_job`` with the limits of a ``SandboxConfig``: what a sandbox sends and a cache key hashes."""
    return wire_job(job, config.timeout_s, config.memory_mb, config.max_output_kb * 1024, config.file_size_mb,
                    config.compile_timeout_s, config.compile_memory_mb)


def split_wire(wire: dict[str, Any], part_bytes: int = JOB_PART_BYTES) -> list[dict[str, Any]] | str:
    """The wire job as parts of at most ``part_bytes`` of JSON (usually one part: itself),
    or a message when one test alone is over :data:`MAX_TEST_BYTES`."""
    if len(json.dumps(wire)) <= part_bytes:
        return [wire]
    base = len(json.dumps({**wire, "tests": []}))
    parts: list[dict[str, Any]] = []
    chunk: list[dict[str, Any]] = []
    size = base
    for i, test in enumerate(wire["tests"]):
        n = len(json.dumps(test)) + 2
        if n > MAX_TEST_BYTES:
            return (f"test {i} is {n / 2**20:.1f} MiB of JSON, over the {MAX_TEST_BYTES >> 20} MiB limit of one test "
                    "(docs/sandbox.md, Values)")
        if chunk and size + n > part_bytes:
            parts.append({**wire, "tests": chunk})
            chunk, size = [], base
        chunk.append(test)
        size += n
    parts.append({**wire, "tests": chunk})
    return parts


def job_deadline_s(wire: dict[str, Any]) -> float:
    """How long the host waits for a job before it declares the sandbox hung."""
    # Time limits are on CPU time; the wall clock of a test on a loaded machine can be a
    # few times its limit (the executor's own backstop is 10x), so allow 4x here.
    per_test = 4 * float(wire["limits"]["timeout_s"]) + 1.0
    deadline = 10.0 + math.ceil(per_test * len(wire["tests"]) * 1.2)
    if "compile_timeout_s" in wire["limits"]:
        # at most one build per test kind (C++: the program alone for io, with the tests for script)
        builds = len({t["kind"] for t in wire["tests"]})
        deadline += builds * (float(wire["limits"]["compile_timeout_s"]) + 2.0)
    return deadline
