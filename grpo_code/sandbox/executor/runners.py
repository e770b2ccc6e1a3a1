"""Language runners: how a job in one language becomes files, a build and one process per test.

Standard library only: this module is part of the executor package copied into every
sandbox image (``/opt/grpo-code/executor/runners.py``, with ``harness/``) and is also imported on the host, where
:data:`RUNNERS` is the list of supported languages. A runner answers, for its language:

* **files and build** (``prepare``): write the program (and for compiled languages the
  test code) into the work dir and build it *once per job*, through the executor's
  ``compile`` callback, which runs the compiler under the compile limits
  (``compile_timeout_s``, ``compile_memory_mb``) and returns a sealed executable or the
  compiler's message; a failed build is a ``compile_error`` for every test that needed it.
* **run** (``launch``): the command of one test's process, the payload its in-process
  harness reads on fd 4 (the per-test nonce, for script tests the test code), and the
  address-space limit. The executor forks, applies the limits and execs it (``native.py``);
  the harness reports on fd 3 with the per-test nonce, and the executor decides the verdict.
* **test kinds**: ``script`` (test code appended to the program, in its scope), ``io``
  (stdin/stdout compared by the executor), ``call`` when ``call_tests`` is true.
* **crash signatures** (``classify``): verdicts for a process that died without a report
  (a runtime's own out-of-memory abort is ``memory``, not ``runtime_error``).

Python is the special case (``in_process``): its tests run in forks of a warm interpreter
(the zygote, ``zygote.py``), which is what makes them cheap, and its script tests are
judged in a separate process (``judge.py``). Adding a language is one class here, one line in
:data:`RUNNERS` and one ``sandboxes/<language>/Dockerfile`` (docs/languages.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from typing import Any

from . import cpp_judged, js_judged, scripted
from .base import FULL, HARNESS_DIR, CompileFn, Launch, Runner, seal, write_alone
from .base import write as _write
from .go import GoRunner
from .java import JavaRunner
from .rust import RustRunner

# No dataclasses here: the executor imports this module into its warm parent, and every
# module it pulls in (dataclasses brings inspect) makes each fork of a Python test dearer.


class PythonRunner(Runner):
    """Python: each test's program runs in a fork of the zygote (``pychild.py``), a script
    test's code in a judge process (``judge.py``); nothing is built or executed from disk."""

    language = "python"
    in_process = True
    judged_scripts = True


# --------------------------------------------------------------------------- JavaScript


