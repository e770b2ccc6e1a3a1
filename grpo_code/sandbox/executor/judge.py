"""The judge of a Python ``script`` test: trusted test code, run where the program cannot reach.

The judge is a fork of the executor (non-dumpable, so a process of the same user can
neither ptrace it nor open its ``/proc/<pid>/mem`` or fds) that lives as long as the
executor and serves one script test at a time (see :func:`judge_loop`). It runs the test code (a
HumanEval ``check(candidate)``, MBPP asserts) in a namespace built from the program's
*manifest*: the program's constants arrive as values, its modules are imported here by
name, and its functions and classes become :class:`ProgramObject` stand-ins that call
into the program's process over a socket carrying plain values only (``codec.py``).

So every comparison, ``isinstance`` and truth test of the test code runs on values this
process decoded itself: an object whose ``__eq__`` always says True never gets here (it
stays in the program's process and compares unequal to data), and the program never sees
what the test expects unless the test passes it as an argument.

Kept from the usual in-process semantics: names the tests take from the program
(helpers, constants, modules), tuples vs lists, sets, dicts with any keys, bytes,
complex, NaN/inf, big ints, ``isinstance`` on returned values, in-place changes the
program makes to list/dict/set/bytearray arguments, exceptions (a program's
``ValueError`` is a ``ValueError`` here), iteration of returned generators, and objects
of the program's classes (attributes, methods, ``len``, ``str``, equality between two of
them). Not kept: arithmetic or ordering on program objects with test values (that would
hand the program the expected value), identity of arguments across calls.

The judge reports one line on its control socket to the executor: ``completed``, ``assertion``,
``raised`` (the program raised and the test did not catch it), ``program_gone``,
``protocol`` (the program broke the channel), or ``error`` (the test code failed by
itself). Standard library only.
"""

from __future__ import annotations

import builtins
import importlib
import json
import os
import resource
import sys
import traceback

from . import codec, nodes, protocol, raised
from .judge_link import Link, ProgramGone, ProtocolViolation, _exception_line
from .pychild import EXIT_HARNESS, MIB, default_signals

_dumps = json.dumps
_type = type
_MISSING = object()


# Modules tests use without importing them (relying on the program's import): under these
# names the test always gets the real module, whatever the program bound to them.
_TEST_MODULES = frozenset(
    "math cmath re collections itertools functools heapq bisect string operator random copy sys os decimal "
    "fractions statistics datetime json array".split()
)
_NOT_IMPORTED = frozenset({"antigravity", "this", "idlelib", "turtledemo", "turtle", "tkinter", "pydoc", "webbrowser"})


def _module(name: str):
    """The judge's own copy of a standard-library module the program imported, or None.
    Only modules already loaded or in the standard library (never a ``__main__``), so a
    program cannot make the judge run import-time code of its choosing."""
    if name in sys.modules:
        return sys.modules[name]
    top = name.split(".")[0]
    if top not in getattr(sys, "stdlib_module_names", ()) or top in _NOT_IMPORTED or "__main__" in name:
        return None
    try:
        return importlib.import_module(name)
    except BaseException:
        return None


def _namespace(link: Link, manifest, entry_point=None) -> dict:
    """The test's globals: the program's names, except that builtins and standard modules
    stay the judge's own (a program's ``abs`` or ``math`` must not judge its answers),
    unless the name is the task's entry point (the function under test). Every name the
    program bound is also under ``__program__`` (a name no program can bind), for helpers
    that import from the program as a test module would (``from solution import sum``);
    ``__capture__(action)`` starts, reads or stops capturing what the program prints
    (``capsys``); ``__exception_classes__()`` gives the program's exception classes as classes
    of the judge's."""
    if _type(manifest) is not dict:
        raise ProtocolViolation("malformed manifest")
    program: dict = {}
    ns: dict = {"__name__": "__test__", "__builtins__": builtins, "__program__": program,
                "__capture__": lambda action: link.request({"op": "capture", "ref": 0, "action": action}),
                "__exception_classes__": lambda: _exception_classes(link)}
    for name, entry in manifest.items():
        if _type(name) is not str or _type(entry) is not dict or len(entry) != 1:
            raise ProtocolViolation("malformed manifest")
        if name.startswith("__"):
            continue
        (what, body), = entry.items()
        if what == "v":
            try:
                program[name] = codec.from_tree(body, link.handle)
            except (codec.CodecError, RecursionError) as exc:
                raise ProtocolViolation(str(exc)) from None
        elif what == "m" and _type(body) is str:
            module = _module(body)
            if module is not None:  # else the test cannot use it either
                program[name] = module
        else:
            raise ProtocolViolation("malformed manifest")
        if hasattr(builtins, name) and name != entry_point:
            continue
        if name in _TEST_MODULES:
            module = _module(name)
            if module is not None:
                ns[name] = module
                continue
        if name in program:
            ns[name] = program[name]
    return ns


