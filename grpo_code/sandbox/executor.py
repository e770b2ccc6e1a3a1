"""The in-sandbox executor: a warm interpreter that runs jobs and forks one process per test.

This file is copied into the sandbox image (``/opt/grpo-code/executor.py``) and is also
started as a plain host subprocess by the local backend, so it uses the standard library
only and runs on Python >= 3.10 (Debian bookworm's 3.11, python:3.12-slim).

Protocol: JSON lines over a persistent channel (stdin/stdout, or with ``--connect PATH`` a
unix socket the host listens on). On start it
writes ``{"ready": true, ...}``; then for each ``{"id": ..., "job": {...}}`` line it writes
``{"id": ..., "result": {...}}`` (the public result format, see docs/sandbox.md), and for
``{"id": ..., "ping": true}`` it writes ``{"id": ..., "pong": true}``. End of input ends it.

The executor process is the *harness*: untrusted code only ever runs in forked children.
Each test gets a fresh child (new process group, rlimits on CPU time, address space, file
size and open files, stdio on pipes) and its verdict is decided here, in the parent:

* ``script``: passes only if the child's harness code reports, on a private pipe and with
  a per-test nonce, that the test code completed; an exit status of 0 proves nothing, so
  ``sys.exit(0)``/``os._exit(0)``/``SystemExit`` before the end and printed markers fail.
  The test code is compiled here with guarded comparisons (see ``compile_test_code``), so
  an object of the program's making that claims to equal everything does not pass.
* ``io``: the child's stdout is compared here with the expected output.
* ``call``: the child serialises the return value to plain data with exact type checks
  (no subclasses, so no rigged ``__eq__``); the comparison happens here.

Other languages (``runners.py`` next to this file: JavaScript, C++) are built once per
job by their runner (the compiler runs under its own limits, a failure is a
``compile_error``), and each test's child execs the runner's command instead of running
Python: their in-process harness (``harness/``) reports on the same private pipe, with the
same nonce, and the verdict is decided here in the same way.

After every test the whole process group is killed, and any leftover descendant (the
executor is a child subreaper, or PID 1 of its container) is killed and reaped, so nothing
started by one test survives into the next. The work directory is wiped after each job.
"""

from __future__ import annotations

# Besides what the harness needs, a few light modules that programs commonly import are
# loaded once here, in the warm parent, so forked children get them for free (bisect,
# collections, functools, heapq, itertools, re, string, typing). Nothing heavy.
import ast
import bisect  # noqa: F401
import collections  # noqa: F401
import fcntl
import functools  # noqa: F401
import gc
import heapq  # noqa: F401
import itertools  # noqa: F401
import json
import math
import os
import re  # noqa: F401
import resource
import select
import shutil
import signal
import stat
import string  # noqa: F401
import sys
import time
import traceback
import typing  # noqa: F401


