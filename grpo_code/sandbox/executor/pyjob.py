"""One Python test, seen from the executor: redact, spawn, judge, decide.

* The program's process comes from the zygote and receives only the program and the
  redacted test (``call``: function and arguments; ``io``: its stdin on fd 0; ``script``:
  nothing). Expected values, expected output and the other tests stay here.
* A ``script`` test is run by the judge, a process forked from this (non-dumpable) one
  that serves one test at a time; it talks to the program's process over a socketpair
  (``judge.py``).
* :func:`verdict.decide` turns what was observed into the verdict.
"""

from __future__ import annotations

import base64
import json
import marshal
import os
import select
import signal
import socket
import time

from . import budget, judge, kept, protocol, spawn, verdict
from .pychild import MIB, RECORD_OUTPUT_LIMIT, REPORT_LIMIT

CHECKER_MIN_S = 10.0
"""A checker may take this long, or twice the test's time limit if that is more."""


class Judge:
    """The executor's judge process (``judge.py``), forked when a script test first needs
    it and again after one was killed at a deadline."""

    GROWTH_LIMIT = 16 * MIB
    """A judge whose address space grew this much past the executor's at its fork (modules a
    program's names made it import, values it kept) is replaced after the job: the next
    jobs' tests must find the same room under their memory limit."""

    def __init__(self):
        self.proc: spawn.Watched | None = None
        self.ctrl: socket.socket | None = None
        self.baseline = 0

    def get(self) -> spawn.Watched:
        if self.proc is not None and not self.proc.exited and not self._ended():
            return self.proc
        self.close()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        fd = theirs.detach()
        self.baseline = budget.mapped_bytes()
        try:
            pid = os.fork()
        except OSError:
            os.close(fd)
            mine.close()
            raise verdict.ForkRefused("could not fork the judge") from None
        if pid == 0:
            judge.judge_loop(fd)
        os.close(fd)
        self.proc, self.ctrl = spawn.Watched(pid), mine
        return self.proc

    def recycle_if_grown(self) -> None:
        """Replace a judge that grew (see :attr:`GROWTH_LIMIT`); a new one is forked when needed."""
        if self.proc is not None and not self.proc.exited:
            if budget.mapped_bytes(str(self.proc.pid)) > self.baseline + self.GROWTH_LIMIT:
                self.close()

    def _ended(self) -> bool:
        """The judge died since the last test (its pidfd is readable)."""
        if self.proc.pidfd is None:
            return False
        return bool(select.select([self.proc.pidfd], [], [], 0)[0])

    def resume(self) -> None:
        """Undo a SIGSTOP a program may have sent the judge (it outlives the test)."""
        if self.proc is not None and not self.proc.exited:
            try:
                os.kill(self.proc.pid, signal.SIGCONT)
            except OSError:
                pass

    @property
    def pids(self) -> tuple[int, ...]:
        """What the cleanup after a test must spare."""
        return (self.proc.pid,) if self.proc is not None and not self.proc.exited else ()

    def close(self) -> None:
        if self.ctrl is not None:
            self.ctrl.close()
            self.ctrl = None
        if self.proc is not None:
            if self.proc.status is None:  # not reaped yet, so the pid is still its own
                try:
                    os.kill(self.proc.pid, 9)
                except OSError:
                    pass
            self.proc.reap(block=True)
            self.proc.close()
            self.proc = None


JUDGE = Judge()


def spared(zygote) -> tuple[int, ...]:
    """The executor's long-lived children, which the cleanup after a test leaves alone."""
    return ((zygote.pid,) if zygote.pid else ()) + JUDGE.pids


def _request(job: dict, test: dict) -> bytes:
    """What the program's process may know: the program and the redacted test (marshal:
    the same interpreter reads it, and it is cheaper to read than JSON)."""
    kind = test["kind"]
    request = {"program": job["program"], "kind": kind, "limits": job["limits"], "cwd": os.getcwd()}
    if kind == "call":
        request["fn"] = test["fn"]
        request["args"] = test.get("args", [])  # the suite's form (plain objects are dicts)
        request["kwargs"] = {}
    return marshal.dumps(request)


def output_cap(test: dict, out_limit: int) -> int:
    """How much of a test's stdout the executor reads: enough to compare with the expected
    output (longer is wrong anyway), all of a reference's answer in a ``record`` job."""
    if test["kind"] != "io":
        return out_limit
    if test.get("_record"):
        return min(int(test.get("_record_cap", RECORD_OUTPUT_LIMIT)), RECORD_OUTPUT_LIMIT)
    return max(out_limit, 2 * len(test.get("stdout", "").encode()) + 4096)


