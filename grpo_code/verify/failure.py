"""What went wrong with a program, said once for every path: the eval record's
``first_failure``, the line ``tasks check`` and the reference oracle print, and the
execution feedback of a multi-turn turn all start from :func:`failure_of`, and every long
text is cut by the one :func:`clip`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grpo_code.sandbox.types import Result, Status, TestResult

MESSAGE_CHARS = 300
"""Characters kept of a failure's message (records and report lines)."""


def clip(text: str, limit: int = MESSAGE_CHARS) -> str:
    """Head and tail of a long text (the call or value at the start, the exception at the
    end), with how much was left out; at most ``limit`` characters."""
    if len(text) <= limit:
        return text
    room = limit - len(f"\n... ({len(text)} characters left out) ...\n")
    half = max(1, room // 2)
    return f"{text[:half]}\n... ({len(text) - 2 * half} characters left out) ...\n{text[-half:]}"


@dataclass(frozen=True)
class Failure:
    """The first test that did not pass (``test``: its index; ``None`` when the job failed
    as a whole), its verdict and what the harness said, clipped."""

    test: int | None
    verdict: str
    message: str
    outcome: TestResult | None = None
    """The test's own result (feedback quotes its output); ``None`` for a job-level failure."""

    def record(self) -> dict[str, Any]:
        """The form eval writes in ``results.jsonl``."""
        return {"test": self.test, "verdict": self.verdict, "message": self.message}

    def line(self) -> str:
        """One line for a report: ``test 3: runtime_error: ZeroDivisionError: ...``."""
        lines = self.message.strip().splitlines()
        said = lines[-1] if lines else ""
        where = f"test {self.test}: " if self.test is not None else ""
        return f"{where}{self.verdict}" + (f": {said}" if said else "")


def failure_of(result: Result | None, limit: int = MESSAGE_CHARS) -> Failure | None:
    """The first failure of a job's result; ``None`` when every test passed or nothing ran."""
    if result is None:
        return None
    found = result.first_failure()
    if found is not None:
        index, test = found
        return Failure(index, test.verdict.value, clip(test.why, limit), test)
    if result.status is not Status.PASS:
        label = "sandbox error" if result.status is Status.INFRA_ERROR else result.status.value
        return Failure(None, label, clip(result.error or "", limit))
    return None