def _load_runners():
    """The language runners: ``runners.py`` next to this file (also when run with -I)."""
    if __package__:
        from grpo_code.sandbox import runners

        return runners
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runners.py")
    spec = importlib.util.spec_from_file_location("grpo_code_runners", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


RUNNER_MODULE = _load_runners()
RUNNERS = RUNNER_MODULE.RUNNERS
PROTOCOL = 1
REPORT_FD = 3
MIB = 1024 * 1024
VERDICTS = ("pass", "fail", "timeout", "memory", "runtime_error", "compile_error")
EXIT_MEMORY = 86  # the child's own exit code when even reporting a MemoryError failed
EXIT_HARNESS = 87  # the child's harness itself crashed

# The child's harness code uses these references, taken before any program runs, so a
# program that rebinds builtins.compile, json.dumps or os.write cannot steer the report.
_type = type
_dict_items = dict.items
_isfinite = math.isfinite
_compile = compile
_exec = exec
_dumps = json.dumps
_write = os.write
_exit = os._exit


# --------------------------------------------------------------------------- hardening


_LIBC_PRCTL = []


def _prctl(option: int, value: int) -> bool:
    """prctl(2) through ctypes (loaded once, in the parent, so children pay nothing)."""
    try:
        if not _LIBC_PRCTL:
            import ctypes

            _LIBC_PRCTL.append(ctypes.CDLL(None, use_errno=True).prctl)
        return _LIBC_PRCTL[0](option, value, 0, 0, 0) == 0
    except Exception:
        return False


PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


def _harden_parent() -> dict:
    """Keep children from reading the parent's memory or fds, and adopt their orphans."""
    return {
        # Non-dumpable: a same-uid child cannot ptrace us or open /proc/<ppid>/{mem,fd/*}.
        "nondumpable": _prctl(PR_SET_DUMPABLE, 0),
        "subreaper": os.getpid() == 1 or _prctl(PR_SET_CHILD_SUBREAPER, 1),
    }


# --------------------------------------------------------------------------- comparison (harness side)


def _float_or_none(token: str):
    try:
        value = float(token)
    except ValueError:
        return None
    return value


def compare_output(actual: str, expected: str, mode: str = "lines", float_tol=None) -> bool:
    """Compare program output with the expected output (``exact``, ``lines`` or ``tokens``)."""
    if mode == "exact":
        return actual == expected
    if mode == "lines":
        a = [line.rstrip() for line in actual.splitlines()]
        e = [line.rstrip() for line in expected.splitlines()]
        while a and not a[-1]:
            a.pop()
        while e and not e[-1]:
            e.pop()
        return a == e
    if mode == "tokens":
        a, e = actual.split(), expected.split()
        if len(a) != len(e):
            return False
        for x, y in zip(a, e):
            if x == y:
                continue
            if float_tol is None:
                return False
            fx, fy = _float_or_none(x), _float_or_none(y)
            if fx is None or fy is None or not _floats_close(fx, fy, float_tol):
                return False
        return True
    raise ValueError(f"unknown compare mode {mode!r}")


def _floats_close(a: float, b: float, tol: float) -> bool:
    if a == b or (a != a and b != b):
        return True
    return abs(a - b) <= tol or abs(a - b) <= tol * max(abs(a), abs(b))


def plain_equal(actual, expected, float_tol=None) -> bool:
    """Strict equality of JSON-like plain data (bool is not int; int and float compare by value)."""
    ta, te = _type(actual), _type(expected)
    if ta is bool or te is bool:
        return ta is te and actual == expected
    if ta in (int, float) and te in (int, float):
        if ta is int and te is int:
            return actual == expected
        if float_tol is None:
            return (
                actual == expected
                or (actual != actual and expected != expected)
                or (
                    _isfinite(actual)
                    and _isfinite(expected)
                    and math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-12)
                )
            )
        return _floats_close(float(actual), float(expected), float_tol)
    if ta is not te:
        return False
    if ta is list:
        return len(actual) == len(expected) and all(
            plain_equal(a, e, float_tol) for a, e in zip(actual, expected)
        )
    if ta is dict:
        return actual.keys() == expected.keys() and all(
            plain_equal(actual[k], expected[k], float_tol) for k in actual
        )
    return actual == expected  # str, None


# --------------------------------------------------------------------------- guarded comparisons

# In a script test the asserts run inside the untrusted process, so `assert f(x) == 3` can
# be won by returning an object whose __eq__ always says True. The harness compiles the
# (trusted) test code itself, rewriting every single comparison `a OP b` into
# `__grpo_compare__(a, "OP", b)`: when exactly one side holds an object of a class defined
# by the program that implements comparison or containment, and the other side is plain
# builtin data, the comparison is False. Comparisons between two program-defined objects,
# or plain values, behave as usual.

_COMPARE_OPS = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.In: "in", ast.NotIn: "not in",
}  # fmt: skip
_RIGGABLE = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__contains__", "__bool__")
_CONTAINERS = (list, tuple, set, frozenset, dict)
_TEST_CODE_CACHE: dict = {}


def _guard_comparisons(tree):
    """Rewrite single comparisons in place (faster than an ast.NodeTransformer)."""
    for node in ast.walk(tree):
        if _type(node) is ast.Compare and len(node.ops) == 1 and _type(node.ops[0]) in _COMPARE_OPS:
            loc = {k: getattr(node, k) for k in ("lineno", "col_offset", "end_lineno", "end_col_offset")}
            left, op, right = node.left, _COMPARE_OPS[_type(node.ops[0])], node.comparators[0]
            node.__class__ = ast.Call
            del node.left, node.ops, node.comparators
            node.func = ast.Name(id="__grpo_compare__", ctx=ast.Load(), **loc)
            node.args = [left, ast.Constant(op, **loc), right]
            node.keywords = []
    return tree


