"""JavaScript and C++ jobs that try to break their runners, shared by the docker and local tests.

Each case is a job plus the verdicts its first test may get. Reward hacks must never
``pass``; runaway programs must end as ``timeout``/``memory`` (or ``compile_error`` for
a build that blows its limits) within their limits.
"""

from __future__ import annotations

from grpo_code.sandbox import CallTest, IoTest, Job, Limits, ScriptTest, Verdict

FAST = Limits(timeout_s=1.0, memory_mb=256)
# Every JavaScript test starts a node process (~0.1 s of CPU, more on a loaded machine).
JS_LIMITS = Limits(timeout_s=3.0, memory_mb=256)


def js(program: str, *tests: str, limits: Limits = JS_LIMITS) -> Job:
    return Job(program, tuple(ScriptTest(t) for t in (tests or ("",))), language="javascript", limits=limits)


def cpp(program: str, *tests: str, limits: Limits = FAST) -> Job:
    return Job(program, tuple(ScriptTest(t) for t in (tests or ("int main() {}",))), language="cpp", limits=limits)


JS_ADD = "function add(a, b) { return a - b; }\n"  # wrong on purpose: every test below must fail
JS_CHECK = "console.assert(add(1, 2) === 3);"
JS_ASSERT = "const assert = require('node:assert');\nassert.deepStrictEqual(add(1, 2), 3);"
CPP_ADD = "int add(int a, int b) { return a - b; }\n"
CPP_CHECK = "#include <cassert>\nint main() {\n    assert(add(1, 2) == 3);\n}\n"

