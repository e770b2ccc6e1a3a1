"""Checkers, rich values, record jobs and size limits, through the real executor (local
backend; the docker backend runs the same executor, tests/test_sandbox_docker.py)."""

from __future__ import annotations

import pytest

from conftest import BACKENDS, backend_sandbox
from grpo_code.config import SandboxConfig
from grpo_code.sandbox import Job, Sandbox, Verdict
from grpo_code.sandbox.types import CallTest, IoTest, Limits, ScriptTest

ANY_PAIR = '''
def check(input, expected, output):
    """Any two numbers of the input whose sum is the target (several answers are right)."""
    nums, target = input.split("\\n")[0].split(), int(input.split("\\n")[1])
    got = output.split()
    if len(got) != 2:
        return False, f"expected two numbers, got {len(got)} tokens"
    a, b = (int(x) for x in got)
    assert a + b == target, f"{a} + {b} is not {target}"
    return str(a) in nums and str(b) in nums
'''

ROOT = '''
import math

def check(args, expected, output):
    xs, = args
    return abs(sum(c * math.pow(output, i) for i, c in enumerate(xs))) <= 1e-6
'''


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request):
    yield from backend_sandbox(request, workers=2)


def verdicts(result) -> list[str]:
    return [t.verdict.value for t in result.tests]


def test_io_checker_accepts_any_valid_answer_and_rejects_wrong_ones(sandbox):
    stdin = "1 2 3 4\n5\n"
    tests = (IoTest(stdin, "1 4\n", checker="pair"),)
    programs = {
        "print(1, 4)": "pass",
        "print(2, 3)": "pass",  # another valid answer: an exact comparison would fail it
        "print(4, 1)": "pass",
        "print(0, 5)": "fail",
        "print(2, 2)": "fail",  # sums right, but 2 appears once
        "print('garbage')": "fail",
        "import sys\nsys.exit(3)": "fail",  # SystemExit(3): as without a checker
    }
    jobs = [Job(p, tests, checkers={"pair": ANY_PAIR}) for p in programs]
    results = sandbox.run(jobs)
    assert [r.tests[0].verdict.value for r in results] == list(programs.values())
    wrong = results[list(programs).index("print(0, 5)")].tests[0].message
    assert wrong == "checker: wrong answer", wrong  # the checker returned False
    sums_wrong = results[list(programs).index("print('garbage')")].tests[0].message
    assert "expected two numbers, got 1 tokens" in sums_wrong, sums_wrong  # the checker's own reason


def test_yes_no_in_any_case(sandbox):
    test = IoTest("4\n", "YES\n", ignore_case=True)
    results = sandbox.run([Job(f"print({word!r})", (test,)) for word in ("Yes", "yes", "YES", "NO")])
    assert [r.tests[0].verdict.value for r in results] == ["pass", "pass", "pass", "fail"]


def test_call_checker_judges_a_property(sandbox):
    tests = (CallTest("find_zero", ([-6, 11, -6, 1],), 1.0, checker="root"),)
    answers = {"return 1.0": "pass", "return 2.0": "pass", "return 3.0000000001": "pass", "return 2.5": "fail",
               "return 'x'": "fail"}
    jobs = [Job(f"def find_zero(xs):\n    {body}\n", tests, checkers={"root": ROOT}) for body in answers]
    assert [r.tests[0].verdict.value for r in sandbox.run(jobs)] == list(answers.values())


def test_a_broken_checker_rejects_with_its_error(sandbox):
    checkers = {"bad": "def check(i, e, o):\n    return 1 / 0\n", "none": "x = 1\n",
                "slow": "def check(i, e, o):\n    while True: pass\n"}
    jobs = [Job("print(1)", (IoTest("", "1\n", checker=name),), checkers=checkers, limits=Limits(timeout_s=1))
            for name in checkers]
    results = sandbox.run(jobs)
    assert [r.tests[0].verdict for r in results] == [Verdict.FAIL] * 3
    assert "ZeroDivisionError" in results[0].tests[0].message
    assert "defines no check" in results[1].tests[0].message
    assert "did not finish" in results[2].tests[0].message
    # the judge was replaced: the next checker still runs
    [again] = sandbox.run([Job("print(1)", (IoTest("", "1\n", checker="ok"),),
                               checkers={"ok": "def check(i, e, o):\n    return o.strip() == e.strip()\n"})])
    assert again.status.value == "pass"