def compile_test_code(source: str):
    """Compile trusted test code with guarded comparisons; returns a code object or an error string."""
    cached = _TEST_CODE_CACHE.get(source)
    if cached is not None:
        return cached
    try:
        code = compile(_guard_comparisons(ast.parse(source, "test.py")), "test.py", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        code = f"the test code does not compile: {type(exc).__name__}: {exc}"
    if len(_TEST_CODE_CACHE) > 512:
        _TEST_CODE_CACHE.clear()
    _TEST_CODE_CACHE[source] = code
    return code


def _rigged_type(t) -> bool:
    for cls in _type.__dict__["__mro__"].__get__(t):
        if _type.__dict__["__module__"].__get__(cls) == "__main__":
            namespace = _type.__dict__["__dict__"].__get__(cls)
            for name in _RIGGABLE:
                if name in namespace:
                    return True
    return False


def _holds_rigged(value, budget: list) -> bool:
    """True if ``value`` is, or (through builtin containers) holds, a program-defined comparable."""
    budget[0] -= 1
    if budget[0] < 0:
        return False
    t = _type(value)
    if t in _CONTAINERS:
        items = dict.items(value) if t is dict else value
        for item in items:
            if _holds_rigged(item, budget):
                return True
        return False
    return _rigged_type(t)


def _compare(a, op: str, b):
    if _holds_rigged(a, [10000]) != _holds_rigged(b, [10000]):
        return False
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    if op == ">=":
        return a >= b
    if op == "in":
        return a in b
    return a not in b


# --------------------------------------------------------------------------- child side


class NotPlain(Exception):
    pass


def to_plain(value, depth: int = 0, budget: list | None = None):
    """Serialise a returned value to plain data; anything but exact builtin types is refused."""
    if budget is None:
        budget = [100000]
    budget[0] -= 1
    if budget[0] < 0 or depth > 100:
        raise NotPlain("value too large or too deeply nested")
    t = _type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        return value
    if t is list:
        return [to_plain(v, depth + 1, budget) for v in list.__iter__(value)]
    if t is tuple:
        return [to_plain(v, depth + 1, budget) for v in tuple.__iter__(value)]
    if t is dict:
        out = {}
        for k, v in _dict_items(value):
            if _type(k) is not str:
                raise NotPlain(f"dict key of type {_type(k).__name__} (only str keys are plain data)")
            out[k] = to_plain(v, depth + 1, budget)
        return out
    raise NotPlain(f"returned a {t.__module__}.{t.__qualname__}, which is not plain data")


def _child_main(job: dict, test: dict, nonce: str, stdio: tuple, fd_ceiling: int, test_code) -> None:
    """Runs in the forked child: set limits, run the program and one test, report. Never returns."""
    code = EXIT_HARNESS
    try:
        _prctl(PR_SET_DUMPABLE, 1)
        os.setpgid(0, 0)
        limits = job["limits"]
        timeout = float(limits["timeout_s"])
        cpu = int(math.ceil(timeout)) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        fsize = int(limits.get("file_size_mb", 16)) * MIB
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        stdin_fd, out_w, err_w, rep_w = stdio
        os.dup2(stdin_fd, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.dup2(rep_w, REPORT_FD)
        # Close everything else the parent had open (its channel above all): the parent
        # passes the highest fd it may hold, so this is one close_range(2).
        os.closerange(REPORT_FD + 1, fd_ceiling)
        nofile = int(limits.get("nofile", 64))
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        mem = int(limits["memory_mb"]) * MIB
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        code = _run_test(job, test, nonce, test_code)
    except MemoryError:
        code = EXIT_MEMORY
    except BaseException:
        pass
    _exit(code)


def _report(nonce: str, payload: dict) -> None:
    data = (_dumps({"nonce": nonce, **payload}) + "\n").encode()
    while data:
        data = data[_write(REPORT_FD, data) :]


def _tail(limit: int = 2000) -> str:
    """The current exception's traceback without the harness's own frames."""
    etype, value, tb = sys.exc_info()
    here = os.path.abspath(__file__)
    frames = [f for f in traceback.extract_tb(tb) if os.path.abspath(f.filename) != here]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames)]
    lines += traceback.format_exception_only(etype, value)
    return "".join(lines)[-limit:]


