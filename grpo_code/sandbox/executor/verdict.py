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
import os
import signal

from . import codec, compare
from .pychild import EXIT_MEMORY

_type = type


class HarnessFailure(Exception):
    """The sandbox failed to run the test; the job is retried, then an ``infra_error``."""


class ForkRefused(HarnessFailure):
    """The executor could not fork a process to judge an answer (the judge, a judging
    helper): the container's pids are taken. Where a program's processes may still hold
    them (a shared process, ``calls.py``), they are ended and the judging tried again."""


class Outcome:
    """What the executor saw of one test (see :func:`decide`)."""

    __slots__ = ("test", "status", "timed_out", "cpu_s", "limit_s", "report", "nonce", "started_marker",
                 "judge", "judge_status", "judge_killed", "stdout", "stderr", "truncated", "classify", "check",
                 "report_overflow", "expected_value", "main_ended")

    def __init__(self, test: dict, status=None, timed_out=None, cpu_s=0.0, limit_s=1.0, report=b"",
                 nonce=None, started_marker=False, judge=None, judge_status=None, judge_killed=False,
                 stdout=b"", stderr=b"", truncated=False, classify=None, check=None,
                 report_overflow=False, main_ended=True):
        self.test = test
        self.main_ended = main_ended
        """the program's process ended by itself (not killed by the executor after the judge
        was done: an interactive test's program may still be reading when its interactor ends)"""
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
        self.check = check
        self.report_overflow = report_overflow
        self.expected_value = UNDECODED
        """a call test's expected value, decoded (trusted suite data): see :func:`decode_expected`"""
        """the report (a returned value) was longer than the executor reads"""
        """``check(test, input, expected, output, output_plain) -> (verdict, message)``: runs
        the test's checker (trusted suite code) out of the program's reach on the values as
        trees (``input`` and ``expected`` in the suite's form, ``output`` as the program's
        process sent it, plain JSON when ``output_plain``); the judge decodes them, so the
        executor never decodes a value only a checker needs. See ``pyjob.run_checker``."""


UNDECODED = object()


def decode_expected(o: Outcome):
    """The call test's expected value as a Python value, decoded once (``budget`` does it
    before forking its helper, so the suite's share of the work is not on the program's
    budget)."""
    if o.expected_value is UNDECODED:
        o.expected_value = codec.from_tree(o.test["expected"], plain_objects=True)
    return o.expected_value


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


_BIG_INT = 1 << 62
REPORT_INT_DIGITS = 100_000
"""The longest integer a report may carry (Ruby's and Racket's harnesses write any integer as
a JSON number): read in chunks past Python's 4300-digit limit, in milliseconds at this size;
a longer one makes the report unreadable, the program's ``fail``."""


def _report_int(text: str) -> int | dict:
    """A report's integer in the suite's form: from 2**62 on tagged ``{"$i": hex}`` (what the
    codec decodes, and what a recorded value and a message can write out at any size)."""
    if len(text) <= 4000:
        value = int(text)
    else:
        digits = text.lstrip("-")
        if len(digits) > REPORT_INT_DIGITS:
            raise ValueError("an integer too long to read")
        value = 0
        for start in range(0, len(digits), 4000):
            chunk = digits[start:start + 4000]
            value = value * 10 ** len(chunk) + int(chunk)
        value = -value if text.startswith("-") else value
    return value if -_BIG_INT < value < _BIG_INT else {"$i": hex(value)}


def parse_report(raw: bytes, nonce=None, started_marker=False):
    """(started, report or None, problem or None) from the report pipe's bytes."""
    lines = [line for line in raw.split(b"\n") if line.strip()]
    started = False
    if started_marker:
        if not lines or lines[0] != b'{"event":"started"}':
            return False, None, None
        started, lines = True, lines[1:]
    reports = []
    prefix = b'{"nonce":"' + nonce.encode() + b'"' if nonce is not None else None
    for line in lines:
        if prefix is not None and not line.startswith(prefix):
            # Checked as bytes, before any parsing: a line without the nonce costs nothing.
            return started, None, "forged report on the harness channel"
        try:
            msg = json.loads(line, parse_int=_report_int)
        except (ValueError, RecursionError):
            return started, None, "unreadable report on the harness channel"
        if _type(msg) is not dict or (nonce is not None and msg.get("nonce") != nonce):
            return started, None, "forged report on the harness channel"
        reports.append(msg)
    if len(reports) > 1:
        return started, None, "more than one report on the harness channel"
    return started, (reports[0] if reports else None), None


def decide(o: Outcome) -> tuple[str, str]:
    """The verdict and message of one test; :class:`HarnessFailure` when the sandbox failed.
    Once the program has run, nothing it reported or returned can make this raise
    anything else: what cannot be judged is the program's ``fail``."""
    try:
        return _decide(o)
    except HarnessFailure:
        raise
    except MemoryError:
        return "output_limit", "the program's answer is too large to judge within the sandbox's memory"
    except Exception as exc:
        return "fail", f"the program's answer could not be judged ({type(exc).__name__})"