class JavaScriptRunner(Runner):
    """Node.js: ``harness/javascript.js`` runs the program and the test as two classic
    scripts in one global scope. There is no separate build: each test's harness parses the
    program first and reports a syntax error as ``compile_error``. Call tests are supported
    (the harness serialises the return value to plain data).

    Start-up is most of a test's cost, so each worker builds a V8 startup snapshot of
    node's bootstrap once per heap size (``--build-snapshot``, kept sealed in memory) and
    starts every test process from it: about 40% less CPU than a cold start of a node
    built without its own snapshot, as Debian's is. Where that fails (an older node), tests
    start cold; the verdicts are the same."""

    language = "javascript"
    tools = ("node",)
    judged_scripts = True
    HEADROOM_MB = 1024
    """V8 reserves ~750 MiB of address space at start-up: the heap is capped with
    --max-old-space-size=memory_mb and RLIMIT_AS gets this much on top."""

    def __init__(self) -> None:
        self._snapshots: dict[tuple[str, int], int | None] = {}
        self._unreadable: dict[str, int] = {}

    def _judge_node(self, node: str) -> int:
        """A sealed copy of ``node`` with mode 0111, run for the judge: the kernel makes a
        process that execs a file its user cannot read non-dumpable, so the program's
        process (same uid) cannot ptrace the judge or read its /proc/<pid>/mem."""
        if node not in self._unreadable:
            with open(os.path.realpath(node), "rb") as f:
                sealed = seal(f.read(), "node-judge")
            os.fchmod(sealed, 0o111)
            self._unreadable[node] = sealed
        return self._unreadable[node]

    def _snapshot(self, node: str, memory: int, compile: CompileFn) -> int | None:
        """The sealed snapshot blob for this heap size (the flags must match at use)."""
        key = (node, memory)
        if key not in self._snapshots:
            entry = os.path.join(HARNESS_DIR, "javascript_snapshot.js")
            argv = [node, f"--max-old-space-size={memory}", "--snapshot-blob", "node.blob", "--build-snapshot", entry]
            built = compile(argv, "node.blob", memory + self.HEADROOM_MB)
            self._snapshots[key] = built if isinstance(built, int) else None
        return self._snapshots[key]

    def prepare(self, job: dict, workdir: str, compile: CompileFn) -> Any:
        node = shutil.which("node") or "node"
        memory = int(job["limits"]["memory_mb"])
        return {
            "node": node,
            "harness": os.path.join(HARNESS_DIR, "javascript.js"),
            "judge": os.path.join(HARNESS_DIR, "javascript_judge.js"),
            "snapshot": self._snapshot(node, memory, compile),
        }

    def launch(self, job: dict, state: Any, index: int, nonce: str) -> Launch | str:
        test = job["tests"][index]
        memory = int(job["limits"]["memory_mb"])
        argv = [state["node"]]
        if state["snapshot"] is not None:
            argv += ["--snapshot-blob", "/proc/self/fd/6"]
        argv += [f"--max-old-space-size={memory}"]
        if test["kind"] == "script":
            # Judged: the program's process serves calls and holds no test; the judge
            # (harness/javascript_judge.js) holds the test, the helpers and the nonce.
            serve = {"kind": "serve", "program": job["program"], "names": js_judged.names(job, test["code"])}
            judge = {"nonce": nonce, "code": test["code"], "helpers": job.get("helpers") or "",
                     "max_bytes": JUDGE_ANSWER_LIMIT}
            return Launch(argv + [state["harness"]], state["node"], json.dumps(serve).encode(),
                          memory + self.HEADROOM_MB, state["snapshot"],
                          judge=Launch(argv + [state["judge"]], self._judge_node(state["node"]),
                                       json.dumps(judge).encode(), memory + self.HEADROOM_MB, state["snapshot"]))
        payload: dict[str, Any] = {"nonce": nonce, "kind": test["kind"], "program": job["program"]}
        if test["kind"] == "call":
            payload["fn"] = test["fn"]
            payload["args"] = test.get("args", [])
        return Launch(argv + [state["harness"]], state["node"], json.dumps(payload).encode(),
                      memory + self.HEADROOM_MB, state["snapshot"])

    def classify(self, signum: int | None, code: int | None, stderr: bytes) -> tuple[str, str] | None:
        if b"heap out of memory" in stderr or b"Fatal process out of memory" in stderr:
            return "memory", "JavaScript heap out of memory (memory limit reached)"
        return None


class TypeScriptRunner(JavaScriptRunner):
    """TypeScript: one ``tsc`` run per job type-checks the program with its script tests and
    emits JavaScript (a type error is a ``compile_error``, as MultiPL-E counts it); from then
    on a test is a JavaScript test of the emitted code (judged script tests, call and io
    tests as :class:`JavaScriptRunner` runs them). Each script test is compiled inside a
    namespace of its own, so tests that declare the same names (MultiPL-E's ``test()``) do
    not clash."""

    language = "typescript"
    tools = ("node", "tsc")
    TSC = ("--target", "es2020", "--lib", "es2020,dom", "--noEmitOnError", "--pretty", "false", "--outDir", "ts.out")

    def prepare(self, job: dict, workdir: str, compile: CompileFn) -> Any:
        sources = {"program.ts": job["program"]}
        for i, test in enumerate(job["tests"]):
            if test["kind"] == "script":
                sources[f"test_{i}.ts"] = f"namespace __grpo_t{i} {{\n{test['code']}\n}}\n"
        for name, text in sources.items():
            _write(workdir, name, text)
        built = compile(["tsc", *self.TSC, *sources], "ts.out/program.js", int(job["limits"]["memory_mb"]) + 1024)
        if isinstance(built, str):
            return {"error": built}
        os.close(built)  # read as written: tsc ran before any code of the job did
        emitted = {}
        for name in sources:
            with open(os.path.join(workdir, "ts.out", name[:-3] + ".js"), encoding="utf-8", errors="surrogateescape") as f:
                emitted[name] = f.read()
        tests = [dict(t, code=emitted[f"test_{i}.ts"]) if t["kind"] == "script" else t for i, t in enumerate(job["tests"])]
        js_job = dict(job, program=emitted["program.ts"], tests=tests, language="javascript")
        return {"job": js_job, "js": super().prepare(js_job, workdir, compile)}

    def launch(self, job: dict, state: Any, index: int, nonce: str) -> Launch | str:
        if "error" in state:
            return state["error"]
        return super().launch(state["job"], state["js"], index, nonce)