def _run_test(job: dict, test: dict, nonce: str, test_code) -> int:
    import io
    import types

    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=False)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
    sys.argv = ["main.py"]
    module = types.ModuleType("__main__")
    module.__file__ = "main.py"
    sys.modules["__main__"] = module
    kind = test["kind"]

    def flush() -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass

    def done(payload: dict, code: int = 0) -> int:
        flush()
        _report(nonce, payload)
        return code

    try:
        program = _compile(job["program"], "main.py", "exec")
    except MemoryError:
        return done({"event": "memory"})
    except BaseException as exc:
        return done({"event": "compile_error", "message": f"{type(exc).__name__}: {exc}"[:2000]})

    try:
        _exec(program, module.__dict__)
        if kind == "io":
            return done({"event": "completed"})
        if kind == "script":
            if _type(test_code) is str:
                return done({"event": "runtime_error", "message": test_code})
            module.__dict__["__grpo_compare__"] = _compare  # set after the program ran
            _exec(test_code, module.__dict__)
            return done({"event": "completed"})
        fn = module.__dict__.get(test["fn"])
        if fn is None:
            return done({"event": "runtime_error", "message": f"function {test['fn']!r} is not defined"})
        value = fn(*test.get("args", []), **test.get("kwargs", {}))
        try:
            plain = to_plain(value)
        except NotPlain as exc:
            return done({"event": "not_plain", "message": str(exc)})
        return done({"event": "returned", "value": plain})
    except SystemExit as exc:
        status = exc.code
        if kind == "io" and (status is None or status == 0):
            return done({"event": "completed"})
        return done(
            {"event": "system_exit", "message": f"SystemExit({status!r}) raised before the test completed"}, 1
        )
    except MemoryError:
        return done({"event": "memory"}, EXIT_MEMORY)
    except RecursionError:
        return done({"event": "runtime_error", "message": _tail()}, 1)
    except AssertionError:
        return done({"event": "assertion", "message": _tail()}, 1)
    except BaseException:
        return done({"event": "runtime_error", "message": _tail()}, 1)


# --------------------------------------------------------------------------- parent side


