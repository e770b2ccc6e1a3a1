"""One warm executor behind a JSON-lines channel: a container or a host subprocess.

A :class:`Worker` wraps a started executor and the file descriptors of its channel (the
pipes of a subprocess, or a unix socket the executor connected to). It waits for the
``ready`` line, then sends one job at a time and reads the reply with a deadline. A worker
that dies, hangs or answers garbage raises :class:`WorkerLost`; the pool then destroys it
(removing its container) and retries the job on a fresh one; so does an executor whose
harness failed on a job (``harness failure: ...``: its zygote or judge, as in a lost
worker). An executor that answers that it cannot run the job at all (``executor failure:
...``: the job is bad for it) raises :class:`JobRefused`: the job is not retried, and the
worker is replaced all the same, since a program may have caused the failure and left
the container in a state the next job would inherit. A result may come with ``retire``:
the job left what the executor could not clean up (files it could not remove); the
verdicts stand and the worker is replaced.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import time
from collections.abc import Callable
from typing import Any

from grpo_code.sandbox.wire import encode_message


class WorkerLost(Exception):
    """The executor died, hung or broke the protocol; the job did not get a verdict."""


HARNESS_FAILURE = "harness failure:"
"""How the executor's ``error`` reply starts when its harness failed on a job (executor/main.py)."""


class HarnessFailed(WorkerLost):
    """The executor's harness (its zygote or judge) failed on this job: not the program's
    doing; handled as a lost worker (a fresh one, the job retried once)."""


class JobRefused(Exception):
    """The executor answered that it could not run this job (``executor failure``): running
    it again would end the same way, so it is not retried."""


class ExecutorKilled(WorkerLost):
    """The executor was killed by a signal the host did not send, during a job: on the
    local backend (where the executor is not PID 1 of a container) the job's program can
    do that, so a job that does it on every attempt gets the program's verdict."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum


class Worker:
    """A started executor and its channel. Not thread-safe: one job at a time.

    ``read_fd``/``write_fd`` carry the JSON lines; ``on_close`` stops it gracefully (end of
    input), ``on_destroy`` hard (kill, remove the container); ``diagnose`` describes why it
    went away (exit status, stderr) for error messages.
    """

    def __init__(
        self,
        name: str,
        read_fd: int,
        write_fd: int,
        on_close: Callable[[], None],
        on_destroy: Callable[[], None],
        diagnose: Callable[[], str] = lambda: "",
        start_timeout_s: float = 60.0,
        killed_by: Callable[[], int | None] = lambda: None,
    ):
        self.name = name
        self.jobs_done = 0
        self.retire: str | None = None
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._on_close = on_close
        self._on_destroy = on_destroy
        self._diagnose = diagnose
        self._killed_by = killed_by
        self._buf = bytearray()
        self._next_id = 0
        self._dead = False
        self._gone: list[Callable[[], None]] = []
        try:
            self.hello = self._read(time.monotonic() + start_timeout_s)
        except WorkerLost as exc:
            self.destroy()
            raise WorkerLost(f"{name} did not start: {exc}") from None
        if not self.hello.get("ready"):
            self.destroy()
            raise WorkerLost(f"{name} did not start: unexpected first message {self.hello!r}")

    # ----------------------------------------------------------------- channel

    def _read(self, deadline: float) -> dict[str, Any]:
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                try:
                    return json.loads(line)
                except ValueError:
                    raise WorkerLost(f"unreadable message {line[:200]!r}") from None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerLost(f"no answer within the deadline (hung?) {self._diagnose()}".strip())
            ready, _, _ = select.select([self._read_fd], [], [], remaining)
            if not ready:
                continue
            try:
                chunk = os.read(self._read_fd, 1 << 20)
            except OSError as exc:
                raise WorkerLost(f"channel error ({exc}) {self._diagnose()}".strip()) from None
            if not chunk:
                signum = self._killed_by()
                if signum:
                    raise ExecutorKilled(f"the executor was killed by signal {signum} {self._diagnose()}".strip(),
                                         signum)
                raise WorkerLost(f"the executor went away {self._diagnose()}".strip())
            self._buf += chunk

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one message and wait for its answer; raises :class:`WorkerLost` when the
        executor did not answer it, :class:`JobRefused` when it answered with an error."""
        if self._dead:
            raise WorkerLost("worker already destroyed")
        self._next_id += 1
        mid = self._next_id
        view = memoryview(encode_message(mid, message))
        try:
            while view:
                view = view[os.write(self._write_fd, view) :]
        except OSError as exc:
            raise WorkerLost(f"cannot send to the executor ({exc}) {self._diagnose()}".strip()) from None
        reply = self._read(time.monotonic() + timeout_s)
        if reply.get("id") != mid:
            raise WorkerLost(f"answer to message {reply.get('id')!r}, expected {mid}")
        if "error" in reply:
            error = str(reply["error"])
            raise HarnessFailed(error) if error.startswith(HARNESS_FAILURE) else JobRefused(error)
        return reply

    def run(self, wire_job: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """The job's result; :attr:`retire` then says whether the executor asked to be
        replaced (the job left something it could not clean up)."""
        self.jobs_done += 1
        reply = self.request({"job": wire_job}, timeout_s)
        if not isinstance(reply.get("result"), dict):
            raise WorkerLost("answer without a result")
        self.retire = str(reply["retire"]) if reply.get("retire") else None
        return reply["result"]

    def ping(self, timeout_s: float = 5.0) -> bool:
        try:
            return bool(self.request({"ping": True}, timeout_s).get("pong"))
        except (WorkerLost, JobRefused):
            return False

    # ----------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Graceful stop: end of input makes the executor exit."""
        if not self._dead:
            self._dead = True
            with contextlib.suppress(Exception):
                self._on_close()
            self._after()

    def destroy(self) -> None:
        """Hard stop: kill the executor and remove whatever it ran in."""
        if not self._dead:
            self._dead = True
            with contextlib.suppress(Exception):
                self._on_destroy()
            self._after()

    def when_gone(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` once the worker is stopped (what it held given back)."""
        if self._dead:
            fn()
        else:
            self._gone.append(fn)

    def _after(self) -> None:
        for fn in self._gone:
            fn()
        self._gone.clear()

    @property
    def dead(self) -> bool:
        return self._dead


def subprocess_worker(
    argv: list[str], name: str, start_timeout_s: float = 60.0, after: Callable[[], None] = lambda: None
) -> Worker:
    """A worker whose channel is the stdin/stdout of a subprocess (``after`` runs once it is gone)."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
        start_new_session=True,  # Ctrl-C in the terminal must not reach the executor first
    )

    def diagnose() -> str:
        code = proc.poll()
        try:
            os.set_blocking(proc.stderr.fileno(), False)
            err = (proc.stderr.read(4096) or b"").decode("utf-8", "replace").strip()[-500:]
        except (OSError, ValueError, TypeError):
            err = ""
        return f"(exit status {code}; stderr: {err!r})" if code is not None or err else ""

    def finish() -> None:
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            with contextlib.suppress(Exception):
                stream.close()
        after()

    def close() -> None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        finish()

    def destroy() -> None:
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(Exception):
            proc.wait(10)
        finish()

    def killed_by() -> int | None:
        try:
            code = proc.wait(2)
        except subprocess.TimeoutExpired:
            return None
        return -code if code < 0 else None

    worker = Worker(
        name, proc.stdout.fileno(), proc.stdin.fileno(), close, destroy, diagnose, start_timeout_s, killed_by
    )
    worker.proc = proc  # type: ignore[attr-defined]
    return worker
