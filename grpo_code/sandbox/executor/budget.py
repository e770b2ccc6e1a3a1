"""The verdict of what a program produced, decided under a budget the program cannot blow.

A test's report (a returned value: up to 64 MiB of JSON) is the program's work, and so is
the executor's work on it: parsing, decoding and comparing can be made to cost without
bound (tens of millions of empty lists, a set whose items all hash alike, a ``Fraction``
of two megadigit integers). Were that work done in the executor, a wrong program could
get the executor killed for memory or past the host's deadline, an ``infra_error`` that
is masked in the reward: an escape from its negative advantage.

So a report of at most :data:`INLINE_BYTES` is decided here at once (nothing that small
costs more than milliseconds), and a larger one in a helper forked for it, under an
address-space limit (the test's ``memory_mb`` more than the executor holds) and a CPU-time
limit (:func:`cpu_budget_s`). A helper that runs out of either is the program's
``output_limit``; the executor itself never parses a large report it has not seen
decided. Standard library only.
"""

from __future__ import annotations

import json
import math
import os
import resource
import select
import signal
import time

from . import spawn, verdict
from .pychild import MIB

INLINE_BYTES = 32 * 1024
"""Reports up to this size are decided in the executor: the costliest values that fit (a
set of big integers that all hash alike, a Fraction of two 16,000-hex-digit numbers, a
big integer compared with a Decimal) take tens of milliseconds to judge
(``scripts/bench_report_budget.py`` measures them)."""


def cpu_budget_s(timeout_s: float) -> float:
    """CPU seconds the judging of one test's report may take: the test's own limit, at
    least one second. The host's deadline for a job allows for it (``wire.job_deadline_s``)."""
    return max(1.0, float(timeout_s))


class _NeedsCheck(BaseException):
    """Raised in the helper where the test's checker would run: the checker runs in the judge,
    which only the executor talks to."""


def _needs_check(*_args):
    raise _NeedsCheck()


def decide(outcome: verdict.Outcome, limits: dict) -> tuple[str, str]:
    """:func:`verdict.decide` of ``outcome``, with a large report judged in a limited helper
    first. Raises :class:`verdict.HarnessFailure` as ``decide`` does."""
    if len(outcome.report) <= INLINE_BYTES:
        return verdict.decide(outcome)
    test = outcome.test
    if test["kind"] == "call" and "expected" in test and not test.get("checker") and not test.get("_record"):
        verdict.decode_expected(outcome)  # the suite's data: decoded here, shared with the helper
    answer = _in_helper(outcome, int(limits["memory_mb"]), cpu_budget_s(limits["timeout_s"]))
    if answer is None:
        # The helper got as far as the checker: what it parsed on the way fits the budget,
        # and the checker itself runs in the judge, under its own limits.
        return verdict.decide(outcome)
    return answer


def mapped_bytes(pid: str = "self") -> int:
    """A process's address-space size (0 when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def _limit_self(memory_mb: int, cpu_s: float) -> None:
    seconds = int(math.ceil(cpu_s))
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    mapped = mapped_bytes()
    if not mapped:
        raise OSError("cannot read /proc/self/statm")
    room = mapped + memory_mb * MIB
    resource.setrlimit(resource.RLIMIT_AS, (room, room))


def _helper_main(outcome: verdict.Outcome, memory_mb: int, cpu_s: float, out_fd: int) -> None:
    """The forked helper: the verdict as one JSON line on ``out_fd``. Never returns."""
    code = 1
    try:
        try:
            for sig in (signal.SIGXCPU, signal.SIGTERM):
                signal.signal(sig, signal.SIG_DFL)
            _limit_self(memory_mb, cpu_s)
        except Exception as exc:  # ours, not the program's: loud
            answer = {"harness": f"the judging helper could not set its limits ({type(exc).__name__}: {exc})"}
        else:
            outcome.check = _needs_check
            try:
                answer = {"verdict": list(verdict.decide(outcome))}
            except _NeedsCheck:
                answer = {"check": True}
            except verdict.HarnessFailure as exc:
                answer = {"harness": str(exc)}
        data = json.dumps(answer).encode()
        while data:
            data = data[os.write(out_fd, data):]
        code = 0
    except BaseException:
        pass
    os._exit(code)


def _in_helper(outcome: verdict.Outcome, memory_mb: int, cpu_s: float):
    """The verdict from a limited fork; None when the test's checker is to decide."""
    read_fd, write_fd = os.pipe()
    try:
        pid = spawn.fork_closing(read_fd, write_fd)
    except OSError:
        raise verdict.ForkRefused("could not fork the helper that judges a large answer") from None
    if pid == 0:
        os.close(read_fd)
        _helper_main(outcome, memory_mb, cpu_s, write_fd)
    os.close(write_fd)
    data = bytearray()
    # A backstop for a helper that sleeps (it cannot: it only computes) or a machine so
    # loaded that its CPU time comes slowly; its CPU time is what the budget is on.
    deadline = time.monotonic() + 10 * cpu_s + 10.0
    killed = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                killed = True
                break
            if not select.select([read_fd], [], [], left)[0]:
                continue
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(read_fd)
        _, status = os.waitpid(pid, 0)
    if not killed and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and data:
        answer = json.loads(data)
        if "harness" in answer:
            raise verdict.HarnessFailure(answer["harness"])
        if answer.get("check"):
            return None
        name, message = answer["verdict"]
        return name, message
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL) or killed:
        why = f"more than {cpu_s:g} s of CPU"
    else:
        why = f"more than {memory_mb} MiB"
    return ("output_limit", f"the program's output is too costly to judge ({why} to read, decode and compare; "
                            "docs/sandbox.md, Values)")
