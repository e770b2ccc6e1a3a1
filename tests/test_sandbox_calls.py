"""A job's ``call`` tests in one program process (``executor/calls.py``).

Each test keeps its own verdict, limits and output; a test that ends the process does not
take the next one with it; a program that does not load fails every test the same way;
nothing a program writes on its report channel turns into a pass it did not earn or into
an ``infra_error``; ``isolation: test`` still gives each test a process; and a job that
stops at its first failure reports the rest as ``not_run`` (on the host too, for a job
sent in parts).
"""

from __future__ import annotations

import pytest

from conftest import BACKENDS, backend_sandbox
from grpo_code.errors import SandboxError
from grpo_code.sandbox import CallTest, Job, Limits, ScriptTest, Status, Verdict
from grpo_code.sandbox.pool import WorkerPool
from grpo_code.sandbox.types import testcase_from_dict as parse_test
from grpo_code.sandbox.wire import job_deadline_s, split_wire, total_deadline_s, wire_for, wire_size

FAST = Limits(timeout_s=1.0, memory_mb=256)

COUNTER = (
    "calls = 0\n"
    "def f(x):\n"
    "    global calls\n"
    "    calls += 1\n"
    "    print('call', calls)\n"
    "    if x == 'raise':\n"
    "        raise ValueError('asked to')\n"
    "    if x == 'spin':\n"
    "        while True:\n"
    "            pass\n"
    "    if x == 'exit':\n"
    "        import os\n"
    "        os._exit(3)\n"
    "    if x == 'memory':\n"
    "        raise MemoryError\n"
    "    return calls\n"
)


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request):
    yield from backend_sandbox(request)


def calls(*args, expected=None) -> tuple[CallTest, ...]:
    return tuple(CallTest("f", (a,), expected[i] if expected else 0) for i, a in enumerate(args))


def verdicts(result) -> list[str]:
    return [t.verdict.value for t in result.tests]


def test_call_tests_share_one_process_and_each_keeps_its_own_verdict(sandbox):
    tests = calls(1, 2, "raise", 4, "spin", 6, "exit", 8, "memory", 10, expected=[1, 2, 0, 4, 0, 1, 0, 1, 0, 1])
    [result] = sandbox.run([Job(COUNTER, tests, limits=FAST)])
    assert verdicts(result) == ["pass", "pass", "runtime_error", "pass", "timeout", "pass", "runtime_error",
                                "pass", "memory", "pass"], result
    # One process until a test ends it: the count goes on after an exception, starts over
    # after a timeout, an exit or a MemoryError.
    # (A call test's output is what the process printed by the time its answer was read:
    # the process runs on to the next test meanwhile.)
    assert "".join(t.stdout for t in result.tests[:4]) == "call 1\ncall 2\ncall 3\ncall 4\n"
    assert result.tests[5].stdout.startswith("call 1\n") and result.tests[7].stdout.startswith("call 1\n")
    assert "ValueError: asked to" in result.tests[2].message
    assert result.tests[4].cpu_ms >= 900


def test_isolation_test_gives_each_test_a_new_process(sandbox):
    [result] = sandbox.run([Job(COUNTER, calls(1, 1, 1, expected=[1, 1, 1]), limits=FAST, isolation="test")])
    assert result.status is Status.PASS, result


def test_a_method_call_makes_a_new_instance_per_test(sandbox):
    """``Class.method`` (LeetCode's ``Solution().f``): each call on a new instance, so what one
    test leaves on its instance the next does not see; isolation: test takes it too."""
    program = ("class Solution:\n    def __init__(self):\n        self.seen = []\n"
               "    def f(self, x):\n        self.seen.append(x)\n        return len(self.seen)\n")
    tests = tuple(CallTest("Solution.f", (x,), 1) for x in range(3)) + (CallTest("Missing.f", (1,), 1),
                                                                        CallTest("Solution.g", (1,), 1))
    for isolation in ("job", "test"):
        [result] = sandbox.run([Job(program, tests, limits=FAST, isolation=isolation)])
        assert verdicts(result) == ["pass"] * 3 + ["runtime_error"] * 2, result
        assert "class 'Missing' is not defined" in result.tests[3].message
        assert "has no attribute 'g'" in result.tests[4].message


def test_a_method_call_is_python_only():
    with pytest.raises(SandboxError, match="only Python call tests"):
        Job("class S {}", (CallTest("S.f", (), 1),), language="javascript")
    with pytest.raises(SandboxError, match="must be a function name"):
        parse_test({"kind": "call", "fn": "a.b.c", "args": [], "expected": 1})


