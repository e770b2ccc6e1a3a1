"""The JavaScript and C++ runners: verdicts, reward hacks, runaway programs and compile bombs.

The docker tests need the images from `grpo-code sandbox build --lang javascript|cpp
--bootstrap` (skipped with that reason otherwise, failed under CI=true). The runner unit
tests at the top need nothing; the local-backend tests need node / g++ on the host.
"""

from __future__ import annotations

import shutil
import time

import language_cases as cases
import pytest

from conftest import need, need_image
from grpo_code.config import SandboxConfig
from grpo_code.errors import SandboxError
from grpo_code.sandbox import (
    CallTest,
    Job,
    Limits,
    Sandbox,
    ScriptTest,
    Status,
    Verdict,
    local_backend,
)
from grpo_code.sandbox.executor import runners
from grpo_code.sandbox.wire import job_deadline_s, wire_job

LANGS = ("javascript", "cpp")

# --------------------------------------------------------------------------- runner units (no engine)


def test_languages_and_their_test_kinds():
    from grpo_code.sandbox.types import LANGUAGES

    assert LANGUAGES == ("python", "javascript", "cpp", "go", "rust", "java", "typescript", "ruby", "php", "perl",
                         "lua", "bash", "r", "racket")
    Job("function f() { return 1; }", (CallTest("f", (), 1),), "javascript")
    Job("int f() { return 1; }", (ScriptTest("int main() {}"), CallTest("f", (), 1)), "cpp")
    with pytest.raises(SandboxError, match="supported: python, javascript, cpp, go"):
        Job("x", (ScriptTest(""),), "cobol")


def test_compiled_jobs_get_compile_limits_and_a_longer_deadline():
    job = cases.cpp("int main() {}")
    wire = wire_job(job, 5.0, 512, 65536, 16, compile_timeout_s=7.0, compile_memory_mb=900)
    assert wire["limits"]["compile_timeout_s"] == 7.0 and wire["limits"]["compile_memory_mb"] == 900
    assert "compile_timeout_s" not in wire_job(cases.js(""), 5.0, 512, 65536, 16)["limits"]
    uncompiled = {k: v for k, v in wire["limits"].items() if not k.startswith("compile")}
    # a script test: two builds (the judge and the program's server), compile_timeout_s + 2 s each
    assert job_deadline_s(wire) == job_deadline_s({**wire, "limits": uncompiled}) + 2 * 9.0


def test_cpp_compiles_once_per_binary_not_once_per_test(tmp_path):
    built = []

    def compile(argv, output):
        built.append((argv, output))
        return "stop here"

    job = {"program": "int f() { return 1; }", "limits": {"memory_mb": 64},
           "tests": [{"kind": "script", "code": f"int main() {{ return {i}; }}"} for i in range(6)]}
    runner = runners.RUNNERS["cpp"]
    state = runner.prepare(job, str(tmp_path), compile)
    assert [o for _, o in built] == ["tests"]
    assert all(runner.launch(job, state, i, "n") == "stop here" for i in range(6))
    built.clear()
    job["tests"] += [{"kind": "io", "stdin": "", "stdout": ""}] * 3
    runner.prepare(job, str(tmp_path), compile)
    assert sorted(o for _, o in built) == ["main", "tests"]  # one build per binary
    unit = (tmp_path / "tests.cpp").read_text()
    assert unit.count('#define main __attribute__((optimize("O0"))) __grpo_test_main_') == 6
    assert "#define main __grpo_program_main" in unit
    built.clear()
    calls = [{"kind": "call", "fn": fn, "args": [i], "expected": 99} for i, fn in enumerate("fgf")]
    job["tests"] += calls
    state = runner.prepare(job, str(tmp_path), compile)
    assert sorted(o for _, o in built) == ["calls", "main", "tests"]  # all call tests share one binary
    unit = (tmp_path / "calls.cpp").read_text()
    assert unit.count("__grpo_call::run(&::f, a)") == 1 and unit.count("__grpo_call::run(&::g, a)") == 1
    state["call"] = 5  # as if built: the launch of each call test carries only its own arguments
    launches = [runner.launch(job, state, 9 + i, "n0nce") for i in range(3)]
    assert [la.argv for la in launches] == [["./calls", "0"], ["./calls", "1"], ["./calls", "0"]]
    assert [la.payload for la in launches] == [b"n0nce\n[0]", b"n0nce\n[1]", b"n0nce\n[2]"]


