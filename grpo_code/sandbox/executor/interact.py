"""An interactive test's interactor, run by the judge (docs/sandbox.md, Interactive tests)."""

from __future__ import annotations

import builtins
import os
import resource
import sys
import traceback

from . import spawn
from .native_check import become, collect
from .pychild import MIB

_type = type
INTERACTOR_NAME = "<interactor>"


def _compiled(source: str, compiled: dict):
    """The interactor's code object, kept in the judge's cache across tests; a message when
    it does not compile."""
    key = (INTERACTOR_NAME, source)
    if key not in compiled:
        try:
            compiled[key] = compile(source, INTERACTOR_NAME, "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            compiled[key] = f"the interactor code does not compile: {type(exc).__name__}: {exc}"
    return compiled[key]

INTERACTOR_FAILED = 3
"""testlib's exit code for a failure of the judge's own code (here: an exception it did not
expect, or code that does not compile)."""
OUTPUT_FILE = 16 << 20
"""What a C++ interactor may write to its output file (testlib's ``tout``, which no checker reads here)."""


def interact_one(request: dict, fds: list[int], compiled: dict) -> dict:
    """An interactive test's interactor (trusted suite code) in a process of its own, forked
    from this one (so it is not dumpable: the program can neither trace it nor read its
    memory, only signal it), its stdin the program's stdout and its stdout the program's
    stdin. It reads the test's input as ``test_input`` (and its answer, if the test has one,
    as ``answer``); its exit code is the verdict, its stderr the message. Reading past the
    program's output (``EOFError``) or writing to a program that is gone (``BrokenPipeError``)
    is a wrong answer; any other exception is the interactor's failure (exit 3)."""
    from_program, to_program = fds[:2]
    native = request.get("native") is True  # a compiled C++ interactor (testlib's), in fds[2]
    code = None if native else _compiled(request["code"], compiled)
    if _type(code) is str:
        for fd in fds:
            os.close(fd)
        return {"event": "interacted", "code": INTERACTOR_FAILED, "signal": None, "message": code}
    try:
        err_r, err_w = os.pipe()
        pid = spawn.fork_closing(err_r, err_w)
    except OSError as exc:  # the program's processes hold the container's pids: its doing
        for fd in fds:
            os.close(fd)
        return {"event": "interacted", "code": None, "signal": None,
                "message": f"the interactor could not be started ({exc.strerror or exc}): the program's "
                           "processes hold what it needs"}
    if pid == 0 and native:  # testlib's interactor INPUT OUTPUT ANSWER, its stdio the program's pipes
        files = [spawn.memfd(name, (request.get(key) or "").encode("utf-8", "replace"))
                 for name, key in (("input", "input"), ("output", None), ("answer", "answer"))]
        become(fds[2], "interactor", files, (from_program, to_program, err_w), request["memory_mb"], None, OUTPUT_FILE)
    if pid == 0:  # the interactor; never returns into the judge's loop
        status = INTERACTOR_FAILED
        try:
            from .confine import prctl

            prctl(1, 9)  # PR_SET_PDEATHSIG: SIGKILL when the judge goes (killed at a deadline)
            import signal

            signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a write to a program that is gone raises
            os.dup2(from_program, 0)
            os.dup2(to_program, 1)
            os.dup2(err_w, 2)
            os.closerange(3, 4096)
            import io

            sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="replace")
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", line_buffering=True,
                                          write_through=True)
            sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="replace",
                                          write_through=True)
            mem = max(int(request["memory_mb"]), 1024) * MIB
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
            ns = {"__name__": "__main__", "__builtins__": builtins, "test_input": request.get("input") or "",
                  "answer": request.get("answer")}
            try:
                exec(code, ns)
                status = 0
            except SystemExit as exc:
                status = exc.code if _type(exc.code) is int else (0 if exc.code is None else 1)
                if exc.code is not None and _type(exc.code) is not int:
                    sys.stderr.write(str(exc.code))
            except (EOFError, BrokenPipeError) as exc:
                status = 1
                sys.stderr.write("the program's output ended before the interaction did" if _type(exc) is EOFError
                                 else "the program closed its input before the interaction ended")
            except BaseException as exc:
                status = INTERACTOR_FAILED
                sys.stderr.write("interactor raised " + "".join(traceback.format_exception_only(_type(exc), exc)))
            try:
                sys.stdout.flush()
            except BaseException:
                pass
        finally:
            os._exit(status & 0xFF)
    os.close(err_w)
    for fd in fds:
        os.close(fd)
    said, status = collect(pid, err_r)
    return {"event": "interacted", "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None, "message": said}