def native_binary(job: dict, field: str, name: str) -> bytes:
    """A compiled checker's or interactor's binary (``job[field][name]``, base64 from the
    host), decoded once per job, not once per test."""
    decoded = job.setdefault("_binaries", {})
    if (field, name) not in decoded:
        decoded[field, name] = base64.b64decode(job[field][name]["binary"], validate=True)
    return decoded[field, name]


def checker_for(job: dict, timeout_s: float):
    """The ``check`` callback of :class:`verdict.Outcome` for the tests of ``job``."""

    def check(test: dict, input_tree, expected_tree, output_tree, output_plain: bool = True) -> tuple[str, str]:
        name = test["checker"]
        source = (job.get("checkers") or {}).get(name)
        if source is None:
            raise verdict.HarnessFailure(f"the job has no checker named {name!r}")
        if type(source) is dict:  # a C++ checker the host compiled (host: sandbox/native_checker.py)
            source = native_binary(job, "checkers", name)
        return run_checker(source, (input_tree, expected_tree, output_tree), output_plain,
                           max(CHECKER_MIN_S, 2 * timeout_s), int(job["limits"]["memory_mb"]))

    return check


def run_checker(source: str | bytes, trees: tuple, output_plain: bool, timeout_s: float,
                memory_mb: int) -> tuple[str, str]:
    """Ask the judge to run a checker (trusted suite code) on a finished test. The values
    travel undecoded, as trees (``input`` and ``expected`` in the suite's form, ``output``
    as the program sent it), in a memory file; the judge decodes them under its limits. A
    checker that fails, hangs or dies rejects the answer, with a message that says so
    (``tasks check`` shows it on the reference). ``source``: Python source, or the binary
    of a compiled C++ checker (sent as a second memory file)."""
    try:
        payload = marshal.dumps({"input": trees[0], "expected": trees[1], "output": trees[2], "plain": output_plain})
    except ValueError as exc:  # nested past marshal's depth
        return "fail", f"checker: cannot pass the values ({exc})"
    JUDGE.get()
    JUDGE.resume()
    native = type(source) is bytes
    request = {"kind": "checker", "memory_mb": memory_mb}
    request.update({"native": True, "cpu_s": timeout_s} if native else {"code": source})
    fds = [spawn.memfd("check", payload)]
    try:
        if native:
            fds.append(spawn.memfd("checker", source))
        protocol.send_fds(JUDGE.ctrl, request, fds)
    except OSError:
        JUDGE.close()
        raise verdict.HarnessFailure("the judge is gone") from None
    finally:
        for fd in fds:
            os.close(fd)
    reply = b""
    deadline = time.monotonic() + timeout_s
    while not reply.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([JUDGE.ctrl], [], [], left)[0]:
            JUDGE.close()
            return "fail", f"checker: did not finish in {timeout_s:g} s"
        try:
            chunk = JUDGE.ctrl.recv(65536)
        except ConnectionResetError:  # it died with our request unread
            chunk = b""
        if not chunk:
            JUDGE.close()
            return "fail", "checker: the judge died running it"
        reply += chunk
    report = json.loads(reply)
    if report.get("ok") is True:
        return "pass", ""
    return "fail", str(report.get("message") or "the checker rejected the answer")[:2000]


def test_result(outcome, name: str, message: str, seen: dict, cpu_s: float, stdout: bytes, stderr: bytes,
                out_limit: int) -> dict:
    """One test's entry of the result (docs/sandbox.md); a ``record`` job's passing tests
    carry the program's answer: ``value`` (a codec tree) or the whole ``stdout``. What it
    printed and its message are kept under the job's output budget (:mod:`.kept`), once
    the verdict is decided."""
    record = outcome.test.get("_record") and name == "pass"
    # The message first, then stderr: what says why a test failed keeps its room.
    said = kept.JOB.message(message, kept.MESSAGE_CAP)
    err = kept.JOB.output(stderr, out_limit)
    out = {
        "verdict": name,
        "duration_ms": round(seen["duration_ms"], 3),
        "cpu_ms": round(cpu_s * 1000, 3),
        "stdout": stdout.decode("utf-8", "replace") if record else kept.JOB.output(stdout, out_limit),
        "stderr": err,
        "message": said,
    }
    if record and outcome.test["kind"] == "call":
        out["value"] = verdict.parse_report(outcome.report, outcome.nonce, outcome.started_marker)[1]["value"]
    return out


