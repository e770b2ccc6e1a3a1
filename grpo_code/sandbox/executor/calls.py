"""A job's ``call`` tests in one program process, one input after another.

Suites such as HumanEval+ have hundreds of ``call`` tests per task. Starting a process and
loading the program for each input costs more than most calls do, so by default
(``isolation: job``) the ``call`` tests of a job share one program process (a
:class:`Session`): it loads the program once, then takes one test at a time over fd 4 (a
memory file with the function, the arguments and a sequence number) and answers each
with one report line. The executor watches each test on its own: its own CPU and time
limit from the moment its request is sent, its own output, its own verdict. What decides
a verdict still never enters the program's process: expected values, checkers and the
other tests stay here, and each call's arguments are decoded afresh from the request.

What this gives up is only what a program keeps between its own calls (module globals, a
cache, background threads), the same as human-eval and evalplus, which run a sample's
inputs in one process. It cannot change a verdict in the program's favour: the program
never learns an expected value, and its answers are judged here one by one. A test that
ends the process (a crash, a timeout, ``MemoryError``) gets its verdict, and the next
test starts a new process. A program that does not load (a syntax error, an exception, a
timeout at import) fails every ``call`` test of the run with that first verdict, as each
would have in a process of its own. ``isolation: test`` gives every test a new process.
"""

from __future__ import annotations

import marshal
import os
import select
import signal
import socket
import time

from . import budget, pyjob, spawn, verdict
from .pychild import REPORT_LIMIT

STARTED = b'{"event":"started"}'
LOADED = b'{"event": "loaded"}'
NOT_RUN_MESSAGE = "not run: an earlier test did not pass and the job stops at the first failure"


def not_run() -> dict:
    """The result of a test a job that stops at its first failure did not run."""
    return {"verdict": "not_run", "duration_ms": 0.0, "cpu_ms": 0.0, "stdout": "", "stderr": "",
            "message": NOT_RUN_MESSAGE}


def run_tests(job: dict, zygote) -> list[dict]:
    """Every test of a Python job, in order: runs of ``call`` tests in a :class:`Session`
    (unless ``isolation`` is ``test``), the others each in a process of its own. With
    ``stop_on_failure``, the tests after the first that does not pass are ``not_run``."""
    shared = job.get("isolation", "job") == "job"
    results: list[dict] = []
    session = None
    try:
        for test in job["tests"]:
            if shared and test["kind"] == "call":
                session = session or Session(job, zygote)
                result = session.run(test)
            else:
                if session is not None:
                    session.close()
                    session = None
                result = pyjob.run_python_test(job, test, zygote)
            results.append(result)
            if job.get("stop_on_failure") and result["verdict"] != "pass":
                break
    finally:
        if session is not None:
            session.close()
    return results + [not_run() for _ in job["tests"][len(results):]]