def _exception_classes(link: Link) -> dict:
    """The program's exception classes by the names it bound them to, each as the judge's
    class for it (:func:`raised.program_class`), so a test's ``except`` can name them."""
    found = link.request({"op": "exceptions", "ref": 0})
    out = {}
    if _type(found) is not dict:
        raise ProtocolViolation("malformed exception classes")
    for name, entry in found.items():
        if (_type(name) is not str or _type(entry) is not list or len(entry) != 2 or _type(entry[0]) is not list
                or not all(_type(n) is str for n in entry[0]) or _type(entry[1]) is not str):
            raise ProtocolViolation("malformed exception classes")
        out[name] = raised.program_class(tuple(n[:200] for n in entry[0][:32]))
    return out


TEST_NAME, CHECKER_NAME, HELPERS_NAME = "<test>", "<checker>", "<helpers>"
"""The names the judge compiles suite code under: no file can be named so for
:mod:`linecache` (a name in angle brackets is never looked up on disk), so nothing the
program writes in its work directory is read while a report is built."""
_SOURCES: dict = {}
"""Source lines of the suite code compiled here, by name, for tracebacks."""


def _frame_lines(tb) -> list[str]:
    """The suite code's frames of a traceback, formatted from the source the judge holds
    (never from a file: the program writes the work directory)."""
    out = []
    for frame, lineno in traceback.walk_tb(tb):
        name = frame.f_code.co_filename
        if name not in _SOURCES:
            continue
        out.append(f'  File "{name}", line {lineno}, in {frame.f_code.co_name}\n')
        lines = _SOURCES[name]
        if lineno is not None and 0 < lineno <= len(lines):
            out.append(f"    {lines[lineno - 1].strip()[:300]}\n")
    return out


def _test_tail(exc: BaseException, limit: int = 2000) -> str:
    """The failing test's traceback, or a plain line when even that cannot be built (a
    program's object whose ``str`` raises, no memory left): building a report never fails."""
    try:
        lines = ["Traceback (most recent call last):\n", *_frame_lines(exc.__traceback__), _exception_line(exc)]
        return "".join(lines)[-limit:]
    except BaseException:
        return "the test failed (its traceback could not be built)"


def judge_loop(ctrl_fd: int) -> None:
    """The judge's life (a fork of the executor, serving one script test at a time on its
    control socket): each request carries the test code and, as descriptors, the socket to
    the program's process and the test's stdout and stderr; the answer is one report line.
    Never returns; the executor kills it at a test's deadline and forks a new one."""
    import socket

    code = EXIT_HARNESS
    try:
        os.setpgid(0, 0)
        # Out of the program's reach: nothing the judge does reads the work directory.
        os.chdir("/")
        os.dup2(os.open(os.devnull, os.O_RDWR), 0)
        os.closerange(3, ctrl_fd)
        os.closerange(ctrl_fd + 1, 4096)
        default_signals()
        ctrl = socket.socket(fileno=ctrl_fd)
        codec.NODE_CLASSES = nodes.CLASSES.__getitem__  # LeetCode's nodes arrive as the judge's own
        compiled: dict = {}
        while True:
            request, fds = protocol.recv_fds(ctrl, 3)
            if request is None:
                code = 0
                break
            ctrl.sendall((_dumps(_serve_one(request, fds, compiled)) + "\n").encode())
    except BaseException:
        pass
    os._exit(code)


