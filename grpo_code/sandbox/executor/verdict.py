"""Verdicts as a pure function of what was observed about one test.

:func:`decide` takes an :class:`Outcome` (how the test's process ended, its CPU time, what
its harness reported, what the judge reported, its output) and returns the verdict and
message, or raises :class:`HarnessFailure` when the sandbox itself failed (an
infrastructure error, never the program's verdict). Nothing here forks or reads a pipe,
so the whole decision table is tested directly (tests/test_sandbox_verdict.py).

Blame: the program's process writes ``started`` on its report pipe before the program
runs; a process that ends without it is the harness's failure. After it, whatever
happens to the program's process tree (exits, signals, a killed judge) is the program's.
"""

from __future__ import annotations

import json
import math
import os
import signal

from . import codec
from .pychild import EXIT_MEMORY

_type = type


class HarnessFailure(Exception):
    """The sandbox failed to run the test; the job is retried, then an ``infra_error``."""


class Outcome:
    """What the executor saw of one test (see :func:`decide`)."""

    __slots__ = ("test", "status", "timed_out", "cpu_s", "limit_s", "report", "nonce", "started_marker",
                 "judge", "judge_status", "judge_killed", "stdout", "stderr", "truncated", "classify")

    def __init__(self, test: dict, status=None, timed_out=None, cpu_s=0.0, limit_s=1.0, report=b"",
                 nonce=None, started_marker=False, judge=None, judge_status=None, judge_killed=False,
                 stdout=b"", stderr=b"", truncated=False, classify=None):
        self.test = test
        self.status = status
        """wait status of the test's process (None: unknown)"""
        self.timed_out = timed_out
        """None, or why the watcher killed the test: "cpu", "time" or "backstop" """
        self.cpu_s = cpu_s
        self.limit_s = limit_s
        self.report = report
        self.nonce = nonce
        """native runners: the per-test nonce their reports must carry"""
        self.started_marker = started_marker
        """Python: the report pipe must open with the ``started`` line"""
        self.judge = judge
        """script tests in Python: the judge's report (dict) or None"""
        self.judge_status = judge_status
        self.judge_killed = judge_killed
        """the executor itself killed the judge (at a deadline)"""
        self.stdout = stdout
        self.stderr = stderr
        self.truncated = truncated
        self.classify = classify


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def parse_report(raw: bytes, nonce=None, started_marker=False):
    """(started, report or None, problem or None) from the report pipe's bytes."""
    lines = [line for line in raw.split(b"\n") if line.strip()]
    started = False
    if started_marker:
        if not lines or lines[0] != b'{"event":"started"}':
            return False, None, None
        started, lines = True, lines[1:]
    reports = []
    for line in lines:
        try:
            msg = json.loads(line)
        except ValueError:
            return started, None, "unreadable report on the harness channel"
        if _type(msg) is not dict or (nonce is not None and msg.get("nonce") != nonce):
            return started, None, "forged report on the harness channel"
        reports.append(msg)
    if len(reports) > 1:
        return started, None, "more than one report on the harness channel"
    return started, (reports[0] if reports else None), None


def decide(o: Outcome) -> tuple[str, str]:
    started, report, problem = parse_report(o.report, o.nonce, o.started_marker)
    if o.started_marker and not started:
        raise HarnessFailure(f"the test process ended before the program ran ({_status_text(o.status)})")
    if o.judge is None and o.judge_status is not None and not o.judge_killed and not o.timed_out:
        if os.WIFSIGNALED(o.judge_status):
            return "runtime_error", (f"the test's judge was killed by {_signal_name(os.WTERMSIG(o.judge_status))} "
                                     "while the program ran")
        raise HarnessFailure(f"the judge failed ({_status_text(o.judge_status)})")
    if o.timed_out:
        known = o.classify(None, None, o.stderr) if o.classify is not None else None
        if known is not None and known[0] == "memory":
            return known
        return "timeout", _timeout_text(o)
    if o.cpu_s > o.limit_s:
        return "timeout", _timeout_text(o)
    if o.judge is not None and o.test["kind"] == "script":
        return _judged(o, report, problem)
    return _reported(o, report, problem)