def _decide(o: Outcome) -> tuple[str, str]:
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
    if o.test.get("interactor") is not None:
        return _interacted(o, report, problem)
    if o.report_overflow and _ended(o, None) is None:
        return "output_limit", "the returned value is over the sandbox's size limit (docs/sandbox.md, Values)"
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
    if event == "too_large":
        return "output_limit", message
    if event == "runtime_error":
        return "runtime_error", message
    return None


def _judged(o: Outcome, report, problem) -> tuple[str, str]:
    """A judged script test (Python; JavaScript and C++ with a judge of their own): the
    judge's report decides, unless the program never got that far."""
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
    if event == "not_plain":
        return "fail", message
    if event == "program":  # a native judge: the program's process failed to load (its own report)
        program = o.judge.get("program")
        known = _program_event(program) if _type(program) is dict else None
        return known if known is not None else ("fail", "the program's process failed before the test ran")
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


INTERACTOR_CODES = {1: "wrong answer", 2: "presentation error"}


def _interacted(o: Outcome, report, problem) -> tuple[str, str]:
    """An interactive io test: the interactor's exit code decides (testlib's: 0 accepted, 1
    wrong answer, 2 presentation error, 3 the interactor failed), once the program's own run
    was sound. Whatever ends the interactor but its own exit (the program killed it) is the
    program's ``fail``: the interactor decides nothing it did not say."""
    if problem:
        return "fail", problem
    if o.judge is None:
        return "fail", "the interactor gave no verdict (it was killed or stopped while the program ran)"
    said = str(o.judge.get("message") or "").strip()
    code, signum = o.judge.get("code"), o.judge.get("signal")
    if signum is not None:
        return "fail", f"the interactor was killed by {_signal_name(signum)} (by the program?)"
    if code is None:
        return "fail", said or "the interactor gave no exit code"
    if code in INTERACTOR_CODES:
        return "fail", f"{INTERACTOR_CODES[code]} (the interactor's verdict)" + (f": {said}" if said else "")
    if code != 0:
        return "fail", (f"the interactor failed (exit code {code}: on output it could not read, or an error of "
                        "its own, which `grpo-code tasks check` shows on the reference)" + (f": {said}" if said else ""))
    if o.main_ended:  # the program ended before the interactor: its own exit must be clean
        if report is not None:
            known = _program_event(report)
            if known is not None:
                return known
        ended = _ended(o, report)
        if ended is not None:
            return ended
        code = os.WEXITSTATUS(o.status) if o.status is not None and os.WIFEXITED(o.status) else None
        if code not in (0, None):
            return "runtime_error", f"exited with status {code}" + _stderr_tail(o)
    return "pass", ""


def _stderr_tail(o: Outcome) -> str:
    text = o.stderr.decode("utf-8", "replace").strip()[-1500:] if o.stderr else ""
    return f":\n{text}" if text else ""


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
            return judge_io(o)
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
        return judge_io(o)
    if event == "returned" and kind == "call":
        # Python reports a codec value; native harnesses plain JSON.
        return judge_call(o, report.get("value"), encoded=o.started_marker)
    return "fail", f"unexpected report {event!r} for a {kind} test"


def judge_call(o: Outcome, tree, encoded: bool = True) -> tuple[str, str]:
    """A returned value against the test's expected value (or its checker). ``encoded``:
    the program's process sent a codec tree; native harnesses send plain JSON."""
    test = o.test
    if test.get("checker") and not test.get("_record"):
        # Decoded in the judge, under its limits: the executor does not decode it twice.
        return o.check(test, test.get("args", []), test.get("expected"), tree, not encoded)
    try:
        value = codec.from_tree(tree, plain_objects=not encoded)
    except codec.TooLarge as exc:
        return "output_limit", str(exc)
    except codec.CodecError as exc:
        return "fail", str(exc)
    except (RecursionError, MemoryError):
        return "output_limit", "returned value too deeply nested or too large"
    if test.get("_record"):
        return "pass", ""
    if "expected" not in test:
        if test.get("expected_held"):  # the host holds the value: it sends the job again with it
            return "undecided", ""
        raise HarnessFailure("a call test without an expected value or checker")
    if compare.values_equal(value, decode_expected(o), test):
        return "pass", ""
    return "fail", f"returned {_show(tree)}, expected {_show(test['expected'])}"


def _show(tree) -> str:
    text = json.dumps(tree, allow_nan=True)
    return text if len(text) <= 300 else text[:300] + "..."


def judge_io(o: Outcome) -> tuple[str, str]:
    test = o.test
    if o.truncated:
        if test.get("_record"):
            return "output_limit", "output over the sandbox's output limit"
        return "fail", "output longer than the expected output (truncated)"
    actual = o.stdout.decode("utf-8", "replace")
    if test.get("_record"):
        return "pass", ""
    if test.get("checker"):
        return o.check(test, test.get("stdin", ""), test.get("stdout"), actual)
    if "stdout" not in test:
        raise HarnessFailure("an io test without an expected output or checker")
    if compare.output_equal(actual, test["stdout"], test):
        return "pass", ""
    return "fail", f"output differs from the expected output ({test.get('compare', 'lines')} comparison)"