class Session:
    """One program process serving a run of ``call`` tests (started at its first test,
    replaced after a test that ended it)."""

    def __init__(self, job: dict, zygote):
        self.job = job
        self.zygote = zygote
        limits = job["limits"]
        self.timeout = float(limits["timeout_s"])
        self.out_limit = int(limits.get("max_output_bytes", 65536))
        self.proc: spawn.Watched | None = None
        self.seq = 0
        self.unloaded: tuple[str, str] | None = None
        """The verdict of a program that did not load: every later test of the run gets it."""

    # ------------------------------------------------------------------ the process

    def _start(self) -> None:
        request = {"program": self.job["program"], "kind": "calls", "limits": self.job["limits"], "cwd": os.getcwd()}
        req_fd = spawn.memfd("request", marshal.dumps(request))
        stdin_fd = os.open(os.devnull, os.O_RDONLY)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        rep_r, rep_w = os.pipe()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        child_fds = [req_fd, stdin_fd, out_w, err_w, rep_w, theirs.detach()]
        try:
            pid, pidfd = self.zygote.spawn(child_fds)
        except (RuntimeError, OSError):
            mine.close()
            for fd in (out_r, err_r, rep_r):
                os.close(fd)
            raise verdict.HarnessFailure("the zygote could not start the program's process") from None
        finally:
            for fd in child_fds:
                os.close(fd)
        mine.setblocking(False)
        self.proc = spawn.Watched(pid, self.zygote.collect, pidfd)
        self.channel = mine
        self.out_r, self.err_r, self.rep_r = out_r, err_r, rep_r
        self.pending = bytearray()  # report bytes not yet taken as a line
        self.scanned = 0  # how much of it has no line end
        self.started = self.loaded = False

    def close(self) -> None:
        """End the process (if any) and everything it started."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        for kill in (os.killpg, os.kill):
            try:
                kill(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        proc.reap(block=True)
        proc.close()
        spawn.kill_leftovers(proc.pid, pyjob.spared(self.zygote))
        self.zygote.resume()
        pyjob.JUDGE.resume()
        self.channel.close()
        for fd in (self.out_r, self.err_r, self.rep_r):
            os.close(fd)

    # ------------------------------------------------------------------ one test

    def run(self, test: dict) -> dict:
        if self.unloaded is not None:
            name, message = self.unloaded
            return {"verdict": name, "duration_ms": 0.0, "cpu_ms": 0.0, "stdout": "", "stderr": "",
                    "message": message}
        if self.proc is None:
            self._start()
        self.seq += 1
        seq = self.seq
        request = {"fn": test["fn"], "args": test.get("args", []), "kwargs": {}, "seq": seq}
        start = time.monotonic()
        fd = spawn.memfd("call", marshal.dumps(request))
        try:
            socket.send_fds(self.channel, [b"{}\n"], [fd])
        except OSError:
            # The process has ended (say, the program exited while it loaded) or its program
            # closed or clogged its end: what the watcher sees decides, as for any test
            # (a process gone before ``started`` is the harness's failure, after it the program's).
            pass
        finally:
            os.close(fd)
        seen = self._watch(start, seq)
        return self._result(test, seen, seq)

    def _watch(self, start: float, seq: int) -> dict:
        """Follow one test until its answer line, the process's end or its limits."""
        proc = self.proc
        pid = proc.pid
        deadline = spawn.Deadline(self.timeout, start, [pid])
        keep = {self.out_r: self.out_limit, self.err_r: self.out_limit}
        bufs = {self.out_r: bytearray(), self.err_r: bytearray()}
        overflow = {self.out_r: False, self.err_r: False}
        poller = select.poll()
        for fd in (self.out_r, self.err_r, self.rep_r):
            poller.register(fd, select.POLLIN)
        if proc.pidfd is not None:
            poller.register(proc.pidfd, select.POLLIN)
        answer = None
        too_long = False
        timed_out = None

        def take(fd: int, chunk: bytes) -> None:
            room = keep[fd] + 1 - len(bufs[fd])
            if len(chunk) > max(room, 0):
                overflow[fd] = True
            if room > 0:
                bufs[fd] += chunk[:room]

        def lines() -> bytes | None:
            """The answer, once its line is whole (``started``/``loaded`` are taken on the way)."""
            nonlocal too_long
            while True:
                end = self.pending.find(b"\n", self.scanned)
                if end < 0:
                    self.scanned = len(self.pending)  # each byte is searched once
                    if len(self.pending) > REPORT_LIMIT:  # the rest of the line is read and dropped
                        too_long = True
                        del self.pending[:]
                        self.scanned = 0
                    return None
                line = bytes(self.pending[:end])
                del self.pending[:end + 1]
                self.scanned = 0
                if too_long:
                    return b""
                if not self.started and line == STARTED:
                    self.started = True
                elif self.started and not self.loaded and line == LOADED:
                    self.loaded = True
                else:
                    return line

        while answer is None and not proc.exited:
            now = time.monotonic()
            if now >= deadline.next_check:
                timed_out = deadline.check(now, [pid])
                if timed_out:
                    break
            for fd, _ in poller.poll(max((deadline.next_check - now) * 1000, 0.5)):
                if fd == proc.pidfd:
                    proc.exited = True
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    poller.unregister(fd)
                    continue
                if fd == self.rep_r:
                    self.pending += chunk
                    answer = lines()
                    if answer is not None:
                        break
                else:
                    take(fd, chunk)
        ended = answer is None
        cpu_s = deadline.cpu.used([pid])
        if ended:
            # Timed out, or the process is gone: kill, reap, and read what it left.
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            proc.reap(block=True)
            cpu_s = max(cpu_s, proc.cpu_s)
        for fd in (self.out_r, self.err_r, self.rep_r):
            try:
                os.set_blocking(fd, False)
                for _ in range(256 if ended else 16):
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    if fd == self.rep_r:
                        self.pending += chunk
                    else:
                        take(fd, chunk)
            except OSError:
                pass
            finally:
                os.set_blocking(fd, True)
        if ended and answer is None and not timed_out:
            answer = lines()
        status = proc.status if ended else 0  # alive and answered: as a process that exited 0
        return {"answer": answer, "too_long": too_long, "timed_out": timed_out, "status": status, "ended": ended,
                "cpu_s": cpu_s, "duration_ms": (time.monotonic() - start) * 1000,
                "stdout": bytes(bufs[self.out_r]), "stderr": bytes(bufs[self.err_r]),
                "truncated": overflow[self.out_r]}

    def _result(self, test: dict, seen: dict, seq: int) -> dict:
        answer = seen["answer"]
        out_of_turn = answer is not None and answer != b"" and self.loaded and not answer.endswith(
            b'"seq": %d}' % seq)
        report = (STARTED + b"\n" if self.started else b"") + (answer + b"\n" if answer else b"")
        outcome = verdict.Outcome(
            test, status=seen["status"], timed_out=seen["timed_out"], cpu_s=seen["cpu_s"], limit_s=self.timeout,
            report=report, started_marker=True, stdout=seen["stdout"], stderr=seen["stderr"],
            truncated=seen["truncated"], check=pyjob.checker_for(self.job, self.timeout),
            report_overflow=seen["too_long"])
        if out_of_turn:
            name, message = "fail", "an answer out of turn on the harness channel"
        else:
            name, message = budget.decide(outcome, self.job["limits"])
        if not self.loaded and name == "pass":
            # Only a failure can come before the program has loaded: an answer written while
            # it loads was not asked for (and must not become every later test's verdict).
            name, message = "fail", "an answer on the harness channel before the program loaded"
        if seen["ended"] or out_of_turn or not self.loaded or name == "memory":  # MemoryError: it exits
            loaded = self.loaded
            self.close()
            if not loaded:
                self.unloaded = (name, f"the program did not load (as the first call test of this run: {message})")
        return pyjob.test_result(outcome, name, message, seen, seen["cpu_s"], seen["stdout"], seen["stderr"],
                                 self.out_limit)