def test_each_call_gets_fresh_arguments(sandbox):
    program = "def f(xs):\n    xs.append(len(xs))\n    return xs\n"
    tests = tuple(CallTest("f", ([1],), [1, 1]) for _ in range(3))
    [result] = sandbox.run([Job(program, tests, limits=FAST)])
    assert result.status is Status.PASS, result


@pytest.mark.parametrize("program, verdict", [
    ("def f(x:\n    pass\n", Verdict.COMPILE_ERROR),
    ("raise ValueError('at import')\ndef f(x):\n    return x\n", Verdict.RUNTIME_ERROR),
    ("while True:\n    pass\n", Verdict.TIMEOUT),
    ("import sys\nsys.exit(0)\n", Verdict.FAIL),
])
def test_a_program_that_does_not_load_fails_every_call_test_alike(sandbox, program, verdict):
    [result] = sandbox.run([Job(program, calls(1, 2, 3), limits=FAST)])
    assert result.status is Status.FAIL
    assert {t.verdict for t in result.tests} == {verdict}, result
    assert all("did not load" in t.message for t in result.tests[1:])


FORGERS = {
    # an answer written while the program loads, before any test asked
    "an answer at import": "import os\nos.write(3, b'{\"event\": \"returned\", \"value\": 1}\\n')\n"
                           "def f(x):\n    return 0\n",
    # an answer for the next test written ahead of its request
    "an answer ahead of its turn": "import os\ndef f(x):\n"
                                   "    os.write(3, b'{\"event\": \"returned\", \"value\": 1, \"seq\": 99}\\n')\n"
                                   "    return 1\n",
}


@pytest.mark.parametrize("name", sorted(FORGERS))
def test_answers_the_harness_did_not_ask_for_fail(sandbox, name):
    [result] = sandbox.run([Job(FORGERS[name], calls(1, 2, 3, expected=[1, 1, 1]), limits=FAST)])
    assert result.status is Status.FAIL, result
    assert Verdict.PASS not in {t.verdict for t in result.tests[1:]}, result


@pytest.mark.parametrize("sabotage, status", [
    # the channel the tests come on: one at a time, so the next test finds no process to
    # answer it (its fail; the one after it gets a new process)
    ("import os\nos.close(4)\n", Status.FAIL),
    ("import os\nos.close(3)\n", Status.FAIL),  # the channel answers go on
    # the zygote: the program's process goes on (re-parented) and its answers are right
    ("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n", Status.PASS),
])
def test_a_program_that_breaks_its_channels_fails_it_is_never_an_infra_error(sandbox, sabotage, status):
    program = "def f(x):\n    if x == 2:\n" + "".join("        " + line + "\n" for line in sabotage.splitlines()) + \
              "    return x\n"
    [result] = sandbox.run([Job(program, calls(1, 2, 3, 4, expected=[1, 2, 3, 4]), limits=FAST)])
    assert result.status is status, result
    assert result.tests[0].verdict is Verdict.PASS
    [after] = sandbox.run([Job(COUNTER, calls(1, 2, expected=[1, 2]), limits=FAST)])
    assert after.status is Status.PASS, after


def test_checkers_record_jobs_and_mixed_kinds_keep_their_order(sandbox):
    checker = "def check(args, expected, output):\n    return output == args[0] * 2\n"
    program = "def f(x):\n    return 2 * x\n"
    tests = (CallTest("f", (1,), 2), ScriptTest("assert f(2) == 4"), CallTest("f", (3,), None, checker="double"),
             CallTest("f", (4,), 9))
    [result] = sandbox.run([Job(program, tests, limits=FAST, checkers={"double": checker})])
    assert verdicts(result) == ["pass", "pass", "pass", "fail"], result
    from grpo_code.sandbox.types import NO_VALUE
    record = Job(program, tuple(CallTest("f", (i,), NO_VALUE) for i in range(3)), limits=FAST, record=True)
    [recorded] = sandbox.run([record])
    assert [t.value for t in recorded.tests] == [0, 2, 4], recorded


def test_stop_on_failure_leaves_the_rest_not_run(sandbox):
    tests = calls(1, 2, 3, expected=[1, 5, 3])
    [result] = sandbox.run([Job(COUNTER, tests, limits=FAST, stop_on_failure=True)])
    assert verdicts(result) == ["pass", "fail", "not_run"]
    assert (result.passed, result.total, result.not_run) == (1, 3, 1)
    assert result.first_failure()[0] == 1


