"""The runner of a language judged by its own toolchain, which most languages are: a build
(or a syntax check) once per job and binary, then a fresh process per test.

A language here is a subclass of :class:`Toolchain` that says three things:

* **its sources** for each test kind: ``io_files`` (the program alone, run with the
  test's stdin), ``script_files`` (the program with every script test and the language's
  test harness) and ``call_files`` (the program with the call harness and a table of the
  functions the tests call), each a ``{file name: text}``;
* **its build** (``build``): the compiler (or syntax checker) run through the executor's
  ``compile`` callback under the compile limits, returning what a test runs;
* **its command** (``command``): the argv of one test's process.

Everything else is shared: the payload on fd 4 (the test's nonce on the first line, then
one JSON object: ``{"test": i}`` for the i-th script test, ``{"fn": name, "args": [...]}``
for a call, never an expected value), the report on fd 3 (docs/languages.md, How a job
runs), the address-space limit with the runtime's headroom, and the crash signatures
(``failed_marks``: a failed assertion's text on stderr makes a non-zero exit ``fail``;
``memory_marks``: an allocation failure makes it ``memory``). What a test runs is sealed
in memory (an executable on fd 5, or a source on fd 6 for an interpreter), so no test can
rewrite what the next one runs.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

from .base import FULL, HARNESS_DIR, CompileFn, Launch, Runner, seal, write_alone

KINDS = ("io", "script", "call")


class Built:
    """What a build made for one test kind: an executable (a sealed fd, exec'd from fd 5) and
    files the process reads (a sealed fd, read as /proc/self/fd/6), or the compiler's message."""

    __slots__ = ("executable", "aux", "error")

    def __init__(self, executable: int | None = None, aux: int | None = None, error: str | None = None):
        self.executable = executable
        self.aux = aux
        self.error = error


class Toolchain(Runner):
    """Base of the languages judged by a toolchain (see the module's docstring)."""

    headroom_mb = 0
    """Address space the runtime needs on top of the test's ``memory_mb`` (a JVM's reserves)."""
    failed_marks: tuple[bytes, ...] = ()
    memory_marks: tuple[bytes, ...] = ()

    def io_files(self, program: str) -> dict[str, str]:
        raise NotImplementedError

    def script_files(self, program: str, codes: list[str]) -> dict[str, str]:
        raise NotImplementedError

    def call_files(self, program: str, fns: dict[str, int]) -> dict[str, str]:
        """``fns``: each function the tests call, with the number of arguments they give."""
        raise NotImplementedError

    def build(self, kind: str, files: dict[str, str], workdir: str, compile: CompileFn, memory_mb: int) -> Built:
        raise NotImplementedError

    def command(self, job: dict, kind: str, built: Built, memory_mb: int) -> tuple[list[str], str | int]:
        """(argv, executable) of one test's process."""
        return [f"./{kind}"], built.executable

    # ------------------------------------------------------------------ shared

    def prepare(self, job: dict, workdir: str, compile: CompileFn) -> Any:
        program = job["program"]
        memory = int(job["limits"]["memory_mb"]) + self.headroom_mb
        tests = job["tests"]
        codes = [t["code"] for t in tests if t["kind"] == "script"]
        fns: dict[str, int] = {}  # each function its tests call, with their number of arguments
        for t in tests:
            if t["kind"] == "call":
                fns.setdefault(t["fn"], len(t.get("args", [])))
        sources = {"io": lambda: self.io_files(program), "script": lambda: self.script_files(program, codes),
                   "call": lambda: self.call_files(program, fns)}
        state: dict[str, Any] = {"positions": {}}
        made: dict[tuple, Built] = {}  # kinds with the same sources share one build
        for kind in KINDS:
            if not any(t["kind"] == kind for t in tests):
                continue
            files = sources[kind]()
            key = tuple(sorted(files.items()))
            if key not in made:
                try:
                    write_alone(workdir, files)
                    made[key] = self.build(kind, files, workdir, compile, memory)
                except OSError as exc:  # a program so large its build does not fit (Go copies its cache in)
                    if exc.errno not in FULL:
                        raise
                    made[key] = Built(error=f"the program's build does not fit the work directory ({exc.strerror})")
            state[kind] = made[key]
        position = 0
        for i, test in enumerate(tests):
            if test["kind"] == "script":
                state["positions"][i] = position
                position += 1
        return state

    def launch(self, job: dict, state: Any, index: int, nonce: str) -> Launch | str:
        test = job["tests"][index]
        built: Built = state[test["kind"]]
        if built.error is not None:
            return built.error
        memory = int(job["limits"]["memory_mb"]) + self.headroom_mb
        argv, executable = self.command(job, test["kind"], built, memory)
        if test["kind"] == "io":
            return Launch(argv, executable, b"", memory, built.aux)
        payload = self.payload(nonce, self.what(job, state, index))
        return Launch(argv, executable, payload, memory, built.aux)

    def payload(self, nonce: str, what: dict[str, Any]) -> bytes:
        """What the test's process reads on fd 4: the nonce's line, then ``what`` as JSON."""
        return nonce.encode() + b"\n" + json.dumps(what, allow_nan=True).encode()

    def what(self, job: dict, state: Any, index: int) -> dict[str, Any]:
        """The JSON object of test ``index``'s payload."""
        test = job["tests"][index]
        if test["kind"] == "script":
            return {"test": state["positions"][index]}
        # only this call's arguments: never an expected value, never another test's input
        return {"fn": test["fn"], "args": test.get("args", [])}

    def classify(self, signum: int | None, code: int | None, stderr: bytes) -> tuple[str, str] | None:
        if any(mark in stderr for mark in self.memory_marks):
            return "memory", f"{self.language}: out of memory (memory limit reached)"
        if code not in (None, 0) and any(mark in stderr for mark in self.failed_marks):
            return "fail", stderr.decode("utf-8", "replace")[-2000:].strip()
        return None

    def release(self, state: Any) -> None:
        fds = {fd for built in (state.get(kind) for kind in KINDS) if built is not None
               for fd in (built.executable, built.aux)}
        for fd in fds:
            if isinstance(fd, int):
                try:
                    os.close(fd)
                except OSError:
                    pass


def compiled(result: int | str, aux: bool = False) -> Built:
    """A ``compile`` callback's answer as a :class:`Built`: the sealed file as the executable
    (or, with ``aux``, as the file an interpreter reads), or the message."""
    if isinstance(result, str):
        return Built(error=result)
    return Built(aux=result) if aux else Built(executable=result)


def env_argv(env: dict[str, str], argv: list[str]) -> list[str]:
    """``argv`` run with ``env`` added (the executor gives builds a fixed environment)."""
    return ["env", *(f"{k}={v}" for k, v in env.items()), *argv]


class Interpreted(Toolchain):
    """A language run by an interpreter: the program is one source file, syntax-checked once
    per job (``check``: the interpreter's own flag; its message is the ``compile_error``)
    and sealed; every test runs ``interpreter`` on it, an io test directly, a script or call
    test through ``harness/<harness>``, which loads the program from /proc/self/fd/6, takes
    the script test's code (``{"code": ...}``) or the call from the payload, and reports."""

    interpreter: tuple[str, ...] = ()
    check: tuple[str, ...] = ()
    """The syntax check's argv before the file's name (empty: none; the harness reports a
    program that does not load as ``compile_error``)."""
    harness = ""
    suffix = ""

    @property
    def tools(self) -> tuple[str, ...]:
        return (self.interpreter[0],)

    def io_files(self, program):
        return {f"main{self.suffix}": program}

    def script_files(self, program, codes):
        return self.io_files(program)

    def call_files(self, program, fns):
        return self.io_files(program)

    def build(self, kind, files, workdir, compile, memory_mb) -> Built:
        name, text = next(iter(files.items()))
        if self.check:
            return compiled(compile([*self.check, name], name, memory_mb), aux=True)
        return Built(aux=seal(text.encode("utf-8", "surrogatepass"), name))

    def command(self, job, kind, built, memory_mb):
        interpreter = shutil.which(self.interpreter[0]) or self.interpreter[0]
        argv = [interpreter, *self.interpreter[1:]]
        if kind != "io":
            argv.append(os.path.join(HARNESS_DIR, self.harness))
        return [*argv, "/proc/self/fd/6"], interpreter

    def what(self, job, state, index):
        test = job["tests"][index]
        if test["kind"] == "script":
            return {"code": test["code"]}
        return super().what(job, state, index)