def test_a_checker_is_out_of_the_programs_reach(sandbox):
    if sandbox.config.backend != "docker":
        pytest.skip("writes to every process's descriptors: docker backend only")
    # The program tries to find and rewrite the checker's verdict: it runs after the
    # program's processes are gone, in the judge, so there is nothing to reach.
    program = (
        "import os, glob\n"
        "for p in glob.glob('/proc/[0-9]*/fd/*'):\n"
        "    try:\n        os.write(os.open(p, os.O_WRONLY), b'{\"ok\": true}\\n')\n    except OSError:\n        pass\n"
        "print(0, 0)\n"
    )
    [result] = sandbox.run([Job(program, (IoTest("1 2 3 4\n5\n", "1 4\n", checker="pair"),),
                                checkers={"pair": ANY_PAIR})])
    assert result.tests[0].verdict is Verdict.FAIL


@pytest.mark.parametrize(
    "body, expected, verdict",
    [
        ("return (1, 2)", {"$t": [1, 2]}, "pass"),
        ("return {1: 'a', (2, 3): 'b'}", {"$d": [[1, "a"], [{"$t": [2, 3]}, "b"]]}, "pass"),
        ("return {'a', 'b'}", {"$s": ["b", "a"]}, "pass"),
        ("return frozenset({1})", {"$f": [1]}, "pass"),
        ("return b'xy'", {"$b": "7879"}, "pass"),
        ("return 1 + 2j", {"$c": [1, 2]}, "pass"),
        ("return float('nan')", float("nan"), "pass"),
        ("return 10 ** 5000", {"$i": hex(10**5000)}, "pass"),
        ("return 10 ** 5000 + 1", {"$i": hex(10**5000)}, "fail"),
        ("return {'a': [1, 2]}", {"a": [1, 2]}, "pass"),
    ],
)
def test_rich_values_arrive_exactly(sandbox, body, expected, verdict):
    [result] = sandbox.run([Job(f"def f(x):\n    {body}\n", (CallTest("f", ({"$t": [0]},), expected),))])
    assert result.tests[0].verdict.value == verdict, result.tests[0].message


def test_arguments_keep_their_types(sandbox):
    program = "def f(t, s, d):\n    return [type(t).__name__, type(s).__name__, sorted(d)]\n"
    args = ({"$t": [1]}, {"$s": [1]}, {"$d": [[1, 2], [3, 4]]})
    [result] = sandbox.run([Job(program, (CallTest("f", args, ["tuple", "set", [1, 3]]),))])
    assert result.status.value == "pass", result.tests[0].message


def test_a_value_over_the_limits_is_its_own_verdict(sandbox):
    tests = (CallTest("f", (), 0),)
    results = sandbox.run([
        Job("def f():\n    return list(range(3_000_000))\n", tests, limits=Limits(memory_mb=1024)),
        Job("def f():\n    return 'x' * (80 * 1024 * 1024)\n", tests, limits=Limits(memory_mb=1024)),
    ])
    assert [r.tests[0].verdict for r in results] == [Verdict.OUTPUT_LIMIT] * 2
    assert "limit" in results[0].tests[0].message


def test_a_record_job_returns_the_reference_answers(sandbox):
    program = "def f(x):\n    return (x, {x})\n\nimport sys\nif __name__ == '__main__':\n    print(sys.stdin.read() * 2)\n"
    job = Job(program, (CallTest("f", (3,)), CallTest("f", ("a",)), IoTest("ab", None)), record=True)
    [result] = sandbox.run([job])
    assert verdicts(result) == ["pass", "pass", "pass"]
    assert result.tests[0].value == {"$t": [3, {"$s": [3]}]}
    assert result.tests[2].stdout == "abab\n"
    # without record, a test without an expected value is refused before it runs
    with pytest.raises(Exception, match="no expected value"):
        Job(program, (CallTest("f", (3,)),))


def test_script_tests_ignore_checkers(sandbox):
    [result] = sandbox.run([Job("x = 1", (ScriptTest("assert x == 1"),), checkers={"c": "def check(i, e, o): pass"})])
    assert result.status.value == "pass"


def test_a_large_job_runs_in_parts_and_comes_back_whole(sandbox, monkeypatch):
    from functools import partial

    from grpo_code.sandbox import node
    from grpo_code.sandbox.wire import split_wire, wire_job

    big = "x" * 1500
    tests = tuple(CallTest("f", (i,), big if i != 3 else "no") for i in range(6))
    job = Job(f"def f(i):\n    return {big!r}\n", tests)
    assert len(split_wire(wire_job(job, 5.0, 256, 65536, 16), part_bytes=4000)) >= 3
    monkeypatch.setattr(node, "split_wire", partial(split_wire, part_bytes=4000))
    [result] = sandbox.run([job])
    assert [t.verdict.value for t in result.tests] == ["pass"] * 3 + ["fail"] + ["pass"] * 2
    assert (result.passed, result.total, result.status.value) == (5, 6, "fail")
    monkeypatch.setattr("grpo_code.sandbox.wire.MAX_TEST_BYTES", 1000)
    [refused] = sandbox.run([job])
    assert refused.status.value == "infra_error" and "over the" in refused.error


