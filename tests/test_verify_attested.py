"""The attestation rule: a pass of a test judged inside the program's process (``attested:
false``) is a fail for the reward and for eval unless ``rewards.tests.trust_unattested``,
applied by the verifier once for every path, with the store keeping the raw result."""

from __future__ import annotations

import logging
from concurrent.futures import Future

from grpo_code.config import RewardsConfig, RewardTestsConfig, SandboxConfig
from grpo_code.evaluate.execute import eval_verifier
from grpo_code.rewards import reward_of, reward_verifier
from grpo_code.rewards.functions import Scored
from grpo_code.rewards.metrics import batch_metrics
from grpo_code.sandbox.fingerprint import sandbox_fingerprint
from grpo_code.sandbox.types import Job, Result, ScriptTest, Status, TestResult, Verdict
from grpo_code.tasks import Task
from grpo_code.verify.attested import UNATTESTED_MESSAGE, attested_only, unattested_passes

P, F = Verdict.PASS, Verdict.FAIL


def _result(*tests: tuple[Verdict, bool]) -> Result:
    items = tuple(TestResult(v, attested=a) for v, a in tests)
    passed = sum(t.verdict is P for t in items)
    return Result(Status.PASS if passed == len(items) else Status.FAIL, passed, len(items), items)


def test_attested_only_turns_each_unattested_pass_into_a_fail():
    raw = _result((P, True), (P, False), (F, False))
    assert unattested_passes(raw) == 1
    ruled = attested_only(raw)
    assert [t.verdict for t in ruled.tests] == [P, F, F]
    assert ruled.tests[1].message == UNATTESTED_MESSAGE and not ruled.tests[1].attested
    assert (ruled.status, ruled.passed, ruled.total) == (Status.FAIL, 1, 3)
    clean = _result((P, True), (F, True))
    assert attested_only(clean) is clean
    assert attested_only(None) is None
    infra = Result.infra_error(2, "gone")
    assert attested_only(infra) is infra


class _Sandbox:
    """Every job passes every test, each marked as ``attested`` says."""

    def __init__(self, attested: bool):
        self.config = SandboxConfig(backend="local")
        self.attested = attested
        self.runs = 0

    def fingerprint(self, language: str) -> str:
        return sandbox_fingerprint("local:fake", language, self.config)

    def submit(self, job: Job) -> Future:
        self.runs += 1
        future: Future = Future()
        future.set_result(_result(*[(P, self.attested)] * len(job.tests)))
        return future


def _task() -> Task:
    return Task("js/1", "write f", (ScriptTest("console.assert(f() === 1)"),) * 2, language="javascript",
                entry_point="f")


ANSWER = "```javascript\nfunction f() { return 1; }\n```"


def test_reward_of_an_unattested_pass_is_zero_unless_trusted(caplog):
    task = _task()
    for trust, reward in ((False, 0.0), (True, 1.0)):
        cfg = RewardsConfig(tests=RewardTestsConfig(trust_unattested=trust))
        verifier = reward_verifier(cfg, _Sandbox(attested=False), [task])
        with caplog.at_level(logging.WARNING, logger="grpo_code.verify.verifier"):
            caplog.clear()
            judged = [verifier.judged(verifier.submit(task, ANSWER, "chat")) for _ in range(3)]
        assert [reward_of(j, task, cfg) for j in judged] == [reward] * 3
        assert all(j.passed is trust for j in judged)
        warned = [r for r in caplog.records if "trust_unattested" in r.getMessage()]
        # One warning per verifier, naming the task and the key; none when trusted.
        assert len(warned) == (0 if trust else 1)
        assert verifier.unattested == (0 if trust else 3)
        metrics = batch_metrics([Scored(j, reward_of(j, task, cfg)) for j in judged])
        assert metrics["tests/unattested"] == 1.0


def test_attested_passes_are_untouched():
    task = _task()
    cfg = RewardsConfig()
    verifier = reward_verifier(cfg, _Sandbox(attested=True), [task])
    judged = verifier.judged(verifier.submit(task, ANSWER, "chat"))
    assert judged.passed and reward_of(judged, task, cfg) == 1.0
    assert verifier.unattested == 0