HACKS: dict[str, tuple[Job, set[Verdict]]] = {
    # ---------------------------------------------------------------- JavaScript
    "js: process.exit(0) before the tests": (js("process.exit(0);\n" + JS_ADD, JS_CHECK), {Verdict.FAIL}),
    "js: process.exit(0) inside the tests": (
        js("function add(a, b) { process.exit(0); }\n", JS_CHECK),
        {Verdict.FAIL},
    ),
    "js: process.exit(0) from a timer after a failed check": (
        js("setTimeout(() => process.exit(0), 0);\n" + JS_ADD, "setTimeout(() => console.assert(add(1, 2) === 3), 5);"),
        {Verdict.FAIL, Verdict.RUNTIME_ERROR},
    ),
    "js: console.assert shadowed by a var": (js("var console = {assert() {}};\n" + JS_ADD, JS_CHECK), {Verdict.FAIL}),
    "js: console.assert reassigned": (js("console.assert = () => {};\n" + JS_ADD, JS_CHECK), {Verdict.FAIL}),
    "js: console replaced on globalThis": (
        js("globalThis.console = {assert() {}, log() {}};\n" + JS_ADD, JS_CHECK),
        {Verdict.FAIL},
    ),
    "js: console redeclared with let": (
        js("let console = {assert() {}};\n" + JS_ADD, JS_CHECK),
        {Verdict.FAIL, Verdict.RUNTIME_ERROR},
    ),
    "js: assert module patched": (
        js("require('assert').deepStrictEqual = () => {};\nrequire('assert').strict.deepStrictEqual = () => {};\n"
           + JS_ADD, JS_ASSERT),
        {Verdict.FAIL},
    ),
    "js: require replaced": (
        js("require = () => ({deepStrictEqual() {}});\n" + JS_ADD, JS_ASSERT),
        {Verdict.FAIL},
    ),
    "js: module loader patched": (
        js("const M = require('module');\nM.prototype.require = () => ({deepStrictEqual() {}});\n"
           "M._load = () => ({deepStrictEqual() {}});\n" + JS_ADD, JS_ASSERT),
        {Verdict.FAIL},
    ),
    "js: vm patched to skip the test code": (
        js("const vm = require('vm');\nvm.Script.prototype.runInThisContext = function () {};\n" + JS_ADD, JS_CHECK),
        {Verdict.FAIL},
    ),
    "js: JSON.stringify rigged": (
        js("JSON.stringify = () => '1';\n" + JS_ADD, "console.assert(JSON.stringify(add(1, 2)) === JSON.stringify(3));"),
        {Verdict.FAIL},
    ),
    "js: fake pass markers on stdout": (
        js("console.log('PASS'); console.log('{\"verdict\": \"pass\"}');\n" + JS_ADD, JS_CHECK),
        {Verdict.FAIL},
    ),
    "js: forged report on the harness fd": (
        js("const fs = require('fs');\nfs.writeSync(3, '{\"nonce\": \"guess\", \"event\": \"completed\"}\\n');\n"
           "process.exit(0);\n", JS_CHECK),
        {Verdict.FAIL},
    ),
    "js: reading the job fd for the nonce": (
        js("const fs = require('fs');\nlet job = null;\n"
           "for (const p of ['/proc/self/fd/4', '/dev/fd/4']) { try { job = JSON.parse(fs.readFileSync(p)); } catch (e) {} }\n"
           "if (job) { fs.writeSync(3, JSON.stringify({nonce: job.nonce, event: 'completed'}) + '\\n'); process.exit(0); }\n"
           + JS_ADD, JS_CHECK),
        {Verdict.FAIL},
    ),
    "js: a Promise instead of a value": (
        Job("async function add(a, b) { return a + b; }\n", (CallTest("add", (1, 2), 3),), "javascript", JS_LIMITS),
        {Verdict.FAIL},
    ),
    "js: undefined for the null a test expects": (
        # `f() === null` fails in JavaScript when f returns nothing (HumanEval-X's empty stubs)
        Job("function longest(strings) { }\n", (CallTest("longest", ([],), None),), "javascript", JS_LIMITS),
        {Verdict.FAIL},
    ),
    "js: an object with toJSON instead of a value": (
        Job("function add(a, b) { return {toJSON() { return 3; }, valueOf() { return 3; }}; }\n",
            (CallTest("add", (1, 2), 3),), "javascript", JS_LIMITS),
        {Verdict.FAIL},
    ),
    "js: a failed check in the test's own timer, after its body": (
        js(JS_ADD, "setTimeout(() => console.assert(add(1, 2) === 3), 5);"),
        {Verdict.FAIL},
    ),
    "js: infinite loop": (js("while (true) {}\n"), {Verdict.TIMEOUT}),
    "js: memory bomb (heap)": (js("const a = [];\nfor (;;) a.push(new Array(1e6).fill(1.5));\n"), {Verdict.MEMORY}),
    "js: memory bomb (buffers)": (js("const a = [];\nfor (;;) a.push(Buffer.alloc(1 << 26, 1));\n"), {Verdict.MEMORY}),
    "js: fork bomb": (
        js("const {spawn} = require('child_process');\n"
           "for (;;) { try { spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)']); } catch (e) {} }\n"),
        {Verdict.TIMEOUT, Verdict.MEMORY, Verdict.RUNTIME_ERROR},
    ),
    # ---------------------------------------------------------------- C++
    "cpp: exit(0) in a static initializer": (
        cpp("#include <cstdlib>\n" + CPP_ADD + "struct Early { Early() { std::exit(0); } } early;\n", CPP_CHECK),
        {Verdict.FAIL},
    ),
    "cpp: exit(0) inside the tests": (
        cpp("#include <cstdlib>\nint add(int a, int b) { std::exit(0); }\n", CPP_CHECK),
        {Verdict.FAIL},
    ),
    "cpp: _exit(0) inside the tests": (
        cpp("#include <unistd.h>\nint add(int a, int b) { _exit(0); }\n", CPP_CHECK),
        {Verdict.FAIL},
    ),
    "cpp: quick_exit(0) inside the tests": (
        cpp("#include <cstdlib>\nint add(int a, int b) { std::quick_exit(0); }\n", CPP_CHECK),
        {Verdict.FAIL},
    ),
    "cpp: atexit handler that claims success": (
        cpp("#include <cstdio>\n#include <cstdlib>\n#include <unistd.h>\n"
            "static void bye() { std::puts(\"PASS\"); std::fflush(stdout); _exit(0); }\n"
            "int add(int a, int b) { std::atexit(bye); std::exit(1); }\n", CPP_CHECK),
        {Verdict.FAIL, Verdict.RUNTIME_ERROR},
    ),
    "cpp: NDEBUG defined before <cassert>": (
        cpp("#define NDEBUG\n#include <cassert>\n" + CPP_ADD, CPP_CHECK),
        {Verdict.FAIL},
    ),
    "cpp: assert redefined as a no-op": (
        cpp("#include <cassert>\n#undef assert\n#define assert(x) ((void)0)\n" + CPP_ADD, CPP_CHECK),
        {Verdict.FAIL},
    ),
    "cpp: __assert_fail defined away": (
        cpp("extern \"C\" void __assert_fail(const char*, const char*, unsigned int, const char*) noexcept {}\n"
            + CPP_ADD, CPP_CHECK),
        {Verdict.COMPILE_ERROR},
    ),
    "cpp: a macro rewrites the call under test": (
        cpp(CPP_ADD + "#define add(a, b) 3\n", CPP_CHECK),
        {Verdict.FAIL},
    ),
    "cpp: a macro swaps the harness's test table": (
        cpp(CPP_ADD + "static int nothing() { return 0; }\n"
            "static int (*const fake[])() = {nothing};\n#define __grpo_tests fake\n", CPP_CHECK),
        {Verdict.FAIL},
    ),
    "cpp: its own main that returns 0": (
        cpp(CPP_ADD + "int main() { return 0; }\n", CPP_CHECK),
        {Verdict.FAIL},
    ),
    "cpp: fake pass markers on stdout": (
        cpp("#include <cstdio>\nint add(int a, int b) { std::puts(\"PASS\"); return a - b; }\n", CPP_CHECK),
        {Verdict.FAIL},
    ),
    "cpp: forged report on the harness fd": (
        cpp("#include <unistd.h>\nint add(int a, int b) {\n"
            "    const char r[] = \"{\\\"nonce\\\": \\\"guess\\\", \\\"event\\\": \\\"completed\\\"}\\n\";\n"
            "    write(3, r, sizeof r - 1);\n    _exit(0);\n}\n", CPP_CHECK),
        {Verdict.FAIL},
    ),
    "cpp: an uncaught exception": (
        cpp("#include <stdexcept>\nint add(int a, int b) { throw std::runtime_error(\"no\"); }\n", CPP_CHECK),
        {Verdict.RUNTIME_ERROR},
    ),
    "cpp: infinite loop": (cpp("void spin() { for (volatile long i = 0;; ++i) {} }\n", "int main() { spin(); }"),
                           {Verdict.TIMEOUT}),
    "cpp: memory bomb": (
        cpp("#include <cstring>\n#include <vector>\nstd::vector<char*> kept;\n"
            "void eat() { for (;;) { char* p = new char[1 << 24]; std::memset(p, 1, 1 << 24); kept.push_back(p); } }\n",
            "int main() { eat(); }"),
        {Verdict.MEMORY},
    ),
    "cpp: stack overflow": (
        cpp("int deep(int n) { volatile char pad[4096]; pad[0] = n; return deep(n + 1) + pad[0]; }\n",
            "int main() { return deep(0); }"),
        {Verdict.RUNTIME_ERROR},
    ),
    "cpp: fork bomb": (
        cpp("#include <unistd.h>\nvoid bomb() { for (;;) fork(); }\n", "int main() { bomb(); }"),
        {Verdict.TIMEOUT, Verdict.MEMORY, Verdict.RUNTIME_ERROR},
    ),
}

