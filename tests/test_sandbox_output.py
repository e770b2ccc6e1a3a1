"""Output a program prints is bounded before the executor copies, encodes or sends it.

A job keeps at most ``max_job_output_kb`` of output and messages over all its tests
(executor/kept.py), counted in the bytes of the executor's result line; past it tests
keep a marker, and no verdict changes. The floods here (800 tests each printing 192 KiB
of invalid UTF-8 on stdout and stderr) once made a ~630 MB result line and got the
executor OOM-killed: an ``infra_error``, masked by the reward. Unit tests first, then the
local backend, then docker (Python, JavaScript, C++).
"""

from __future__ import annotations

import json

import language_cases as lcases
import pytest

from conftest import need_image
from grpo_code.config import SandboxConfig
from grpo_code.sandbox import CallTest, IoTest, Job, Limits, Sandbox, ScriptTest, Status, Verdict
from grpo_code.sandbox.executor import kept
from grpo_code.sandbox.wire import split_wire, wire_job

BUDGET = 1024 * 1024
PER_TEST = 400
"""Bytes a test may add to the result line past the budget: its fields, markers, a short message."""
FLOOD = 192 * 1024


def line_bytes(result) -> int:
    """Bytes of the result as the executor sends it."""
    return len(kept.encode_line(result.to_dict()))


def check_bounded(result, tests: int) -> None:
    assert result.status is not Status.INFRA_ERROR, result.error
    assert line_bytes(result) < BUDGET + PER_TEST * tests, line_bytes(result)


# --------------------------------------------------------------------------- units


@pytest.mark.parametrize("text", ["plain", "\ufffd" * 5, "\x00\x1f\n\"\\", "\ud800", "\\\udfff\\", "a\U0001f600b",
                                  "\udbff\udc00 pair halves apart"])
def test_the_line_is_utf8_json_and_its_size_is_what_the_budget_counts(text):
    line = kept.encode_line({"s": text})
    line.decode("utf-8")  # strict: a lone surrogate is escaped, never written as CESU bytes
    # The host reads what ASCII-only JSON gave it (two halves of a pair written apart join, as they did).
    assert json.loads(line) == json.loads(json.dumps({"s": text}))
    assert json.loads(line)["s"] == text or "pair" in text
    assert kept.encoded_size(text) == len(line) - len(b'{"s": ""}\n')


def test_replacement_characters_cost_3_bytes_not_6():
    text = (b"\xff" * 1000).decode("utf-8", "replace")
    assert kept.encoded_size(text) == 3000


def test_budget_keeps_the_first_outputs_then_markers():
    budget = kept.Kept(10_000)
    first = budget.output(b"\xff" * 3000, 65536)
    assert first == "\ufffd" * 3000 and budget.left == 1000
    cut = budget.output(b"x" * 5000, 65536)
    assert cut.startswith("x" * 1000) and cut.endswith(kept.SPENT) and budget.left == 0
    assert budget.output(b"y", 65536) == kept.SPENT
    assert budget.output(b"", 65536) == ""
    short = "returned 1, expected 2"
    assert budget.message(short, kept.MESSAGE_CAP) == short  # a failure still says what it was
    long = budget.message("\x00" * 10_000, kept.MESSAGE_CAP)
    assert kept.encoded_size(long) <= kept.MESSAGE_FLOOR + kept.encoded_size("\n" + kept.SPENT)


def test_per_test_cap_comes_before_the_budget():
    budget = kept.Kept(BUDGET)
    text = budget.output(b"a" * 70_000, 65536)
    assert text == "a" * 65536 + "\n[... output truncated at 65536 bytes]"
    assert budget.left == BUDGET - 65536


def test_a_job_in_parts_shares_its_budget():
    job = Job("def f(i):\n    return 'x' * 1500\n", tuple(CallTest("f", (i,), "x" * 1500) for i in range(6)))
    parts = split_wire(wire_job(job, 5.0, 256, 65536, 16, max_job_output_bytes=6000), part_bytes=4000)
    assert len(parts) >= 3
    assert sum(p["limits"]["max_job_output_bytes"] for p in parts) <= 6000
    assert all(p["limits"]["max_job_output_bytes"] > 0 for p in parts)


# --------------------------------------------------------------------------- jobs (shared by the backends)

PY_FLOOD = ("import os\nBLOB = b'\\xff' * %d\n"
            "def f(x):\n    os.write(1, BLOB)\n    os.write(2, BLOB)\n    return x + 1\n") % FLOOD
PY_SCRIPT_FLOOD = "import os\nos.write(1, b'\\xff' * %d)\nos.write(2, b'\\xff' * %d)\n" % (FLOOD, FLOOD)


def py_call_flood(n: int) -> Job:
    """``n`` call tests, each flooding both streams; every answer is wrong."""
    return Job(PY_FLOOD, tuple(CallTest("f", (i,), i + 2) for i in range(n)), limits=Limits(timeout_s=5.0))


def py_io_script_flood(n: int) -> Job:
    """``n`` io and script tests that flood both streams and fail."""
    tests = [IoTest("", "never printed\n") if i % 2 else ScriptTest("assert False") for i in range(n)]
    return Job(PY_SCRIPT_FLOOD, tuple(tests), limits=Limits(timeout_s=5.0))


def py_loud_but_right(n: int) -> Job:
    """A right program that prints 100 KB per test: io tests compare all of it, and pass."""
    line = "0123456789" * 10
    program = "import sys\nn = int(input())\nfor _ in range(1000):\n    print(%r)\nprint(n * 2)\n" % line
    expected = (line + "\n") * 1000
    return Job(program, tuple(IoTest(f"{i}\n", f"{expected}{2 * i}\n") for i in range(n)),
               limits=Limits(timeout_s=5.0))