def start_interactor(job: dict, test: dict) -> tuple[spawn.Watched, int, int]:
    """Start an interactive test's interactor in the judge (docs/sandbox.md, Interactive
    tests): the judge, and the ends of its pipes the program gets as its stdin and stdout."""
    source = (job.get("interactors") or {}).get(test["interactor"])
    if source is None:
        raise verdict.HarnessFailure(f"the job has no interactor named {test['interactor']!r}")
    request = {"kind": "interact", "input": test.get("stdin", ""), "answer": test.get("stdout"),
               "memory_mb": job["limits"]["memory_mb"]}
    binary = native_binary(job, "interactors", test["interactor"]) if type(source) is dict else None
    judged = JUDGE.get()
    JUDGE.resume()
    stdin_fd, to_program = os.pipe()
    from_program, prog_out = os.pipe()
    fds = [from_program, to_program]
    if binary is not None:  # a C++ interactor the host compiled, sent as a memory file
        request["native"] = True
        fds.append(spawn.memfd("interactor", binary))
    else:
        request["code"] = source
    try:
        protocol.send_fds(JUDGE.ctrl, request, fds)
    except OSError:
        JUDGE.close()
        os.close(stdin_fd)
        os.close(prog_out)
        raise verdict.HarnessFailure("the judge is gone") from None
    finally:  # the judge holds its own copies now
        for fd in fds:
            os.close(fd)
    return judged, stdin_fd, prog_out


def run_python_test(job: dict, test: dict, zygote) -> dict:
    limits = job["limits"]
    timeout = float(limits["timeout_s"])
    out_limit = int(limits.get("max_output_bytes", 65536))
    kind = test["kind"]
    keep = output_cap(test, out_limit)
    interactor = test.get("interactor") if kind == "io" else None
    judged = None
    if interactor is not None:  # the program's stdin and stdout are the interactor's pipes
        judged, stdin_fd, prog_out = start_interactor(job, test)
    elif kind == "io" and test.get("stdin"):
        stdin_fd = spawn.memfd("stdin", test["stdin"].encode())
    else:
        stdin_fd = os.open(os.devnull, os.O_RDONLY)
    req_fd = spawn.memfd("request", _request(job, test))
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    rep_r, rep_w = os.pipe()
    child_fds = [req_fd, stdin_fd, prog_out if interactor is not None else out_w, err_w, rep_w]
    if interactor is not None:
        os.close(out_w)  # nothing writes the test's stdout: the program's goes to the interactor
    pipes = {out_r: keep, err_r: out_limit, rep_r: REPORT_LIMIT}
    if kind == "script":
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        judged = JUDGE.get()
        request = {"code": test["code"], "memory_mb": limits["memory_mb"], "entry_point": job.get("entry_point"),
                   "helpers": job.get("helpers"), "max_bytes": max(16 * MIB, 4 * out_limit)}
        try:
            protocol.send_fds(JUDGE.ctrl, request, [mine.fileno(), out_w, err_w])
        except OSError:
            JUDGE.close()
            theirs.close()
            for fd in [*child_fds, *pipes]:
                os.close(fd)
            raise verdict.HarnessFailure("the judge is gone") from None
        finally:
            mine.close()
        child_fds.append(theirs.detach())
    try:
        pid, pidfd = zygote.spawn(child_fds)
    except (RuntimeError, OSError):  # OSError: a fork refused (the pids limit), a socket that failed
        if judged is not None:
            JUDGE.close()
        for fd in [*child_fds, *pipes]:
            os.close(fd)
        raise verdict.HarnessFailure("the zygote could not start the program's process") from None
    finally:
        for fd in child_fds:
            try:
                os.close(fd)
            except OSError:
                pass
    # The clock starts once the program's process exists: a zygote slow to answer (a
    # previous program stopped it) costs this test nothing.
    start = time.monotonic()
    main = spawn.Watched(pid, zygote.collect, pidfd)
    seen = spawn.watch(main, judged, pipes, timeout, start, spare=spared(zygote),
                       report_fd=JUDGE.ctrl.fileno() if judged is not None else None)
    zygote.resume()
    JUDGE.resume()
    bufs = seen["bufs"]
    judge_report = None
    cpu_s = seen["cpu_s"]
    if judged is not None:
        if seen["report"].endswith(b"\n"):
            judge_report = json.loads(seen["report"])
            # The interactor's time is not the program's; a script test's judge works for it.
            if not seen["timed_out"] and interactor is None:  # else the watcher's count has the judge's share
                cpu_s += float(judge_report.pop("cpu_s", 0.0))
        else:
            JUDGE.close()  # killed at the deadline, or died: a new one for the next test
    outcome = verdict.Outcome(
        test, status=main.status, timed_out=seen["timed_out"], cpu_s=cpu_s, limit_s=timeout,
        report=bufs[rep_r], started_marker=True, judge=judge_report,
        judge_status=judged.status if judged is not None else None,
        judge_killed=bool(seen["timed_out"]), stdout=bufs[out_r], stderr=bufs[err_r],
        truncated=seen["overflow"][out_r], check=checker_for(job, timeout), report_overflow=seen["overflow"][rep_r],
        main_ended=seen["main_ended"],
    )
    name, message = budget.decide(outcome, limits)
    return test_result(outcome, name, message, seen, cpu_s, bufs[out_r], bufs[err_r], out_limit)