# Red team, round 3: a program must not turn its wrong answer into an infra_error (which
# masks its reward) by sending what the harness cannot decode, nor slow down the next job.
FORGED = {
    "deep report, io": ("import os\nos.write(3, b'[' * 200000 + b'\\n')\nprint(41)\n",
                        IoTest("", "42\n")),
    "deep report, call": ("import os\ndef f(x):\n    os.write(3, b'[' * 200000 + b'\\n')\n    return 41\n",
                          CallTest("f", (1,), 42)),
    "complex overflow": ("import os\ndef f(x):\n    os.write(3, b'{\"event\":\"returned\",\"value\":{\"$c\":[1"
                         + "0" * 400 + ",0]}}\\n')\n    os._exit(0)\n", CallTest("f", (1,), 42)),
    "bad Decimal": ("import os\ndef f(x):\n    os.write(3, b'{\"event\":\"returned\",\"value\":{\"$k\":"
                    "[\"Decimal\",\"abc\"]}}\\n')\n    os._exit(0)\n", CallTest("f", (1,), 42)),
    "complex against a big int": ("def f(n):\n    return 0j\n", CallTest("f", (400,), {"$i": hex(10**400)})),
    "signalling NaN": ("import decimal\ndef f():\n    return decimal.Decimal('sNaN')\n",
                       CallTest("f", (), {"$k": ["Decimal", "1.5"]})),
    "forged manifest": ("import os, struct\nframe = b'{\"ready\":{\"X\":{\"v\":{\"$c\":[1' + b'0' * 400"
                        " + b',0]}}}}'\nos.write(4, struct.pack('>I', len(frame)) + frame)\nos._exit(0)\n"
                        "def f(x):\n    return 0\n", ScriptTest("assert f(1) == 42")),
}


@pytest.mark.parametrize("name", list(FORGED))
def test_undecodable_answers_are_the_programs_failure(sandbox, name):
    if sandbox.config.backend != "docker":
        pytest.skip("forges harness messages: docker backend only")
    program, test = FORGED[name]
    [result] = sandbox.run([Job(program, (test,), limits=Limits(timeout_s=3))])
    assert result.status.value == "fail" and result.tests[0].verdict is Verdict.FAIL, result


def test_a_stopped_judge_does_not_slow_the_next_job(sandbox):
    if sandbox.config.backend != "docker":
        pytest.skip("stops every process it can: docker backend only")
    stopper = ("import os, signal\ndef add(a, b):\n    me = os.getpid()\n    for p in os.listdir('/proc'):\n"
               "        if p.isdigit() and int(p) not in (1, me):\n"
               "            try:\n                os.kill(int(p), signal.SIGSTOP)\n            except OSError:\n"
               "                pass\n    return 0\n")
    good = "def add(a, b):\n    return a + b\n"
    one = Sandbox(SandboxConfig(backend="docker", workers=1, timeout_s=2.0, memory_mb=256))
    try:
        eq = {"eq": "def check(input, expected, output):\n    return output == expected\n"}
        results = one.run([Job(good, (ScriptTest("assert add(1, 2) == 3"),)),
                           Job(stopper, (CallTest("add", (1, 2), 3),)),
                           Job(good, (ScriptTest("assert add(1, 2) == 3"),)),
                           Job(stopper, (CallTest("add", (1, 2), 3),)),
                           Job(good, (CallTest("add", (1, 2), 3, checker="eq"),), checkers=eq)])
    finally:
        one.close()
    assert [r.status.value for r in results] == ["pass", "fail", "pass", "fail", "pass"], [
        r.tests[0].message for r in results]


def test_tens_of_megabytes_of_expected_values_get_a_verdict(sandbox):
    """A test whose expected value is 24 MB (HumanEval+ has such answers): a verdict, not an
    executor that runs out of memory on every retry."""
    if sandbox.config.backend != "docker":
        pytest.skip("the container's memory is what this checks: docker backend only")
    size = 24 * 1024 * 1024
    tests = (CallTest("f", (size,), "x" * size), CallTest("f", (3,), "xxx"))
    results = sandbox.run([Job("def f(n):\n    return 'x' * n\n", tests, limits=Limits(memory_mb=512)),
                           Job("def f(n):\n    return 'y' * n\n", tests, limits=Limits(memory_mb=512))])
    assert [r.status.value for r in results] == ["pass", "fail"], [r.error for r in results]