def _kill_leftovers(pgid: int) -> None:
    """Kill the test's process group and every other descendant, and reap them all."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
    if os.getpid() == 1:
        # PID 1 of the container: kill(-1) reaches every other process in the namespace.
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
    for _ in range(1000):
        children = _children()
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        reaped = _reap()
        if not children and not reaped:
            break
        if children and not reaped:
            time.sleep(0.001)


def _children() -> list[int]:
    pid = os.getpid()
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _reap() -> int:
    n = 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return n
        if pid == 0:
            return n
        n += 1


def _decode(data: bytes, limit: int) -> str:
    text = data[:limit].decode("utf-8", "replace")
    if len(data) > limit:
        text += f"\n[... output truncated at {limit} bytes]"
    return text


def _memfd(name: str, data: bytes) -> int:
    """A memory file holding ``data``, positioned at its start (stdin, a harness payload)."""
    fd = os.memfd_create(name, 0)
    while data:
        data = data[os.write(fd, data) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _spawn(child, stdin_fd: int, timeout: float, caps: tuple[int, int]) -> dict:
    """Fork ``child(stdio, fd_ceiling)`` (it never returns) with stdin, stdout, stderr and a
    report pipe; watch it under a wall-clock deadline, then kill its process group and every
    leftover descendant. Returns what the harness needs to decide a verdict."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    rep_r, rep_w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        os.close(err_r)
        os.close(rep_r)
        child((stdin_fd, out_w, err_w, rep_w), max(1024, rep_w + 64))
    for fd in (stdin_fd, out_w, err_w, rep_w):
        os.close(fd)
    try:
        os.setpgid(pid, pid)  # also done in the child; whichever runs first wins the race
    except OSError:
        pass
    deadline = start + timeout
    bufs = {out_r: bytearray(), err_r: bytearray(), rep_r: bytearray()}
    caps_by_fd = {out_r: caps[0], err_r: caps[1], rep_r: 4 * MIB}
    seen = {out_r: 0, err_r: 0, rep_r: 0}
    poller = select.poll()
    for fd in bufs:
        poller.register(fd, select.POLLIN)
    try:
        pidfd = os.pidfd_open(pid)
        poller.register(pidfd, select.POLLIN)
    except (AttributeError, OSError):
        pidfd = None
    open_fds = set(bufs)
    status = rusage = None
    timed_out = exited = False
    while not exited:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        # Without a pidfd, wake up now and then to notice a child that exited while a
        # leftover grandchild still holds its pipes open.
        wait_s = remaining if pidfd is not None else min(remaining, 0.02 if open_fds else 0.002)
        for fd, _ in poller.poll(max(wait_s * 1000, 0.5)):
            if fd == pidfd:
                exited = True
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                poller.unregister(fd)
                open_fds.discard(fd)
                continue
            seen[fd] += len(chunk)
            room = caps_by_fd[fd] + 1 - len(bufs[fd])
            if room > 0:
                bufs[fd] += chunk[:room]
        if pidfd is None and not exited:
            got, st, ru = os.wait4(pid, os.WNOHANG)
            if got:
                status, rusage, exited = st, ru, True
    if timed_out:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if status is None:
        try:
            _, status, rusage = os.wait4(pid, 0)
        except ChildProcessError:
            status = None
    if pidfd is not None:
        os.close(pidfd)
    # drain what is already buffered in the pipes, without waiting for lingering writers
    for fd in list(open_fds):
        try:
            os.set_blocking(fd, False)
            for _ in range(256):  # bounded: a leftover writer may still be producing output
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                seen[fd] += len(chunk)
                room = caps_by_fd[fd] + 1 - len(bufs[fd])
                if room > 0:
                    bufs[fd] += chunk[:room]
        except (BlockingIOError, OSError):
            pass
    _kill_leftovers(pid)
    for fd in bufs:
        os.close(fd)
    stdout = bytes(bufs[out_r])
    return {
        "status": status,
        "timed_out": timed_out,
        "duration_ms": (time.monotonic() - start) * 1000,
        "cpu_s": rusage.ru_utime + rusage.ru_stime if rusage is not None else 0.0,
        "stdout": stdout,
        "stderr": bytes(bufs[err_r]),
        "report": bytes(bufs[rep_r]),
        "stdout_truncated": seen[out_r] > len(stdout),
    }


def run_test(job: dict, test: dict, nonce: str | None = None, launch=None, runner=None) -> dict:
    """Fork a child for one test, watch it with a wall-clock deadline and decide its verdict.

    Python tests run in the forked executor itself; for other languages ``launch`` (from
    the job's runner) is the process the child execs."""
    limits = job["limits"]
    timeout = float(limits["timeout_s"])
    out_limit = int(limits.get("max_output_bytes", 65536))
    keep = out_limit
    if test["kind"] == "io":
        keep = max(out_limit, 2 * len(test.get("stdout", "").encode()) + 4096)
    nonce = nonce or os.urandom(16).hex()
    if test["kind"] == "io" and test.get("stdin"):
        stdin_fd = _memfd("stdin", test["stdin"].encode())
    else:
        stdin_fd = os.open(os.devnull, os.O_RDONLY)
    if launch is None:
        test_code = compile_test_code(test["code"]) if test["kind"] == "script" else None

        def child(stdio, ceiling):
            _child_main(job, test, nonce, stdio, ceiling, test_code)

    else:
        payload_fd = _memfd("job", launch.payload) if launch.payload else None

        def child(stdio, ceiling):
            _exec_child(limits, launch, stdio, payload_fd, ceiling)

    try:
        seen = _spawn(child, stdin_fd, timeout, (keep, out_limit))
    finally:
        if launch is not None and payload_fd is not None:
            os.close(payload_fd)
    verdict, message = _decide(
        test,
        nonce,
        seen["status"],
        seen["timed_out"],
        seen["stdout"],
        seen["report"],
        seen["stdout_truncated"],
        seen["cpu_s"] >= timeout,
        runner.classify if runner is not None else None,
        seen["stderr"],
    )
    return {
        "verdict": verdict,
        "duration_ms": round(seen["duration_ms"], 3),
        "stdout": _decode(seen["stdout"], out_limit),
        "stderr": _decode(seen["stderr"], out_limit),
        "message": message,
    }


