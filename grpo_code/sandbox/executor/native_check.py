"""A compiled checker (C++, testlib's calling convention), run by the judge once the
program's processes are gone (docs/sandbox.md, Checkers).

The judge writes the test's input, the program's output and the expected answer to memory
files and runs the binary as ``checker INPUT OUTPUT ANSWER`` in a process of its own:
the judge's memory limit as its address space, a CPU limit, no files to write, its
stdin and stdout empty, stderr kept (testlib writes its verdict's reason there). The binary
is execute-only (mode 0100), so the process it becomes is not dumpable, as the judge is not;
it dies with the judge. Its exit code decides, as testlib's."""

from __future__ import annotations

import os
import resource

from . import spawn
from .pychild import MIB

VERDICTS = {1: "wrong answer", 2: "presentation error", 3: "the checker failed (the task's checker, not the program)"}
"""testlib's exit codes past 0 (accepted). 3 (``_fail``) is the checker's own failure: a
broken checker shows on the task's reference under ``tasks check``."""
MESSAGE_BYTES = 4096


def _text(value) -> bytes:
    if value is None:
        return b""
    return value.encode("utf-8", "replace") if type(value) is str else bytes(value)


def become(binary_fd: int, name: str, files: list[int], stdio: tuple[int, int, int], memory_mb: int,
           cpu_s: float | None, fsize: int) -> None:
    """In a child forked from the judge: exec the compiled checker or interactor in
    ``binary_fd`` (made execute-only, so the process is not dumpable) with ``files`` as its
    arguments (``/proc/self/fd`` paths) and ``stdio`` as its 0, 1, 2; nothing else stays
    open. It dies with the judge. Never returns."""
    try:
        from .confine import prctl

        prctl(1, 9)  # PR_SET_PDEATHSIG: SIGKILL when the judge goes (killed at a deadline)
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)
        low = 3
        for fd in sorted({binary_fd, *files}):  # everything else closed: the judge's channel above all
            os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, 65536)
        os.fchmod(binary_fd, 0o100)
        mem = max(int(memory_mb), 1024) * MIB
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        if cpu_s is not None:
            cpu = int(cpu_s) + 1
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.execve(binary_fd, [name, *(f"/proc/self/fd/{fd}" for fd in files)], {"PATH": "/usr/bin:/bin"})
    finally:
        os._exit(127)


def collect(pid: int, err_r: int) -> tuple[str, int]:
    """What a checker or interactor process said on stderr (its first ``MESSAGE_BYTES``,
    the rest read and dropped) and its wait status, once it ended."""
    said = bytearray()
    with os.fdopen(err_r, "rb") as err:
        while chunk := err.read(65536):
            if len(said) < MESSAGE_BYTES:
                said += chunk[:MESSAGE_BYTES - len(said)]
    _, status = os.waitpid(pid, 0)
    return said.decode("utf-8", "replace").strip(), status


def check_native(values: dict, binary_fd: int, memory_mb: int, cpu_s: float) -> dict:
    """Run the checker in ``binary_fd`` on the io test's ``values`` (input, expected,
    output as text); the judge's reply (``ok``, ``message``)."""
    files = []
    try:
        for name, value in (("input", values["input"]), ("output", values["output"]), ("answer", values["expected"])):
            files.append(spawn.memfd(name, _text(value)))
        err_r, err_w = os.pipe()
    except OSError as exc:
        for fd in files:
            os.close(fd)
        return {"ok": False, "message": f"checker: cannot be set up ({exc.strerror or exc})"}
    try:
        pid = spawn.fork_closing(err_r, err_w)
    except OSError as exc:
        for fd in files:
            os.close(fd)
        return {"ok": False, "message": f"checker: could not be started ({exc.strerror or exc})"}
    if pid == 0:  # the checker; never returns into the judge's loop
        null = os.open(os.devnull, os.O_RDWR)
        become(binary_fd, "checker", files, (null, null, err_w), memory_mb, cpu_s, 0)
    os.close(err_w)
    for fd in files:
        os.close(fd)
    message, status = collect(pid, err_r)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return {"ok": True, "message": ""}
    if os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
        what = VERDICTS.get(code, f"the checker exited {code}" + (" (could not run it)" if code == 127 else ""))
    else:
        what = f"the checker was killed by signal {os.WTERMSIG(status)}"
    # testlib names the verdict itself ("wrong answer ..."): its words, else the exit code's.
    said = message if message and code_is_testlib(status) else f"{what}: {message}" if message else what
    return {"ok": False, "message": f"checker: {said}"}


def code_is_testlib(status: int) -> bool:
    """An exit with testlib's wrong answer or presentation error, which its message names."""
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) in (1, 2)
