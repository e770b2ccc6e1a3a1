"""The zygote: a clean, warm interpreter that forks the program's processes.

A fork copies the whole address space, so a program forked from the executor could read
every test of the job, the expected values included, out of its own memory. The zygote is
started with ``exec`` (a fresh interpreter) before any job arrives and never reads one:
each request is a set of file descriptors (the request's memory file, stdio, the report
pipe, the judge's socket) passed over a unix socket, and only the forked child reads the
request. What a program finds in its memory is its own program and its own test input.

The zygote double-forks, so the program's process is re-parented to the executor (a child
subreaper, or PID 1 of the container): the executor waits for it, reads its CPU time and
kills its process group as it does for any child. The zygote is non-dumpable, so a program
cannot ptrace it to tamper with the next test's process; if a program kills it, the
executor starts a new one. Standard library only.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

from . import protocol

_ZYGOTE_ARG = "--zygote"


class Zygote:
    """The executor's handle on its zygote process."""

    def __init__(self, entry: str, prctl):
        self.entry = entry
        self.prctl = prctl
        self.pid = None
        self.sock = None

    def start(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            try:
                fd = child.detach()
                os.set_inheritable(fd, True)
                os.dup2(fd, 3)
                os.closerange(4, 4096)
                os.execv(sys.executable, [sys.executable, "-I", self.entry, _ZYGOTE_ARG])
            finally:
                os._exit(127)
        child.close()
        self.pid, self.sock = pid, parent
        header = self._read_line(20.0)
        if header is None or not header.get("zygote"):
            self.stop()
            raise RuntimeError("the zygote did not start")

    def _read_line(self, timeout: float):
        self.sock.settimeout(timeout)
        data = b""
        try:
            while not data.endswith(b"\n"):
                chunk = self.sock.recv(4096)
                if not chunk:
                    return None
                data += chunk
        except OSError:
            return None
        finally:
            self.sock.settimeout(None)
        try:
            return json.loads(data)
        except ValueError:
            return None

    def spawn(self, fds: list[int]) -> int:
        """Fork a program process with ``fds`` (request, stdin, stdout, stderr, report[,
        channel]); returns its pid, once it is the executor's child. Restarts a zygote
        that died (say, killed by the previous test's program) and tries once more."""
        for _attempt in (0, 1):
            if self.sock is None:
                self.start()
            try:
                protocol.send_fds(self.sock, {"spawn": len(fds)}, fds)
                answer = self._read_line(3.0)
            except OSError:
                answer = None
            if answer is not None and isinstance(answer.get("pid"), int):
                return answer["pid"]
            self.stop()
        raise RuntimeError("the zygote could not start the program's process")

    def resume(self) -> None:
        """Undo a SIGSTOP a program may have sent the zygote (it is not PID 1)."""
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGCONT)
            except OSError:
                pass

    def stop(self) -> None:
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


def zygote_main(prctl) -> int:
    """The zygote's loop (fd 3 is its socket to the executor)."""
    from . import pychild

    prctl(pychild.PR_SET_DUMPABLE, 0)
    sock = socket.socket(fileno=3)
    sock.sendall(b'{"zygote": true}\n')
    while True:
        try:
            header, fds = protocol.recv_fds(sock)
        except OSError:
            return 0
        if header is None:
            return 0
        r, w = os.pipe()
        middle = os.fork()
        if middle == 0:
            try:
                os.close(r)
                pid = os.fork()
                if pid == 0:
                    os.close(w)
                    sock.close()
                    pychild.program_main(fds, prctl)
                os.write(w, str(pid).encode())
            finally:
                os._exit(0)
        os.close(w)
        for fd in fds:
            os.close(fd)
        data = b""
        while True:
            chunk = os.read(r, 64)
            if not chunk:
                break
            data += chunk
        os.close(r)
        os.waitpid(middle, 0)
        answer = {"pid": int(data)} if data.isdigit() else {"error": "fork failed"}
        try:
            sock.sendall((json.dumps(answer) + "\n").encode())
        except OSError:
            return 0