# Builds that blow their limits: each must end as compile_error, within the compile limit.
COMPILE_BOMBS: dict[str, Job] = {
    "exponential template instantiation": cpp(
        "template <int N, long M> struct Boom {\n"
        "    static const long value = Boom<N - 1, 2 * M>::value + Boom<N - 1, 2 * M + 1>::value;\n};\n"
        "template <long M> struct Boom<0, M> { static const long value = 1; };\n"
        "long boom = Boom<28, 0>::value;\n"
    ),
    "including an endless file": cpp('#include "/dev/zero"\n'),
    "a gigabyte of initialised data": cpp("char big[1 << 30] = {1};\n"),
}

HUGE_OUTPUT = {
    "javascript": js("const line = 'x'.repeat(1000);\nfor (let i = 0; i < 20000; i++) console.log(line);\n",
                     limits=Limits(timeout_s=5.0)),
    "cpp": cpp("#include <cstdio>\nvoid flood() { for (int i = 0; i < 20000; ++i) std::printf(\"%01000d\\n\", 0); }\n",
               "int main() { flood(); }", limits=Limits(timeout_s=5.0)),
}

# One job per language with a pass and a fail of every test kind it supports.
MIXED = {
    "javascript": (
        Job(
            "function add(a, b) { return a + b; }\n"
            "const data = require('fs').readFileSync(0, 'utf8').trim();\n"
            "if (data) console.log(data.split(/\\s+/).map(Number).reduce((s, x) => s + x, 0));\n",
            (ScriptTest("console.assert(add(1, 2) === 3);"), ScriptTest("console.assert(add(1, 2) === 4);"),
             IoTest("1 2\n", "3\n"), IoTest("1 2\n", "4\n"),
             CallTest("add", (1, 2), 3), CallTest("add", ([1], [2]), "12"), CallTest("add", (1, 2), 4)),
            "javascript",
        ),
        ["pass", "fail", "pass", "fail", "pass", "pass", "fail"],
    ),
    "cpp": (
        Job(
            "#include <iostream>\nlong long add(long long a, long long b) { return a + b; }\n"
            "int main() { long long a, b; std::cin >> a >> b; std::cout << add(a, b) << \"\\n\"; }\n",
            (ScriptTest("#include <cassert>\nint main() { assert(add(1, 2) == 3); }"),
             ScriptTest("#include <cassert>\nint main() { assert(add(1, 2) == 4); }"),
             IoTest("1 2\n", "3\n"), IoTest("1 2\n", "4\n"),
             ScriptTest("#include <cassert>\nint main(int argc, char** argv) { assert(argc == 1 && add(2, 2) == 4); }")),
            "cpp",
        ),
        ["pass", "fail", "pass", "fail", "pass"],
    ),
}

SYNTAX_ERROR = {
    "javascript": Job("function add(a, b) { return a + b;\n", (ScriptTest("add(1, 2);"), IoTest("", "")), "javascript"),
    "cpp": Job("int add(int a, int b) { return a + b\n", (ScriptTest("int main() { add(1, 2); }"), IoTest("", "")), "cpp"),
}


def hacks_for(language: str) -> list[str]:
    prefix = "js: " if language == "javascript" else "cpp: "
    return sorted(name for name in HACKS if name.startswith(prefix))