JUDGE_ANSWER_LIMIT = 64 * 1024 * 1024
"""The longest answer (one encoded value) a judge reads from the program's process; a
longer one breaks the channel, the program's ``fail``."""

# --------------------------------------------------------------------------- C++

_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*")
# Lower-case names that standard headers define as macros; #undef-ing them would break
# code that uses them (assert is re-included instead).
_STD_MACROS = frozenset(
    "assert errno offsetof setjmp alloca va_start va_end va_arg va_copy stdin stdout stderr "
    "main defined _Pragma".split()
)
# C++'s alternative operator spellings cannot be macro names.
_OPERATOR_WORDS = frozenset("and and_eq bitand bitor compl not not_eq or or_eq xor xor_eq".split())


def undefines(code: str) -> list[str]:
    """``#undef`` lines for the identifiers of trusted code, so the program's macros (say
    ``#define candidate(...) true``) cannot rewrite it. Upper-case names (INT_MAX, EOF),
    the macros above and the preprocessor's own ``__X__`` names are left alone."""
    names = sorted(set(_IDENTIFIER.findall(code)))
    keep = []
    for name in names:
        if name in _STD_MACROS or name in _OPERATOR_WORDS or name.isupper() or name.startswith(("__has_", "__VA_")):
            continue
        if name.startswith("__") and name.endswith("__"):
            continue
        keep.append(f"#undef {name}")
    return keep


def leading_directives(program: str) -> int:
    """Number of leading lines that are blank, comments or preprocessor directives."""
    lines = program.split("\n")
    in_comment = continued = False
    for i, line in enumerate(lines):
        text = line.strip()
        if continued:
            continued = text.endswith("\\")
            continue
        if in_comment:
            if "*/" in text:
                in_comment = False
                if text.split("*/", 1)[1].strip():
                    return i
            continue
        if not text or text.startswith("//"):
            continue
        if text.startswith("#"):
            continued = text.endswith("\\")
            continue
        if text.startswith("/*"):
            rest = text[2:]
            if "*/" not in rest:
                in_comment = True
                continue
            if rest.split("*/", 1)[1].strip():
                return i
            continue
        return i
    return len(lines)


_BITS_STDCXX = re.compile(r"^\s*#\s*include\s*<bits/stdc\+\+\.h>", re.M)


def _harness_parts() -> tuple[str, str]:
    return cpp_judged.harness_parts("cpp.hpp", "tests")


def script_unit(program: str, codes: list[str]) -> str:
    """The translation unit of a job's script tests: program, tests, harness main()."""
    head, tail = _harness_parts()
    out = _program_part(program)
    table = []
    for i, code in enumerate(codes):
        out += undefines(code)
        # A program's `#define NDEBUG` or own `assert` must not disarm the test's asserts.
        out += ["#undef NDEBUG", "#undef assert", "#include <assert.h>"]
        # At -O2 a renamed main that runs off its end is undefined behaviour (it is not
        # main any more); at O0 it just returns.
        out += [f'#define main __attribute__((optimize("O0"))) __grpo_test_main_{i}', f'#line 1 "test_{i}.cpp"']
        out += [code, "#undef main"]
        table.append(f"  []() -> int {{ return __grpo_invoke(__grpo_test_main_{i}); }},")
    table_text = "static int (*const __grpo_tests[])() = {\n" + "\n".join(table) + "\n};\n"
    table_text += f"static const long __grpo_test_count = {len(codes)};"
    out += undefines(head + tail + table_text)
    out += ['#line 1 "grpo_harness.hpp"', head, table_text, tail]
    return "\n".join(out) + "\n"