# --------------------------------------------------------------------------- other languages

_EXEC_ENV: dict = {}


def _exec_env() -> dict:
    if not _EXEC_ENV:
        _EXEC_ENV.update(
            PATH=os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin",
            HOME=os.getcwd(),
            TMPDIR=os.getcwd(),
            LANG="C.UTF-8",
            LC_ALL="C.UTF-8",
        )
    return dict(_EXEC_ENV, HOME=os.getcwd(), TMPDIR=os.getcwd())


def _exec_child(limits: dict, launch, stdio: tuple, payload_fd, fd_ceiling: int, cpu_s=None) -> None:
    """Runs in the forked child: limits, fds 0-4 (stdio, report pipe, payload), exec. Never returns."""
    code = EXIT_HARNESS
    try:
        os.setpgid(0, 0)
        if cpu_s is None:
            cpu_s = int(math.ceil(float(limits["timeout_s"]))) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        fsize = int(limits.get("file_size_mb", 16)) * MIB
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        executable = launch.executable
        # Move every source above the targets first, so no dup2 overwrites a source.
        sources = [*stdio, payload_fd, executable if _type(executable) is int else None, launch.aux_fd]
        high = [None if fd is None else fcntl.fcntl(fd, fcntl.F_DUPFD, 256) for fd in sources]
        for target, fd in enumerate(high):
            if fd is not None:
                os.dup2(fd, target)
            elif target > REPORT_FD:
                try:
                    os.close(target)
                except OSError:
                    pass
        if _type(executable) is int:
            executable = 5
            os.set_inheritable(5, False)
        os.closerange(len(sources), fd_ceiling)
        nofile = int(limits.get("nofile", 64))
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        mem = int(launch.memory_mb) * MIB
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        os.execve(executable, launch.argv, _exec_env())
    except BaseException:
        pass
    _exit(code)