def test_cpp_unit_keeps_program_line_numbers_and_disarms_program_macros():
    program = "// header\n#include <vector>\n\nint f() {\n  return 1;\n}\n"
    unit = runners.script_unit(program, ["#include <cassert>\nint main() { assert(candidate(1)); }"])
    lines = unit.split("\n")
    at = lines.index("#define main __grpo_program_main")
    assert lines[:at] == ["// header", "#include <vector>", ""]  # the precompiled header stays usable
    assert lines[at + 1] == '#line 4 "main.cpp"' and lines[at + 2] == "int f() {"
    assert "#undef candidate" in lines and "#undef NDEBUG" in lines and "#undef __grpo_tests" in lines
    assert "#undef INT_MAX" not in lines and "#undef errno" not in lines and "#undef not" not in lines
    assert runners.leading_directives("/* a\n b */\n#define X \\\n  1\nint x;\n") == 4
    argv = runners.RUNNERS["cpp"].compile_argv("#include <bits/stdc++.h>\n", "a.cpp", "a")
    assert argv[:4] == ["g++", "-std=c++17", "-O2", "-pipe"] and "-include" in argv


def test_local_backend_says_which_tool_is_missing(monkeypatch):
    monkeypatch.setattr(runners.shutil, "which", lambda name: None)
    with pytest.raises(SandboxError, match="needs node on PATH to run javascript jobs"):
        local_backend.check_tools("javascript")
    with Sandbox(SandboxConfig(backend="local"), quiet=True) as sb, pytest.raises(SandboxError, match="g\\+\\+"):
        sb.submit(cases.cpp("int main() {}"))


# --------------------------------------------------------------------------- docker

@pytest.fixture(scope="module")
def sandbox(docker_ready):
    for language in LANGS:
        need_image(language)
    sb = Sandbox(SandboxConfig(backend="docker", workers=2, timeout_s=5.0, memory_mb=256, compile_timeout_s=8.0))
    yield sb
    sb.close()


def _verdicts(result) -> list[str]:
    return [t.verdict.value for t in result.tests]


@pytest.mark.docker
@pytest.mark.parametrize("language", LANGS)
def test_every_test_kind_gets_its_own_verdict(sandbox, language):
    job, expected = cases.MIXED[language]
    [result] = sandbox.run([job])
    assert _verdicts(result) == expected, result
    assert sandbox.backend == "docker"


@pytest.mark.docker
@pytest.mark.parametrize("language", LANGS)
def test_syntax_errors_are_compile_errors_with_the_message(sandbox, language):
    [result] = sandbox.run([cases.SYNTAX_ERROR[language]])
    assert _verdicts(result) == ["compile_error", "compile_error"], result
    assert "main" in result.tests[0].message and ("error" in result.tests[0].message.lower())


@pytest.mark.docker
@pytest.mark.parametrize("name", cases.hacks_for("javascript") + cases.hacks_for("cpp"))
def test_reward_hacks_and_runaways_never_pass(sandbox, name):
    job, allowed = cases.HACKS[name]
    start = time.monotonic()
    [result] = sandbox.run([job])
    elapsed = time.monotonic() - start
    assert result.status is not Status.INFRA_ERROR, result
    assert result.tests[0].verdict in allowed, (name, result.tests[0])
    # the per-test limit (1 s), plus a build and a busy machine
    assert elapsed < 15.0, (name, elapsed)


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(cases.COMPILE_BOMBS))
def test_compile_bombs_end_as_compile_errors_within_the_compile_limit(sandbox, name):
    start = time.monotonic()
    [result] = sandbox.run([cases.COMPILE_BOMBS[name]])
    elapsed = time.monotonic() - start
    assert _verdicts(result) == ["compile_error"], result
    assert elapsed < sandbox.config.compile_timeout_s + 6.0, elapsed
    results = sandbox.run([cases.cpp("int add(int a, int b) { return a + b; }\n",
                                     "#include <cassert>\nint main() { assert(add(1, 2) == 3); }")] * 2)
    assert all(r.status is Status.PASS for r in results), results  # the pool still works