def test_the_store_keeps_the_raw_result_and_eval_never_trusts():
    task = _task()
    sandbox = _Sandbox(attested=False)
    cfg = RewardsConfig(tests=RewardTestsConfig(trust_unattested=True))
    verifier = reward_verifier(cfg, sandbox, [task])
    first = verifier.judged(verifier.submit(task, ANSWER, "chat"))
    # A stored verdict is the sandbox's own: the rule is applied on the way out, every time.
    verifier.trust_unattested = False
    second = verifier.judged(verifier.submit(task, ANSWER, "chat"))
    assert sandbox.runs == 1 and second.source == "cache"
    assert first.passed and not second.passed
    ev = eval_verifier([task], _Sandbox(attested=False))
    judged = ev.judged(ev.submit(task, ANSWER, "chat"))
    assert judged.status == "fail" and not judged.passed


def test_tasks_check_counts_unattested_tests_and_tasks():
    from grpo_code.verify.check import CheckReport, TaskCheck

    checks = [TaskCheck("a", "reference", [_result((P, False), (P, False))]),
              TaskCheck("b", "reference", [_result((P, True))]),
              TaskCheck("c", "reference", [_result((P, True), (F, False))])]
    summary = CheckReport("s", "h", 3, 1, {"reference": checks}, []).summary()["reference"]
    assert summary["unattested_tests"] == 3 and summary["unattested_tasks"] == ["a", "c"]
    # tasks check reads raw results: a reference that passes unattested still passes there
    assert "a" not in summary["failed"]


def test_script_tasks_are_known_before_anything_runs():
    from grpo_code.sandbox.types import CallTest
    from grpo_code.verify.attested import script_tasks

    native = Task("cpp/1", "p", (ScriptTest("int main() { assert(f() == 1); }"),), language="cpp")
    declared = Task("cpp/2", "p", (ScriptTest("int main() { assert(f() == 1); }"),), language="cpp",
                    helpers="int f();\n")  # the prompt's prototype: a judge of its own
    judged = _task()  # a JavaScript script test runs in a judge of its own
    called = Task("js/2", "p", (CallTest("f", (), 1),), language="javascript")
    python = Task("py/1", "p", (ScriptTest("assert f() == 1"),))
    assert script_tasks([native, declared, judged, called, python]) == ["cpp/1"]


def test_a_solutions_file_is_judged_as_eval_judges_it(tmp_path):
    import json

    from grpo_code.verify.check import check_suite
    from grpo_code.tasks.suite import suite_from_records

    record = {"id": "js/1", "prompt": "write f", "language": "javascript", "entry_point": "f",
              "tests": [{"kind": "script", "code": "console.assert(f() === 1)"}],
              "reference": "function f() { return 1; }"}
    suite = suite_from_records("s", [record], "s")
    sandbox = _Sandbox(attested=False)
    report = check_suite(suite, sandbox, "reference").summary()["reference"]
    assert report["passed"] == 1 and report["unattested_tasks"] == ["js/1"]  # the suite is healthy, and says so
    samples = tmp_path / "samples.jsonl"
    samples.write_text(json.dumps({"task_id": "js/1", "solution": "function f() { return 1; }"}) + "\n")
    report = check_suite(suite, sandbox, str(samples)).summary()["file"]
    assert report["failed"] == ["js/1"] and "trust_unattested" in report["failures"]["js/1"]


def test_tasks_check_names_the_unattested_tasks_and_the_key(tmp_path):
    import json
    import shutil

    from typer.testing import CliRunner

    from conftest import need
    from grpo_code.cli import app

    need(shutil.which("g++") is not None, "g++ is not installed on this machine", required_in_ci=False)
    (tmp_path / "suite.yaml").write_text("name: tiny\nlanguage: cpp\n")
    # A C++ script test runs its asserts next to the program (JavaScript's have a judge).
    task = {"id": "tiny/1", "prompt": "write f", "language": "cpp", "entry_point": "f",
            "tests": [{"kind": "script", "code": "#include <cassert>\nint main() { assert(f() == 1); }\n"},
                      {"kind": "call", "fn": "f", "args": [], "expected": 1}],
            "reference": "int f() { return 1; }"}
    (tmp_path / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    result = CliRunner().invoke(app, ["tasks", "check", str(tmp_path), "--backend", "local", "--workers", "1"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "unattested: 1 of 1 tasks" in text and "rewards.tests.trust_unattested" in text and "tiny/1" in text
