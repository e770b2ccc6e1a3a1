"""The zygote: a clean, warm interpreter that forks the program's processes.

A fork copies the whole address space, so a program forked from the executor could read
every test of the job, the expected values included, out of its own memory. The zygote is
started with ``exec`` (a fresh interpreter) before any job arrives and never reads one:
each request is a set of file descriptors (the request's memory file, stdio, the report
pipe, the judge's socket) passed over a unix socket, and only the forked child reads the
request. What a program finds in its memory is its own program and its own test input.

The zygote waits for the program's process and tells the executor how it ended (status
and CPU time); the executor watches it through a pidfd and kills its process group. The
zygote is non-dumpable, so a program cannot ptrace it to tamper with the next test's
process; if a program kills it, the program's process is re-parented to the executor (a
child subreaper, or PID 1 of the container), which then waits for it itself, and a new
zygote is started for the next test. Standard library only.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import socket
import sys
import time

from . import protocol, spawn

_ZYGOTE_ARG = "--zygote"
SILENT = object()
"""What :meth:`Zygote._read_line` returns when the zygote said nothing in time (``waiting``)."""
RESUME_EVERY_S = 0.01
"""How often the executor resumes a zygote it waits for (a leftover process may stop it again)."""
REPLY_S = 5.0
"""How long the executor waits for the zygote's report of a test's process (a leftover
process may keep stopping the zygote); then the zygote is replaced."""


class Zygote:
    """The executor's handle on its zygote process."""

    def __init__(self, entry: str, workdir: str | None = None):
        self.entry = entry
        self.workdir = workdir  # where its programs run: their Landlock ruleset is built once for it
        self.pid = None
        self.sock = None
        self._buf = b""
        self._fds: list[int] = []

    def start(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            try:
                fd = child.detach()
                os.set_inheritable(fd, True)
                os.dup2(fd, 3)
                os.closerange(4, 4096)
                os.execv(sys.executable, [sys.executable, "-I", self.entry, _ZYGOTE_ARG,
                                          *(["--workdir", self.workdir] if self.workdir else [])])
            finally:
                os._exit(127)
        child.close()
        self.pid, self.sock, self._buf, self._fds = pid, parent, b"", []
        header = self._read_line(20.0)
        if header is None or not header.get("zygote"):
            self.stop()
            raise RuntimeError("the zygote did not start")

    def _read_line(self, timeout: float, waiting: bool = False):
        """The next JSON line from the zygote (descriptors that came with it go to
        ``self._fds``), or None when it is gone, silent or confused; with ``waiting``, a
        silence returns :data:`SILENT` (what came of a line so far is kept for the next call)."""
        self.sock.settimeout(timeout)
        try:
            while b"\n" not in self._buf:
                data, fds, _flags, _addr = socket.recv_fds(self.sock, 4096, 4)
                self._fds += fds
                if not data:
                    return None
                self._buf += data
        except TimeoutError:
            return SILENT if waiting else None
        except OSError:
            return None
        finally:
            self.sock.settimeout(None)
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            return None

    def spawn(self, fds: list[int]) -> tuple[int, int]:
        """Fork a program process with ``fds`` (request, stdin, stdout, stderr, report[,
        channel]); returns its pid and a pidfd of it (opened by the zygote before it could
        reap it, so it can never name another process). Restarts a zygote that died or
        stopped answering (say, the previous test's program killed or stopped it) and
        tries once more."""
        for _attempt in (0, 1):
            if self.sock is None:
                self.start()
            try:
                protocol.send_fds(self.sock, {"spawn": len(fds)}, fds)
                answer = self._read_line(3.0)
            except OSError:
                answer = None
            got, self._fds = self._fds, []
            if answer is not None and isinstance(answer.get("pid"), int) and len(got) == 1:
                return answer["pid"], got[0]
            for fd in got:
                os.close(fd)
            self.stop()
        raise RuntimeError("the zygote could not start the program's process")

    def collect(self, pid: int) -> tuple[int | None, float]:
        """(wait status, CPU seconds) of the program's process ``pid``, which has ended or
        been killed. When the zygote is gone the process is the executor's own child (it
        was re-parented): wait for it here."""
        if self.sock is not None:
            # A process the program left may keep stopping the zygote (a loop of SIGSTOP to
            # every pid, until the cleanup after this kills it): resume it while waiting.
            deadline = time.monotonic() + REPLY_S
            answer = SILENT
            while answer is SILENT and time.monotonic() < deadline:
                self.resume()
                answer = self._read_line(min(RESUME_EVERY_S, max(0.001, deadline - time.monotonic())), waiting=True)
            answer = None if answer is SILENT else answer
            if answer is not None and answer.get("exit") == pid:
                return answer["status"], float(answer["cpu_s"])
            self.stop()  # it died or answered nonsense: the next test gets a new one
        for _ in range(1000):
            try:
                _, status, rusage = os.wait4(pid, 0)
            except ChildProcessError:  # not re-parented to us yet, or already reaped
                time.sleep(0.001)
                continue
            return status, rusage.ru_utime + rusage.ru_stime
        return None, 0.0

    def resume(self) -> None:
        """Undo a SIGSTOP a program may have sent the zygote (it is not PID 1)."""
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGCONT)
            except OSError:
                pass

    def stop(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds, self._buf = [], b""
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.pid is not None:
            try:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            self.pid = None


def zygote_main(args: list[str] = ()) -> int:
    """The zygote's loop (fd 3 is its socket to the executor): fork the program's process,
    answer its pid, wait for it and answer how it ended."""
    from . import confine, pychild

    confine.prctl(confine.PR_SET_DUMPABLE, 0)
    pychild.default_signals()  # once here, for every program process it forks
    # ... but SIGPIPE ignored, as python3 starts: a write to a closed pipe raises
    # BrokenPipeError, which a program may catch, instead of killing it
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    sock = socket.socket(fileno=3)
    confine.prepare_seccomp()
    # What every program process it forks must be, set once here and inherited: the OOM
    # killer's first choice, and unable to write that back down (Landlock). Set per test,
    # they cost a third of a millisecond of each; the zygote writes no file, and a zygote
    # the OOM killer takes is replaced (the test's own verdict).
    confine.first_to_go()
    confine.writable_only(confine.writable_paths(args[1] if args[:1] == ["--workdir"] and len(args) > 1 else "/tmp"))
    pychild.warm_up()
    # Objects alive now are never collected: out of the GC's sight, a child's collections
    # do not touch (and copy) the pages they live on.
    gc.collect()
    gc.freeze()
    sock.sendall(b'{"zygote": true}\n')
    while True:
        try:
            header, fds = protocol.recv_fds(sock)
        except OSError:
            return 0
        if header is None:
            return 0
        try:
            pid = os.fork()
        except OSError:
            pid = -1
        if pid == 0:
            # The socket (fd 3) is closed when the child puts its report pipe on fd 3.
            pychild.program_main(fds)
        for fd in fds:
            os.close(fd)
        try:
            if pid > 0:
                pidfd = os.pidfd_open(pid)  # before any wait: it names this process only
                protocol.send_fds(sock, {"pid": pid}, [pidfd])
                os.close(pidfd)
            else:
                sock.sendall(b'{"error": "fork failed"}\n')
            if pid > 0:
                _, status, rusage = os.wait4(pid, 0)
                # Any other child is a process the program made the zygote's (``clone`` with
                # ``CLONE_PARENT``, where the seccomp filter is missing): it must not outlive the test.
                spawn.kill_children()
                ended = {"exit": pid, "status": status, "cpu_s": rusage.ru_utime + rusage.ru_stime}
                sock.sendall((json.dumps(ended) + "\n").encode())
        except OSError:
            return 0

