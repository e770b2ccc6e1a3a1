"""Results: what the sandbox says of a job (a :class:`Result`) and of each test in it (a
:class:`TestResult` with its :class:`Verdict`).

``to_dict``/``from_dict`` (and ``to_json``/``from_json``) match the result format in
docs/sandbox.md exactly. Verdicts are decided by the executor's harness, never here. The
jobs these answer are in :mod:`.types`, which re-exports these names.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any


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
    NOT_RUN = "not_run"
    """Not run: an earlier test did not pass and the job stops at its first failure
    (``Job.stop_on_failure``). Neither passed nor failed; the job's status is ``fail``."""


class Status(str, enum.Enum):
    """The outcome of a job: every test passed, some did not, or the sandbox failed."""

    PASS = "pass"
    FAIL = "fail"
    INFRA_ERROR = "infra_error"


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
    def not_run(self) -> int:
        """Tests a job that stops at its first failure did not run."""
        return sum(1 for t in self.tests if t.verdict is Verdict.NOT_RUN)

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