def test_stop_on_failure_sends_no_later_part(sandbox):
    big = "x" * (6 * 1024 * 1024)
    program = "def f(i):\n    return 'x' * (6 * 1024 * 1024) if i else 'y'\n"
    job = Job(program, tuple(CallTest("f", (i,), big) for i in range(4)), limits=FAST, stop_on_failure=True)
    assert len(split_wire(wire_for(job, sandbox.config))) > 1
    [result] = sandbox.run([job])
    assert verdicts(result) == ["fail", "not_run", "not_run", "not_run"], result
    assert result.not_run == 3


def test_a_large_answer_written_as_the_expected_value_passes_and_any_other_is_judged(sandbox):
    big = ["x" * 50, 1.5, {"$t": [1, 2]}] * 2000  # over the size judged in the executor at once
    program = ("def f(k):\n    row = ['x' * 50, 1.5, (1, 2)] * 2000\n"
               "    if k == 1:\n        row[-1] = (1, 3)\n"
               "    if k == 2:\n        row[-1] = [1, 2]\n"
               "    return row\n")
    tests = tuple(CallTest("f", (k,), big, compare="python") for k in range(3))
    [result] = sandbox.run([Job(program, tests, limits=FAST)])
    assert verdicts(result) == ["pass", "fail", "fail"], result


def test_large_expected_values_stay_on_the_host_unless_an_answer_needs_them(sandbox, monkeypatch):
    """A job is first sent with its large expected values held back (digests only): right
    answers pass on the digest. An answer that is not the value's exact bytes (equal by value,
    or wrong) is undecided there, and the job is sent again, whole, and judged as always."""
    sent: list[int] = []
    run = WorkerPool.run

    def spy(self, part, *args, **kwargs):
        sent.append(wire_size(part))
        return run(self, part, *args, **kwargs)

    monkeypatch.setattr(WorkerPool, "run", spy)
    big = list(range(20000))  # 109 KiB of JSON
    program = ("def f(k):\n    row = list(range(20000))\n"
               "    if k == 1:\n        row = [float(x) for x in row]\n"
               "    if k == 2:\n        row[-1] = -1\n    return row\n")
    [right] = sandbox.run([Job(program, (CallTest("f", (0,), big), CallTest("f", (0,), big)), limits=FAST)])
    assert verdicts(right) == ["pass", "pass"] and len(sent) == 1 and sent[0] < 4096, sent
    sent.clear()
    [mixed] = sandbox.run([Job(program, tuple(CallTest("f", (k,), big) for k in range(3)), limits=FAST)])
    assert verdicts(mixed) == ["pass", "pass", "fail"], mixed  # 1.0 == 1 under the default comparison
    assert len(sent) == 2 and sent[0] < 4096 < 3 * 100_000 < sent[1], sent
    assert "expected [0, 1, 2" in mixed.tests[2].message
    # A caller that waits for the whole job (sandbox serve, the http backend) allows for both sendings.
    wire = wire_for(Job(program, (CallTest("f", (0,), big),), limits=FAST), sandbox.config)
    assert total_deadline_s(wire) == 2 * job_deadline_s(wire)
    sent.clear()
    wrong_first = "def f(k):\n    print('ran', k)\n    return [] if k == 0 else list(range(20000))\n"
    [again] = sandbox.run([Job(wrong_first, tuple(CallTest("f", (k,), big) for k in range(3)), limits=FAST)])
    assert verdicts(again) == ["fail", "pass", "pass"] and len(sent) == 2, again  # every test judged, once whole


def test_a_large_right_answer_over_its_cpu_limit_is_a_timeout(sandbox):
    # Three processes burn 0.6 s of CPU each (1.8 s in all, against a 1 s limit) on a machine
    # with cores to spare, then return the right answer, large enough for the digest path.
    program = ("import os, time\n"
               "def _burn():\n    while time.process_time() < 0.6:\n        pass\n"
               "def f(n):\n    kids = []\n    for _ in range(2):\n        pid = os.fork()\n"
               "        if pid == 0:\n            _burn()\n            os._exit(0)\n        kids.append(pid)\n"
               "    _burn()\n    for k in kids:\n        os.waitpid(k, 0)\n    return list(range(n))\n")
    [result] = sandbox.run([Job(program, (CallTest("f", (20000,), list(range(20000))),), limits=FAST)])
    assert verdicts(result) == ["timeout"], result


@pytest.mark.docker
def test_threads_that_take_the_pids_do_not_turn_a_wrong_answer_into_an_infra_error(sandbox):
    if sandbox.config.backend != "docker":
        pytest.skip("the pids limit is the container's")
    program = ("import threading, time\n"
               "def _sleep():\n    time.sleep(30)\n"
               "def f(x):\n    threading.stack_size(65536)\n    try:\n        for _ in range(400):\n"
               "            threading.Thread(target=_sleep, daemon=True).start()\n    except BaseException:\n"
               "        pass\n    return list(range(20000)) if x else 1\n")
    checker = "def check(args, expected, output):\n    return output == 1\n"
    tests = (CallTest("f", (1,), [1, 2]), CallTest("f", (0,), None, checker="one"), CallTest("f", (1,), [1, 2]))
    [result] = sandbox.run([Job(program, tests, limits=FAST, checkers={"one": checker})])
    assert verdicts(result) == ["fail", "pass", "fail"], result