def _compiled(source: str, compiled: dict, name: str):
    """Code objects of the suite's test and checker sources, kept across tests."""
    key = (name, source)
    if key not in compiled:
        if len(compiled) > 256:
            compiled.clear()
        try:
            compiled[key] = compile(source, name, "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            compiled[key] = f"the {name.strip('<>')} code does not compile: {type(exc).__name__}: {exc}"
    _SOURCES[name] = source.splitlines()
    return compiled[key]


def _check_one(request: dict, fds: list[int], compiled: dict) -> dict:
    """A checker (docs/sandbox.md, Checkers) on a finished test's input, expected answer and
    the program's answer, which arrive as codec trees in a memory file. The program's
    processes are gone; nothing here talks to them."""
    import marshal

    fd = fds[0]
    try:
        with os.fdopen(fd, "rb") as f:
            values = marshal.loads(f.read())
        if request.get("native"):  # a compiled C++ checker, in a process of its own
            from .native_check import check_native

            try:
                return check_native(values, fds[1], request["memory_mb"], request["cpu_s"])
            finally:
                os.close(fds[1])
        code = _compiled(request["code"], compiled, CHECKER_NAME)
        if _type(code) is str:
            return {"ok": False, "message": f"checker: {code}"}
        mem = max(int(request["memory_mb"]), 1024) * MIB
        resource.setrlimit(resource.RLIMIT_AS, (mem, resource.RLIM_INFINITY))
        try:
            ns = {"__name__": "checker", "__builtins__": builtins}
            exec(code, ns)
            check = ns.get("check")
            if not callable(check):
                return {"ok": False, "message": "checker: the code defines no check(input, expected, output)"}
            given = (codec.from_tree(values["input"], plain_objects=True),
                     codec.from_tree(values["expected"], plain_objects=True))
            try:
                output = codec.from_tree(values["output"], plain_objects=values["plain"] is True)
            except (codec.CodecError, RecursionError) as exc:
                return {"ok": False, "message": f"the returned value does not decode: {exc}"}
            answer = check(given[0], given[1], output)
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    except AssertionError as exc:
        return {"ok": False, "message": f"checker: {exc}" if str(exc) else "checker: wrong answer"}
    except BaseException as exc:
        return {"ok": False, "message": "checker raised " + "".join(
            traceback.format_exception_only(_type(exc), exc)).strip()[-1500:]}
    if _type(answer) is tuple and len(answer) == 2:
        ok, message = answer
        return {"ok": ok is True, "message": str(message)[:2000]}
    return {"ok": answer is True, "message": "" if answer is True else "checker: wrong answer"}


def _serve_one(request: dict, fds: list[int], compiled: dict) -> dict:
    """One test: stdout/stderr to the test's pipes, the address-space limit, the verdict."""
    if request.get("kind") == "checker":
        return _check_one(request, fds, compiled)
    if request.get("kind") == "interact":
        from .interact import interact_one  # here: the judge's loop imports it on the first interactive test

        return interact_one(request, fds, compiled)
    chan, out_w, err_w = fds
    code = _compiled(request["code"], compiled, TEST_NAME)
    before = resource.getrusage(resource.RUSAGE_SELF)
    os.dup2(out_w, 1)
    os.dup2(err_w, 2)
    mem = int(request["memory_mb"]) * MIB
    resource.setrlimit(resource.RLIMIT_AS, (mem, resource.RLIM_INFINITY))
    try:
        result = judge(code, Link(chan, int(request["max_bytes"])), request.get("entry_point"),
                       request.get("helpers"), compiled)
    except MemoryError:  # the test filled the address space, and the report needed a little more
        result = {"event": "memory", "message": "the judge ran out of memory (a value from the program too large?)"}
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        for fd in (devnull, *fds):
            os.close(fd)
    after = resource.getrusage(resource.RUSAGE_SELF)
    result["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return result


def judge(test_code, link: Link, entry_point=None, helpers=None, compiled=None) -> dict:
    """Run the test code against the program behind ``link``; the report as a dict.
    ``helpers``: the task's own definitions of names its prompt gives (docs/sandbox.md,
    Jobs), run after the program's names are bound, so the test calls the task's
    ``encode_cyclic`` or ``poly``, never the program's version of it."""
    try:
        first = link.receive()
        if _type(first) is not dict or "ready" not in first:
            raise ProtocolViolation("malformed greeting")
        ns = _namespace(link, first["ready"], entry_point)
    except MemoryError:
        return {"event": "memory", "message": "the judge ran out of memory reading the program's names"}
    except ProgramGone:
        return {"event": "program_gone"}
    except ProtocolViolation as exc:
        return {"event": "protocol", "message": str(exc)}
    except Exception as exc:  # whatever the program sent, it is its own failure
        return {"event": "protocol", "message": f"malformed names from the program ({_type(exc).__name__})"}
    if _type(test_code) is str:
        return {"event": "error", "message": test_code}
    helpers_code = _compiled(helpers, {} if compiled is None else compiled, HELPERS_NAME) if helpers else None
    if _type(helpers_code) is str:
        return {"event": "error", "message": helpers_code}
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    try:
        if helpers_code is not None:
            entry = ns.get(entry_point, _MISSING)
            exec(helpers_code, ns)
            if entry is not _MISSING:  # the function under test stays the program's
                ns[entry_point] = entry
        exec(test_code, ns)
        return {"event": "completed"}
    except ProgramGone:
        return {"event": "program_gone"}
    except ProtocolViolation as exc:
        return {"event": "protocol", "message": str(exc)}
    except raised.ProgramException as exc:
        base = getattr(_type(exc), "program_base", "Exception")
        message = exc.program_traceback or f"{exc.program_type}: {exc}"
        return {"event": "raised", "type": base, "message": message + "\n(raised by the program, called from)\n"
                + _test_tail(exc, 800)}
    except AssertionError as exc:
        return {"event": "assertion", "message": _test_tail(exc)}
    except MemoryError:
        return {"event": "memory", "message": "the judge ran out of memory (a value from the program too large?)"}
    except BaseException as exc:
        return {"event": "error", "message": _test_tail(exc)}