def py_loud_calls(n: int) -> Job:
    """Right answers, each after 192 KiB of invalid UTF-8 on both streams."""
    return Job(PY_FLOOD, tuple(CallTest("f", (i,), i + 1) for i in range(n)), limits=Limits(timeout_s=5.0))


def check_flood(result, n: int) -> None:
    check_bounded(result, n)
    assert {t.verdict for t in result.tests} == {Verdict.FAIL}, {t.verdict for t in result.tests}
    first, last = result.tests[0], result.tests[-1]
    assert "output truncated at 65536 bytes" in first.stderr  # the first test keeps its cap
    assert last.stdout == kept.SPENT and last.stderr == kept.SPENT
    assert last.message  # and every failure still says why


# --------------------------------------------------------------------------- local backend


@pytest.fixture(scope="module")
def local():
    sb = Sandbox(SandboxConfig(backend="local", workers=1, timeout_s=5.0, memory_mb=256))
    yield sb
    sb.close()


def test_local_call_flood_is_bounded_and_fails(local):
    [result] = local.run([py_call_flood(800)])
    check_flood(result, 800)
    assert result.tests[-1].message == "returned 800, expected 801"


def test_local_io_and_script_flood_is_bounded_and_fails(local):
    [result] = local.run([py_io_script_flood(60)])
    check_flood(result, 60)


def test_local_loud_right_programs_pass(local):
    [io, calls] = local.run([py_loud_but_right(20), py_loud_calls(300)])
    assert io.status is Status.PASS, io.first_failure()
    assert calls.status is Status.PASS, calls.first_failure()
    check_bounded(io, 20)
    check_bounded(calls, 300)


def lone_surrogates() -> Job:
    """A message and a returned value holding lone surrogates, which UTF-8 cannot carry."""
    program = "def f(x):\n    if x:\n        raise ValueError('\\ud800' * 3)\n    return '\\udfff'\n"
    return Job(program, (CallTest("f", (1,), 0), CallTest("f", (0,), "x")), limits=Limits(timeout_s=5.0))


def check_surrogates(result) -> None:
    assert [t.verdict for t in result.tests] == [Verdict.RUNTIME_ERROR, Verdict.FAIL], result
    assert "\ud800" * 3 in result.tests[0].message  # escaped on the wire, whole again on the host


def test_local_lone_surrogates_cross_the_channel(local):
    check_surrogates(local.run([lone_surrogates()])[0])


# --------------------------------------------------------------------------- docker


@pytest.fixture(scope="module")
def docker(docker_ready):
    sb = Sandbox(SandboxConfig(backend="docker", workers=1, timeout_s=5.0, memory_mb=256))
    yield sb
    sb.close()


@pytest.mark.docker
def test_docker_call_flood_is_an_answer_not_an_executor_death(docker):
    need_image("python")
    [result] = docker.run([py_call_flood(800)])
    check_flood(result, 800)


@pytest.mark.docker
def test_docker_io_and_script_flood_is_bounded(docker):
    need_image("python")
    [result] = docker.run([py_io_script_flood(200)])
    check_flood(result, 200)


@pytest.mark.docker
def test_docker_lone_surrogates_cross_the_channel(docker):
    need_image("python")
    check_surrogates(docker.run([lone_surrogates()])[0])


@pytest.mark.docker
def test_docker_loud_right_programs_pass(docker):
    need_image("python")
    [io, calls] = docker.run([py_loud_but_right(20), py_loud_calls(800)])
    assert io.status is Status.PASS, io.first_failure()
    assert calls.status is Status.PASS, calls.first_failure()
    check_bounded(calls, 800)


JS_FLOOD = ("const blob = Buffer.alloc(%d, 0xff);\n"
            "process.stdout.write(blob);\nprocess.stderr.write(blob);\n" % FLOOD)
CPP_FLOOD = ("#include <cstdio>\n#include <cstring>\nstatic char blob[%d];\n"
             "void flood() { std::memset(blob, 0xff, sizeof blob); std::fwrite(blob, 1, sizeof blob, stdout);"
             " std::fwrite(blob, 1, sizeof blob, stderr); std::fflush(stdout); }\n" % FLOOD)


def native_flood(language: str, n: int) -> Job:
    """``n`` failing tests flooding both streams with invalid UTF-8: JavaScript io and
    script tests, C++ io tests (its script tests bring their own ``main``)."""
    if language == "javascript":
        tests = [IoTest("", "never printed\n") if i % 2 else ScriptTest("console.assert(false);") for i in range(n)]
        return Job(JS_FLOOD, tuple(tests), language=language, limits=lcases.JS_LIMITS)
    program = CPP_FLOOD + "int main() { flood(); return 0; }\n"
    return Job(program, tuple(IoTest("", "never printed\n") for _ in range(n)), language=language,
               limits=Limits(timeout_s=5.0))


@pytest.mark.docker
@pytest.mark.parametrize("language", ["javascript", "cpp"])
def test_docker_native_flood_is_bounded(docker, language):
    need_image(language)
    n = 100 if language == "javascript" else 800
    [result] = docker.run([native_flood(language, n)])
    check_bounded(result, n)
    assert {t.verdict for t in result.tests} <= {Verdict.FAIL, Verdict.RUNTIME_ERROR}, result.tests[0]
    assert result.tests[-1].stdout == kept.SPENT