# Everything in the process that looks like a call request (the harness's frames, and every
# object the garbage collector tracks): a program that finds later tests' inputs could do
# their work ahead of them, on the clocks of cheap tests before a costly one.
PEEKER = """
import gc, sys

def f(x):
    seen = set()
    def take(value):
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, dict) and "seq" in item and "args" in item:
                seen.add(repr(item["args"]))
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            take(value)
        frame = frame.f_back
    for value in gc.get_objects():
        take(value)
    return sorted(seen)
"""


def test_the_call_process_holds_only_the_current_tests_input(sandbox):
    expected = [[repr([x])] for x in (1, 2, 3)]
    [result] = sandbox.run([Job(PEEKER, calls(1, 2, 3, expected=expected), limits=FAST)])
    assert result.status is Status.PASS, [t.why for t in result.tests]


def test_small_and_large_requests_alike(sandbox):
    # a request over calls.INLINE_REQUEST goes in a memory file, the others inline
    program = "def f(x):\n    return len(x)\n"
    sizes = [1, 40_000, 2, 100_000, 3]
    tests = tuple(CallTest(fn="f", args=(list(range(n)),), expected=n) for n in sizes)
    [result] = sandbox.run([Job(program, tests, limits=FAST)])
    assert result.status is Status.PASS, [t.why for t in result.tests]


def test_an_expected_value_too_large_to_send_is_decided_by_its_digest(monkeypatch):
    # A value over MAX_TEST_BYTES cannot be sent to judge an answer that is not its exact
    # encoding: that answer is a fail, never the infra_error a wrong program would escape to.
    # (The limits are made small here: 1 MiB a test, parts of 256 KiB.)
    from grpo_code.sandbox import node, wire

    monkeypatch.setattr(wire, "MAX_TEST_BYTES", 1 << 20)
    monkeypatch.setattr(node, "split_wire", lambda w: wire.split_wire(w, part_bytes=256 << 10))
    big = list(range(300_000))  # ~2 MiB of JSON
    tests = (CallTest("f", (1,), big), CallTest("f", (2,), 2))
    right = "def f(x):\n    return list(range(300_000)) if x == 1 else x\n"
    wrong = "def f(x):\n    return list(range(299_999)) if x == 1 else x\n"
    as_tuple = "def f(x):\n    return tuple(range(300_000)) if x == 1 else x\n"  # equal by value, not by encoding
    from grpo_code.config import SandboxConfig
    from grpo_code.sandbox import Sandbox

    with Sandbox(SandboxConfig(backend="local", workers=1, timeout_s=5.0, memory_mb=256), quiet=True) as sb:
        results = sb.run([Job(p, tests, limits=FAST) for p in (right, wrong, as_tuple)])
    assert results[0].status is Status.PASS, results[0]
    for result in results[1:]:
        assert result.status is Status.FAIL and result.tests[0].verdict is Verdict.FAIL, result
        assert "too large to send" in result.tests[0].message


def test_the_program_cannot_write_back_on_its_request_channel(sandbox):
    # What it sent there (memory files in flight) would wait in the executor's queue, where
    # killing the program frees nothing of it.
    program = ("import os, socket\n"
               "def f(x):\n"
               "    try:\n"
               "        socket.socket(fileno=os.dup(4)).send(b'x' * 1000, socket.MSG_NOSIGNAL)\n"
               "        return 'sent'\n"
               "    except OSError:\n"
               "        return 'refused'\n")
    [result] = sandbox.run([Job(program, (CallTest("f", (1,), "refused"),), limits=FAST)])
    assert result.status is Status.PASS, [t.why for t in result.tests]


def test_a_write_to_a_closed_pipe_raises_as_under_python3(sandbox):
    program = ("import os\n"
               "def f(x):\n"
               "    r, w = os.pipe()\n"
               "    os.close(r)\n"
               "    try:\n"
               "        os.write(w, b'x')\n"
               "    except BrokenPipeError:\n"
               "        return 'raised'\n"
               "    return 'written'\n")
    [result] = sandbox.run([Job(program, (CallTest("f", (1,), "raised"),), limits=FAST)])
    assert result.status is Status.PASS, [t.why for t in result.tests]