def _timeout_text(o: Outcome) -> str:
    if o.timed_out == "time":
        return (f"time limit exceeded: {o.limit_s:g} s of running or sleeping ({o.cpu_s:.2f} s of CPU; time spent "
                "waiting for a CPU is not counted); the process group was killed")
    if o.timed_out == "backstop":
        return "wall-clock backstop exceeded (the machine is heavily loaded); the process group was killed"
    return f"CPU-time limit exceeded ({o.cpu_s:.2f} s of CPU, the limit is {o.limit_s:g} s)"


def _status_text(status) -> str:
    if status is None:
        return "no status"
    if os.WIFSIGNALED(status):
        return f"killed by {_signal_name(os.WTERMSIG(status))}"
    return f"exit status {os.WEXITSTATUS(status)}"


def _ended(o: Outcome, report) -> tuple[str, str] | None:
    """The verdict of a process that ended abnormally, or None."""
    status = o.status
    signum = os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else None
    code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None
    if signum == signal.SIGXCPU:
        return "timeout", _timeout_text(o)
    if signum == signal.SIGKILL:
        return "memory", "killed by SIGKILL (out of memory, or the program killed itself)"
    if signum == signal.SIGXFSZ:
        return "runtime_error", "file-size limit exceeded"
    if code == EXIT_MEMORY and (report is None or report.get("event") == "memory"):
        return "memory", "MemoryError (memory limit reached)"
    if report is None and o.classify is not None and (signum is not None or code != 0):
        known = o.classify(signum, code, o.stderr)
        if known is not None:
            return known
    if signum is not None and report is None:
        return "runtime_error", f"killed by signal {_signal_name(signum)}"
    return None


def _program_event(report) -> tuple[str, str] | None:
    """Events of the program's own run (before any test code)."""
    event = report.get("event")
    message = str(report.get("message") or "")
    if event == "memory":
        return "memory", "MemoryError (memory limit reached)"
    if event == "compile_error":
        return "compile_error", message
    if event in ("assertion", "system_exit", "not_plain"):
        return "fail", message
    if event == "runtime_error":
        return "runtime_error", message
    return None


def _judged(o: Outcome, report, problem) -> tuple[str, str]:
    """A Python script test: the judge's report decides, unless the program never got that far."""
    if problem:
        return "fail", problem
    if report is not None:
        known = _program_event(report)
        if known is not None:
            return known
    event = o.judge.get("event")
    message = str(o.judge.get("message") or "")
    if event == "completed":
        return "pass", ""
    if event == "assertion":
        return "fail", message
    if event == "raised":
        if o.judge.get("type") == "MemoryError":
            return "memory", "MemoryError (memory limit reached)"
        if o.judge.get("type") == "SystemExit":
            return "fail", "the program raised SystemExit before the test completed\n" + message
        return "runtime_error", message
    if event == "protocol":
        return "fail", f"the program broke the judge's channel: {message}"
    if event == "memory":
        return "fail", message
    if event == "error":
        return "runtime_error", message
    if event == "program_gone":
        ended = _ended(o, report)
        if ended is not None:
            return ended
        code = os.WEXITSTATUS(o.status) if o.status is not None and os.WIFEXITED(o.status) else None
        if code == 0:
            return "fail", "the process exited with status 0 before the test completed"
        return "runtime_error", f"exited with status {code} before the test completed"
    return "fail", f"unexpected judge report {event!r}"


