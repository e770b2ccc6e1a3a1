"""The local backend: the real executor as a host subprocess (verdicts, limits, reward hacks).

Isolation cases (network, filesystem, fork bombs) do not apply here: the local backend is
not a security boundary. They are in test_sandbox_docker.py.
"""

from __future__ import annotations

import asyncio
import glob
import os
import sys
import tempfile
import threading
import time

import pytest
import sandbox_cases as cases

from grpo_code.config import SandboxConfig
from grpo_code.errors import SandboxError
from grpo_code.sandbox import IoTest, Job, Sandbox, ScriptTest, Status, Verdict


@pytest.fixture(scope="module")
def sandbox():
    sb = Sandbox(SandboxConfig(backend="local", workers=2, timeout_s=5.0, memory_mb=256))
    yield sb
    sb.close()


def test_mixed_script_io_call_verdicts(sandbox):
    [result] = sandbox.run([cases.MIXED])
    cases.check_mixed(result)
    assert sandbox.backend == "local"


def test_each_test_has_its_own_verdict(sandbox):
    [result] = sandbox.run([cases.INDEPENDENT])
    assert [t.verdict.value for t in result.tests] == cases.INDEPENDENT_VERDICTS, result
    assert "ValueError: boom" in result.tests[1].message


def test_compile_error_is_reported_per_test(sandbox):
    [result] = sandbox.run([cases.COMPILE_ERROR])
    assert [t.verdict for t in result.tests] == [Verdict.COMPILE_ERROR] * 2
    assert "SyntaxError" in result.tests[0].message


@pytest.mark.parametrize("name", sorted(cases.HACKS))
def test_reward_hacks_and_runaways_never_pass(sandbox, name):
    cases.check_hack(sandbox, name)


def test_comparison_guard_keeps_legitimate_comparisons(sandbox):
    [result] = sandbox.run([cases.LEGIT_COMPARISONS])
    assert result.status is Status.PASS, result


def test_huge_stdout_is_truncated_without_hanging(sandbox):
    start = time.monotonic()
    [result] = sandbox.run([cases.HUGE_STDOUT])
    assert time.monotonic() - start < 3.0
    out = result.tests[0].stdout
    assert result.tests[0].verdict is Verdict.PASS
    assert len(out) < sandbox.config.max_output_kb * 1024 + 100
    assert out.startswith("xxxx") and "truncated" in out


def test_io_comparison_modes(sandbox):
    job = Job(
        "print('%.7f' % (1 / 3))\nprint('  done  ')\n",
        (
            IoTest("", "0.333333333\ndone\n", "tokens", float_tol=1e-6),
            IoTest("", "0.333333333\ndone\n", "tokens"),
            IoTest("", "0.3333333\n  done\n"),
            IoTest("", "0.3333333\n  done  \n", "exact"),
            IoTest("", "0.3333333\n  done\n", "exact"),
        ),
    )
    [result] = sandbox.run([job])
    assert [t.verdict.value for t in result.tests] == ["pass", "fail", "pass", "pass", "fail"]


def test_io_program_that_crashes_after_correct_output_is_an_error(sandbox):
    job = Job("print(3)\nraise RuntimeError('late')\n", (IoTest("", "3\n"),))
    [result] = sandbox.run([job])
    assert result.tests[0].verdict is Verdict.RUNTIME_ERROR
    assert "late" in result.tests[0].message


def test_background_process_is_killed_with_the_job(sandbox):
    [result] = sandbox.run([cases.script(cases.BACKGROUND, "assert True")])
    assert result.status is Status.PASS, result
    pid = int(result.tests[0].stdout.split()[0])
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail(f"background process {pid} survived its job")


def test_killing_the_executor_is_the_programs_verdict_and_the_pool_recovers(sandbox):
    # Not PID 1 here, so the program can kill its executor: on every attempt, so it is the
    # program's doing (runtime_error), not an infra error it could hide behind.
    [result] = sandbox.run([cases.KILL_EXECUTOR])
    assert result.status is Status.FAIL, result
    assert result.tests[0].verdict is Verdict.RUNTIME_ERROR, result
    assert "killed the sandbox's executor" in result.tests[0].message
    [after] = sandbox.run([cases.script(cases.ADD, "assert add(2, 2) == 4")])
    assert after.status is Status.PASS


def test_concurrent_callers_threads_and_async(sandbox):
    jobs = [cases.script(cases.ADD, f"assert add({i}, 1) == {i + 1}") for i in range(12)]
    bad = [cases.script(cases.ADD, f"assert add({i}, 1) == {i}") for i in range(12)]
    out: dict[str, list] = {}

    def worker(key, batch):
        out[key] = sandbox.run(batch)

    threads = [threading.Thread(target=worker, args=(k, b)) for k, b in (("good", jobs), ("bad", bad))]
    for t in threads:
        t.start()
    async def awaited() -> list:  # from async code: the futures wrapped, the event loop not blocked
        return list(await asyncio.gather(*(asyncio.wrap_future(sandbox.submit(job)) for job in jobs[:4])))

    async_results = asyncio.run(awaited())
    for t in threads:
        t.join()
    assert all(r.status is Status.PASS for r in out["good"] + async_results)
    assert all(r.status is Status.FAIL for r in out["bad"])


def test_work_dir_is_wiped_between_jobs():
    with Sandbox(SandboxConfig(backend="local", workers=1)) as sb:
        write = cases.script("open('left-behind.txt', 'w').write('secret')\n", "assert True")
        read = cases.script("import os\nleft = os.listdir('.')\n", "assert left == [], left")
        results = sb.run([write, read])
    assert [r.status for r in results] == [Status.PASS, Status.PASS], results


def test_local_backend_warns_and_cleans_up(capfd):
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "grpo-code-sbx-*")))
    sb = Sandbox(SandboxConfig(backend="local", workers=2))
    sb.run([cases.script(cases.ADD, "assert add(1, 1) == 2")] * 3)
    created = set(glob.glob(os.path.join(tempfile.gettempdir(), "grpo-code-sbx-*"))) - before
    assert created, "the local workers should have private work dirs"
    sb.close()
    assert "NOT a security boundary" in capfd.readouterr().err
    time.sleep(0.2)
    assert not (created & set(glob.glob(os.path.join(tempfile.gettempdir(), "grpo-code-sbx-*"))))
    with pytest.raises(SandboxError, match="closed"):
        sb.run([cases.script(cases.ADD)])


def test_ray_backend_without_ray_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(SandboxError, match=r"needs Ray.*grpo-code\[ray\]"):
        Sandbox(SandboxConfig(backend="ray")).run([Job("pass", (ScriptTest(""),))])


@pytest.mark.parametrize("name", sorted(cases.SECRET_HACKS))
def test_no_secret_is_reachable_from_the_program(sandbox, name):
    job = cases.on_this_host(cases.SECRET_HACKS[name][0])
    if job is None:
        pytest.skip("signals every process: docker backend only")
    cases.check_secret_hack(sandbox, name, job)


def test_module_semantics_of_function_tests(sandbox):
    cases.check_module_semantics(sandbox)


def test_a_test_catches_the_programs_exceptions_as_in_one_process(sandbox):
    cases.check_caught_exceptions(sandbox)