@pytest.mark.docker
@pytest.mark.parametrize("language", LANGS)
def test_huge_output_is_truncated_without_hanging(sandbox, language):
    start = time.monotonic()
    [result] = sandbox.run([cases.HUGE_OUTPUT[language]])
    assert time.monotonic() - start < 12.0
    test = result.tests[0]
    assert test.verdict is Verdict.PASS, test
    assert len(test.stdout) < sandbox.config.max_output_kb * 1024 + 100 and "truncated" in test.stdout


@pytest.mark.docker
@pytest.mark.parametrize("language", LANGS)
def test_fork_bomb_is_contained_and_the_pool_serves_the_next_job(sandbox, language):
    name = "js: fork bomb" if language == "javascript" else "cpp: fork bomb"
    sandbox.run([cases.HACKS[name][0]])
    good = {"javascript": cases.js("function add(a, b) { return a + b; }\n", "console.assert(add(1, 2) === 3);",
                                   limits=Limits(timeout_s=5.0)),
            "cpp": cases.cpp("int add(int a, int b) { return a + b; }\n",
                             "#include <cassert>\nint main() { assert(add(1, 2) == 3); }")}[language]
    results = sandbox.run([good] * 4)
    assert all(r.status is Status.PASS for r in results), results


@pytest.mark.docker
def test_tests_cannot_rewrite_the_binary_or_files_of_the_next_test(sandbox):
    # The first test overwrites everything it can find in the work dir; the second must
    # still run the program that was compiled, and see its own test code.
    program = ("#include <cstdio>\n#include <dirent.h>\n#include <string>\n"
               "int add(int a, int b) { return a + b; }\n"
               "void vandalise() {\n    DIR* d = opendir(\".\");\n    while (dirent* e = readdir(d)) {\n"
               "        std::string name = e->d_name;\n        if (name[0] == '.') continue;\n"
               "        FILE* f = std::fopen(name.c_str(), \"w\");\n        if (f) { std::fputs(\"int main(){}\", f); std::fclose(f); }\n"
               "    }\n}\n")
    job = cases.cpp(program, "int main() { vandalise(); }",
                    "#include <cassert>\nint main() { assert(add(1, 2) == 4); }")
    [result] = sandbox.run([job])
    assert _verdicts(result) == ["pass", "fail"], result


@pytest.mark.docker
def test_compile_memory_is_bounded_separately(docker_ready):
    need_image("cpp")
    cfg = SandboxConfig(backend="docker", workers=1, compile_memory_mb=64, compile_timeout_s=8.0)
    with Sandbox(cfg) as sb:
        [result] = sb.run([cases.cpp("#include <bits/stdc++.h>\nint main() {}\n")])
    assert _verdicts(result) == ["compile_error"], result


# --------------------------------------------------------------------------- local backend


@pytest.mark.parametrize("language, tool", [("javascript", "node"), ("cpp", "g++")])
def test_local_backend_runs_the_same_runners(language, tool):
    need(shutil.which(tool) is not None, f"{tool} is not installed on this machine", required_in_ci=False)
    job, expected = cases.MIXED[language]
    names = cases.hacks_for(language)
    quick = [n for n in names if "bomb" not in n and "loop" not in n and "overflow" not in n]
    with Sandbox(SandboxConfig(backend="local", workers=2, compile_timeout_s=20.0), quiet=True) as sb:
        results = sb.run([job] + [cases.HACKS[n][0] for n in quick])
    assert _verdicts(results[0]) == expected, results[0]
    for name, result in zip(quick, results[1:]):
        assert result.tests[0].verdict in cases.HACKS[name][1], (name, result.tests[0])