def compile_program(job: dict, argv: list[str], output: str, memory_mb=None) -> int | str:
    """Run a compiler under the compile limits; returns the built file as a sealed memory
    file (so no test can rewrite it for the next one) or the compiler's message."""
    limits = job["limits"]
    timeout = float(limits.get("compile_timeout_s", 10.0))
    memory = int(memory_mb or limits.get("compile_memory_mb", 1024))
    compiler = shutil.which(argv[0]) or argv[0]
    launch = RUNNER_MODULE.Launch(argv, compiler, b"", memory)
    cpu = int(math.ceil(timeout)) + 1

    def child(stdio, ceiling):
        _exec_child(limits, launch, stdio, None, ceiling, cpu)

    seen = _spawn(child, os.open(os.devnull, os.O_RDONLY), timeout, (16384, 65536))
    status = seen["status"]
    signum = os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else None
    code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None
    output_text = (seen["stderr"] + seen["stdout"]).decode("utf-8", "replace").strip()
    if len(output_text) > 4000:
        output_text = output_text[:4000] + "\n[... compiler output truncated]"
    if seen["timed_out"] or signum == signal.SIGXCPU or (signum == signal.SIGKILL and seen["cpu_s"] >= timeout):
        return f"the compiler did not finish within the compile time limit ({timeout:g} s)"
    if signum == signal.SIGKILL:
        return f"the compiler was killed (out of memory? compile memory limit {memory} MiB)"
    if signum == signal.SIGXFSZ:
        return "the compiler's output exceeded the file-size limit"
    if signum is not None or code != 0:
        return output_text or f"the compiler failed (status {code}, signal {signum})"
    try:
        with open(output, "rb") as f:
            data = f.read()
    except OSError as exc:
        return f"the compiler wrote no executable ({exc.strerror})"
    fd = os.memfd_create(output, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    while data:
        data = data[os.write(fd, data) :]
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return fd


def _run_with_runner(runner, job: dict) -> list[dict]:
    """A job of a language with its own runner: build once, then one process per test."""
    missing = runner.missing_tools()
    if missing:
        raise RuntimeError(
            f"the {runner.language} runner needs {', '.join(missing)} on PATH in the sandbox "
            f"(build the image with `grpo-code sandbox build --lang {runner.language}`)"
        )
    state = runner.prepare(
        job, os.getcwd(), lambda argv, output, memory_mb=None: compile_program(job, argv, output, memory_mb)
    )
    results = []
    try:
        for index, test in enumerate(job["tests"]):
            nonce = os.urandom(16).hex()
            launch = runner.launch(job, state, index, nonce)
            if _type(launch) is str:
                results.append(
                    {"verdict": "compile_error", "duration_ms": 0.0, "stdout": "", "stderr": "", "message": launch}
                )
                continue
            results.append(run_test(job, test, nonce, launch, runner))
    finally:
        runner.release(state)
    return results


def _parse_report(raw: bytes, nonce: str):
    lines = [line for line in raw.split(b"\n") if line.strip()]
    reports = []
    for line in lines:
        try:
            msg = json.loads(line)
        except ValueError:
            return None, "unreadable report on the harness channel"
        if not isinstance(msg, dict) or msg.get("nonce") != nonce:
            return None, "forged report on the harness channel"
        reports.append(msg)
    if len(reports) > 1:
        return None, "more than one report on the harness channel"
    return (reports[0] if reports else None), None


def _decide(test, nonce, status, timed_out, stdout, raw_report, truncated, cpu_exceeded, classify=None, stderr=b""):
    kind = test["kind"]
    if timed_out:
        # A runtime that already reported running out of memory (and was still dying
        # when the deadline came) gets the memory verdict.
        known = classify(None, None, stderr) if classify is not None else None
        if known is not None and known[0] == "memory":
            return known
        return "timeout", "wall-clock limit exceeded; the process group was killed"
    signum = os.WTERMSIG(status) if status is not None and os.WIFSIGNALED(status) else None
    code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None
    if signum == signal.SIGXCPU or (signum == signal.SIGKILL and cpu_exceeded):
        return "timeout", "CPU-time limit exceeded"
    if signum == signal.SIGKILL:
        return "memory", "killed by SIGKILL (out of memory, or the program killed itself)"
    if signum == signal.SIGXFSZ:
        return "runtime_error", "file-size limit exceeded"
    report, problem = _parse_report(raw_report, nonce)
    if problem:
        return "fail", problem
    if code == EXIT_MEMORY and (report is None or report.get("event") == "memory"):
        return "memory", "MemoryError (memory limit reached)"
    if report is None:
        if classify is not None and (signum is not None or code != 0):
            known = classify(signum, code, stderr)
            if known is not None:
                return known
        if signum is not None:
            return "runtime_error", f"killed by signal {signal.Signals(signum).name}"
        if kind == "io" and code == 0:
            return _judge_io(test, stdout, truncated)
        if code == 0:
            return "fail", "the process exited with status 0 before the harness saw the test complete"
        return "runtime_error", f"exited with status {code} before the test completed"
    event = report.get("event")
    message = str(report.get("message") or "")
    if event == "memory":
        return "memory", "MemoryError (memory limit reached)"
    if event == "compile_error":
        return "compile_error", message
    if event in ("assertion", "system_exit", "not_plain"):
        return "fail", message
    if event == "runtime_error":
        return "runtime_error", message
    if signum is not None or code != 0:
        return (
            "runtime_error",
            f"the process ended abnormally after the test (status {code}, signal {signum})",
        )
    if event == "completed" and kind == "script":
        return "pass", ""
    if event == "completed" and kind == "io":
        return _judge_io(test, stdout, truncated)
    if event == "returned" and kind == "call":
        if plain_equal(report.get("value"), test.get("expected"), test.get("float_tol")):
            return "pass", ""
        got = json.dumps(report.get("value"))[:300]
        return "fail", f"returned {got}, expected {json.dumps(test.get('expected'))[:300]}"
    return "fail", f"unexpected report {event!r} for a {kind} test"


def _judge_io(test: dict, stdout: bytes, truncated: bool):
    if truncated:
        return "fail", "output longer than the expected output (truncated)"
    actual = stdout.decode("utf-8", "replace")
    if compare_output(actual, test.get("stdout", ""), test.get("compare", "lines"), test.get("float_tol")):
        return "pass", ""
    return "fail", f"output differs from the expected output ({test.get('compare', 'lines')} comparison)"


# --------------------------------------------------------------------------- job loop


def _wipe(path: str) -> None:
    """Empty a directory, including entries a test made unreadable (chmod 000), without
    following symlinks and without recursion (a test may nest directories very deep)."""
    try:
        stack = [os.path.join(path, name) for name in os.listdir(path)]
    except OSError:
        return
    dirs = []
    while stack:
        p = stack.pop()
        try:
            mode = os.lstat(p).st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode):
            try:
                os.chmod(p, stat.S_IRWXU)
            except OSError:
                pass
            dirs.append(p)
            try:
                stack.extend(os.path.join(p, name) for name in os.listdir(p))
            except OSError:
                pass
        else:
            try:
                os.unlink(p)
            except OSError:
                pass
    for d in reversed(dirs):  # children were found after their parents
        try:
            os.rmdir(d)
        except OSError:
            pass