def _call_harness() -> tuple[str, str]:
    return cpp_judged.harness_parts("cpp_call.hpp", "calls")


def _program_part(program: str) -> list[str]:
    """The program's lines with its own ``main`` (an answer often has one) renamed to a
    plain function, ready for a harness after it."""
    lines = program.split("\n")
    k = leading_directives(program)
    return [*lines[:k], "#define main __grpo_program_main", f'#line {k + 1} "main.cpp"', *lines[k:], "#undef main",
            '#pragma GCC diagnostic ignored "-Wreturn-type"']


def call_unit(program: str, fns: list[str]) -> str:
    """The translation unit of a job's call tests: the program, then the call harness
    (``harness/cpp_call.hpp``) with one table entry per function the tests name. ``::name``
    finds the program's own function, not a ``std::`` one of the same name that
    ``using namespace std`` would make ambiguous."""
    head, _ = _harness_parts()
    call_head, call_tail = _call_harness()
    lines = program.split("\n")
    k = leading_directives(program)
    table = "static void (*const __grpo_calls[])(const __grpo_call::node &) = {\n"
    table += "".join(f"  [](const __grpo_call::node &a) {{ __grpo_call::run(&::{fn}, a); }},\n" for fn in fns)
    table += f"}};\nstatic const long __grpo_call_count = {len(fns)};"
    out = [
        *lines[:k],
        "#define main __grpo_program_main",
        f'#line {k + 1} "main.cpp"',
        *lines[k:],
        "#undef main",
        '#pragma GCC diagnostic ignored "-Wreturn-type"',
        *undefines(head + call_head + call_tail + table),
        '#line 1 "grpo_harness.hpp"',
        head,
        call_head,
        table,
        call_tail,
    ]
    return "\n".join(out) + "\n"