def _reported(o: Outcome, report, problem) -> tuple[str, str]:
    """io and call tests, and script tests of native runners: the process's own report."""
    kind = o.test["kind"]
    ended = _ended(o, report)
    if ended is not None:
        return ended
    if problem:
        return "fail", problem
    status = o.status
    code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None
    if report is None:
        if kind == "io" and code == 0:
            return judge_io(o.test, o.stdout, o.truncated)
        if code == 0:
            return "fail", "the process exited with status 0 before the harness saw the test complete"
        return "runtime_error", f"exited with status {code} before the test completed"
    known = _program_event(report)
    if known is not None:
        return known
    if code != 0:
        return "runtime_error", f"the process ended abnormally after the test (status {code})"
    event = report.get("event")
    if event == "completed" and kind == "script":
        return "pass", ""
    if event == "completed" and kind == "io":
        return judge_io(o.test, o.stdout, o.truncated)
    if event == "returned" and kind == "call":
        # Python reports a codec value; native harnesses plain JSON.
        return judge_call(o.test, report.get("value"), encoded=o.started_marker)
    return "fail", f"unexpected report {event!r} for a {kind} test"


def judge_call(test: dict, tree, encoded: bool = True) -> tuple[str, str]:
    try:
        value = codec.json_view(codec.from_tree(tree) if encoded else tree)
    except codec.CodecError as exc:
        return "fail", str(exc)
    except (RecursionError, MemoryError):
        return "fail", "returned value too deeply nested or too large"
    expected = test.get("expected")
    if plain_equal(value, expected, test.get("float_tol")):
        return "pass", ""
    return "fail", f"returned {json.dumps(value)[:300]}, expected {json.dumps(expected)[:300]}"


def judge_io(test: dict, stdout: bytes, truncated: bool) -> tuple[str, str]:
    if truncated:
        return "fail", "output longer than the expected output (truncated)"
    actual = stdout.decode("utf-8", "replace")
    if compare_output(actual, test.get("stdout", ""), test.get("compare", "lines"), test.get("float_tol")):
        return "pass", ""
    return "fail", f"output differs from the expected output ({test.get('compare', 'lines')} comparison)"


# --------------------------------------------------------------------------- comparisons


def _float_or_none(token: str):
    try:
        return float(token)
    except ValueError:
        return None


def _floats_close(a: float, b: float, tol: float) -> bool:
    if a == b or (a != a and b != b):
        return True
    return abs(a - b) <= tol or abs(a - b) <= tol * max(abs(a), abs(b))


def compare_output(actual: str, expected: str, mode: str = "lines", float_tol=None) -> bool:
    """Compare program output with the expected output (``exact``, ``lines`` or ``tokens``)."""
    if mode == "exact":
        return actual == expected
    if mode == "lines":
        a = [line.rstrip() for line in actual.splitlines()]
        e = [line.rstrip() for line in expected.splitlines()]
        while a and not a[-1]:
            a.pop()
        while e and not e[-1]:
            e.pop()
        return a == e
    if mode == "tokens":
        a, e = actual.split(), expected.split()
        if len(a) != len(e):
            return False
        for x, y in zip(a, e):
            if x == y:
                continue
            if float_tol is None:
                return False
            fx, fy = _float_or_none(x), _float_or_none(y)
            if fx is None or fy is None or not _floats_close(fx, fy, float_tol):
                return False
        return True
    raise ValueError(f"unknown compare mode {mode!r}")


def plain_equal(actual, expected, float_tol=None) -> bool:
    """Strict equality of JSON-like plain data (bool is not int; int and float compare by
    value; a float expected value allows 1e-9 relative error, an int one none)."""
    ta, te = _type(actual), _type(expected)
    if ta is bool or te is bool:
        return ta is te and actual == expected
    if ta in (int, float) and te in (int, float):
        if te is int and float_tol is None:
            return actual == expected  # an int answer is exact, even when it comes back as a float
        if float_tol is None:
            return (
                actual == expected
                or (actual != actual and expected != expected)
                or (math.isfinite(actual) and math.isfinite(expected)
                    and math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-12))
            )
        return _floats_close(float(actual), float(expected), float_tol)
    if ta is not te:
        return False
    if ta is list:
        return len(actual) == len(expected) and all(plain_equal(a, e, float_tol) for a, e in zip(actual, expected))
    if ta is dict:
        return actual.keys() == expected.keys() and all(plain_equal(actual[k], expected[k], float_tol) for k in actual)
    return actual == expected  # str, None