def run_job(job: dict, workdir: str, scratch: list[str]) -> dict:
    """Run every test of a job in the (wiped) work directory and build the result."""
    start = time.monotonic()
    language = job.get("language", "python")
    runner = RUNNERS.get(language)
    if runner is None:
        raise ValueError(f"no runner for language {language!r} in this sandbox (known: {', '.join(RUNNERS)})")
    os.chdir(workdir)
    tests = []
    try:
        if runner.in_process:
            for test in job["tests"]:
                tests.append(run_test(job, test))
        else:
            tests = _run_with_runner(runner, job)
    finally:
        os.chdir("/")
        for path in [workdir, *scratch]:
            _wipe(path)
    passed = sum(1 for t in tests if t["verdict"] == "pass")
    return {
        "status": "pass" if tests and passed == len(tests) else "fail",
        "passed": passed,
        "total": len(tests),
        "tests": tests,
        "duration_ms": round((time.monotonic() - start) * 1000, 3),
        "error": None,
    }


def _connect(path: str, timeout_s: float = 20.0) -> int:
    """Connect to the host's unix socket (bind-mounted into the container); returns the fd."""
    import socket

    deadline = time.monotonic() + timeout_s
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock.detach()
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def main(argv: list[str]) -> int:
    workdir = "/tmp"
    scratch: list[str] = []
    remove_workdir = False
    connect = None
    args = list(argv)
    while args:
        flag = args.pop(0)
        if flag == "--workdir":
            workdir = args.pop(0)
        elif flag == "--scratch":
            scratch.append(args.pop(0))
        elif flag == "--remove-workdir":
            remove_workdir = True
        elif flag == "--connect":
            connect = args.pop(0)
    if connect:
        chan_in = chan_out = _connect(connect)
    else:
        chan_in = os.dup(0)
        chan_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    hardening = _harden_parent()
    os.makedirs(workdir, exist_ok=True)
    # Objects alive now are never collected: moving them out of the GC's sight keeps a
    # child's collections from touching (and copying) the parent's pages.
    gc.collect()
    gc.freeze()
    reader = os.fdopen(chan_in, "rb", buffering=1 << 16)

    def send(msg: dict) -> None:
        data = (json.dumps(msg) + "\n").encode()
        while data:
            data = data[os.write(chan_out, data) :]

    send(
        {
            "ready": True,
            "protocol": PROTOCOL,
            "python": sys.version.split()[0],
            "pid": os.getpid(),
            **hardening,
        }
    )
    for line in reader:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            send({"id": None, "error": "unreadable message"})
            continue
        mid = msg.get("id")
        if msg.get("ping"):
            send({"id": mid, "pong": True})
            continue
        try:
            result = run_job(msg["job"], workdir, scratch)
            send({"id": mid, "result": result})
        except Exception:
            send({"id": mid, "error": "executor failure: " + traceback.format_exc()[-1500:]})
    if remove_workdir:
        _wipe(workdir)
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