class CppRunner(Runner):
    """C++17 with g++ -O2. A job is compiled once per binary it needs: the program alone
    (``main.cpp``, its own main) for ``io`` tests, and the program with every script test
    plus ``harness/cpp.hpp`` (``tests.cpp``, see :func:`script_unit`) for ``script`` tests;
    each test then runs the binary in a fresh process. A script test is C++ code that
    defines ``int main()`` and checks with ``assert`` (HumanEval-X / MultiPL-E style); the
    script tests of a job share one translation unit, so the names they define must not
    clash. ``call`` tests share a third binary (``calls.cpp``, see :func:`call_unit`): the
    harness takes the function's types from its pointer, decodes the test's arguments (its
    payload holds nothing else but the nonce) and reports the returned value, which the
    executor compares outside the process."""

    language = "cpp"
    tools = ("g++",)

    def judges(self, helpers: str | None, codes: list[str]) -> bool:
        # With the task's declarations (the prompt's prototype): cpp_judged.plan.
        return cpp_judged.plan(helpers, codes) is not None
    FLAGS = ("-std=c++17", "-O2", "-pipe")

    def compile_argv(self, program: str, source: str, output: str) -> list[str]:
        argv = ["g++", *self.FLAGS]
        if _BITS_STDCXX.search(program):
            # Included first, the image's precompiled bits/stdc++.h applies (several times
            # faster); the program includes it anyway, so nothing else changes.
            argv += ["-include", "bits/stdc++.h"]
        return [*argv, "-o", output, source]

    def prepare(self, job: dict, workdir: str, compile: CompileFn) -> Any:
        try:
            return self._prepare(job, workdir, compile)
        except OSError as exc:  # a program so large its build does not fit the work directory
            if exc.errno not in FULL:
                raise
            message = f"the program's build does not fit the work directory ({exc.strerror})"
            return {"position": {}, "io": message, "script": message, "call": message}

    def _prepare(self, job: dict, workdir: str, compile: CompileFn) -> Any:
        program = job["program"]
        kinds = {t["kind"] for t in job["tests"]}
        state: dict[str, Any] = {"position": {}}
        if "io" in kinds:
            write_alone(workdir, {"main.cpp": program})
            state["io"] = compile(self.compile_argv(program, "main.cpp", "main"), "main")
        codes = []
        for i, test in enumerate(job["tests"]):
            if test["kind"] == "script":
                state["position"][i] = len(codes)
                codes.append(test["code"])
        judged = cpp_judged.plan(job.get("helpers"), codes) if codes else None
        if judged is not None:
            # The tests run in a judge built from trusted text only (cpp_judged.py), the program
            # in a server. Tests that do not compile without the program keep the old path.
            fns, stubs = judged
            head, tail = _harness_parts()
            call_head, _ = _call_harness()
            helpers = job["helpers"]
            write_alone(workdir, {"judge.cpp": cpp_judged.judge_unit(helpers, head, call_head, tail, stubs, codes)})
            # -O0: only the test's light code runs there; a HumanEval-X judge builds in 0.37 s, not 0.62 s.
            argv = [("-O0" if flag == "-O2" else flag) for flag in self.compile_argv(helpers, "judge.cpp", "judge")]
            judge = compile(argv, "judge")
            if isinstance(judge, int):
                # Executable, not readable: the kernel makes the judge's process non-dumpable.
                os.fchmod(judge, 0o111)
                state["judge"] = judge
                write_alone(workdir, {"serve.cpp": cpp_judged.serve_unit(_program_part(program), undefines, head,
                                                                        call_head, fns)})
                state["serve"] = compile(self.compile_argv(program, "serve.cpp", "serve"), "serve")
                codes = []
        if codes:
            write_alone(workdir, {"tests.cpp": script_unit(program, codes)})
            state["script"] = compile(self.compile_argv(program, "tests.cpp", "tests"), "tests")
        fns: list[str] = []
        for i, test in enumerate(job["tests"]):
            if test["kind"] == "call":
                if test["fn"] not in fns:
                    fns.append(test["fn"])
                state["position"][i] = fns.index(test["fn"])
        if fns:
            write_alone(workdir, {"calls.cpp": call_unit(program, fns)})
            state["call"] = compile(self.compile_argv(program, "calls.cpp", "calls"), "calls")
        return state

    def launch(self, job: dict, state: Any, index: int, nonce: str) -> Launch | str:
        test = job["tests"][index]
        kind = test["kind"]
        build = state.get(kind)
        if isinstance(build, str):
            return build
        memory = int(job["limits"]["memory_mb"])
        if kind == "io":
            return Launch(["./main"], build, b"", memory)
        if kind == "call":
            # Only this test's arguments: never an expected value, never another test's input.
            payload = nonce.encode() + b"\n" + json.dumps(test.get("args", []), allow_nan=True).encode()
            return Launch(["./calls", str(state["position"][index])], build, payload, memory)
        if "judge" in state:  # judged: the program's process holds no test and no nonce
            for built in (state["serve"], state["judge"]):
                if isinstance(built, str):
                    return built
            judge = Launch(["./judge", str(state["position"][index])], state["judge"], nonce.encode(), memory)
            return Launch(["./serve"], state["serve"], b"", memory, judge=judge)
        return Launch(["./tests", str(state["position"][index])], build, nonce.encode(), memory)

    def classify(self, signum: int | None, code: int | None, stderr: bytes) -> tuple[str, str] | None:
        if b"std::bad_alloc" in stderr:
            return "memory", "std::bad_alloc (memory limit reached)"
        return None

    def release(self, state: Any) -> None:
        for key in ("io", "script", "call", "serve", "judge"):
            if isinstance(state.get(key), int):
                try:
                    os.close(state[key])
                except OSError:
                    pass


RUNNERS: dict[str, Runner] = {
    "python": PythonRunner(),
    "javascript": JavaScriptRunner(),
    "cpp": CppRunner(),
    "go": GoRunner(),
    "rust": RustRunner(),
    "java": JavaRunner(),
    "typescript": TypeScriptRunner(),
    "ruby": scripted.RubyRunner(),
    "php": scripted.PhpRunner(),
    "perl": scripted.PerlRunner(),
    "lua": scripted.LuaRunner(),
    "bash": scripted.BashRunner(),
    "r": scripted.RRunner(),
    "racket": scripted.RacketRunner(),
}
