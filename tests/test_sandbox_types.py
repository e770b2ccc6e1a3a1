"""Job/result types and the harness's pure comparison helpers (no processes, no Docker)."""

from __future__ import annotations

import json

import pytest

from grpo_code.errors import SandboxError
from grpo_code.sandbox.types import (
    CallTest,
    IoTest,
    Job,
    Limits,
    Result,
    ScriptTest,
    Status,
    TestResult,
    Verdict,
    load_jobs,
)
from grpo_code.sandbox.wire import job_deadline_s, wire_job

ISSUE_JOB = {
    "language": "python",
    "program": "def add(a, b):\n    return a + b\n",
    "tests": [
        {"kind": "script", "code": "assert add(1, 2) == 3"},
        {"kind": "io", "stdin": "1 2\n", "stdout": "3\n"},
        {"kind": "call", "fn": "add", "args": [1, 2], "expected": 3},
    ],
    "limits": {"timeout_s": 5, "memory_mb": 512},
}


def test_job_round_trips_the_issue_format():
    job = Job.from_dict(ISSUE_JOB)
    assert isinstance(job.tests[0], ScriptTest)
    assert isinstance(job.tests[1], IoTest) and job.tests[1].compare == "lines"
    assert isinstance(job.tests[2], CallTest) and job.tests[2].args == (1, 2)
    assert job.limits == Limits(timeout_s=5.0, memory_mb=512)
    assert job.to_dict() == ISSUE_JOB
    assert Job.from_json(job.to_json()) == job
    assert job == Job.from_dict(json.loads(json.dumps(ISSUE_JOB)))


def test_io_options_round_trip():
    data = {"kind": "io", "stdin": "", "stdout": "1.0\n", "compare": "tokens", "float_tol": 1e-6}
    job = Job.from_dict({"program": "print(1)", "tests": [data]})
    assert job.tests[0] == IoTest("", "1.0\n", "tokens", float_tol=1e-6)
    assert job.to_dict()["tests"] == [data]
    assert job.to_dict()["language"] == "python" and "limits" not in job.to_dict()


def test_result_round_trips_with_exact_keys():
    result = Result(
        Status.FAIL,
        1,
        2,
        (TestResult(Verdict.PASS, 1.5), TestResult(Verdict.TIMEOUT, 1000.0, "out", "err", "killed")),
        1002.0,
        None,
    )
    data = result.to_dict()
    assert set(data) == {"status", "passed", "total", "tests", "duration_ms", "error"}
    assert set(data["tests"][0]) == {"verdict", "duration_ms", "cpu_ms", "stdout", "stderr", "message", "attested"}
    assert data["status"] == "fail" and data["tests"][1]["verdict"] == "timeout" and data["error"] is None
    assert Result.from_json(result.to_json()) == result
    assert result.pass_fraction == 0.5


def test_infra_error_is_masked_not_zero():
    result = Result.infra_error(3, "container died twice")
    assert result.to_dict() == {
        "status": "infra_error",
        "passed": 0,
        "total": 3,
        "tests": [],
        "duration_ms": 0.0,
        "error": "container died twice",
    }
    assert result.pass_fraction is None


def test_verdict_and_status_values_are_the_documented_ones():
    assert {v.value for v in Verdict} == {
        "pass",
        "fail",
        "timeout",
        "memory",
        "runtime_error",
        "compile_error",
        "output_limit",
        "not_run",
    }
    assert {s.value for s in Status} == {"pass", "fail", "infra_error"}


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda j: j.pop("program"), "program"),
        (lambda j: j.update(tests=[]), "tests"),
        (lambda j: j.update(language="cobol"), "language"),
        (lambda j: j["tests"].append({"kind": "magic"}), "tests[3].kind"),
        (lambda j: j["tests"].append({"kind": "script"}), "tests[3].code"),
        (lambda j: j["tests"].append({"kind": "call", "fn": "add", "args": [1]}), "tests[3] has no expected value"),
        (lambda j: j["tests"].append({"kind": "call", "fn": "1x", "expected": 1}), "tests[3].fn"),
        (lambda j: j["tests"].append({"kind": "io", "stdout": "", "compare": "fuzzy"}), "tests[3].compare"),
        (lambda j: j["tests"].append({"kind": "script", "code": "", "stdin": ""}), "unknown keys"),
        (lambda j: j.update(limits={"timeout_s": -1}), "limits.timeout_s"),
        (lambda j: j.update(limits={"memory_mb": 1.5}), "limits.memory_mb"),
        (lambda j: j.update(limits={"cpu": 1}), "limits"),
        (lambda j: j.update(extra=1), "unknown keys"),
    ],
)
def test_bad_jobs_name_the_field(mutate, field):
    data = json.loads(json.dumps(ISSUE_JOB))
    mutate(data)
    with pytest.raises(SandboxError) as err:
        Job.from_dict(data)
    assert field in str(err.value)
    assert "docs/sandbox.md" in str(err.value)


def test_load_jobs_accepts_one_or_many_and_names_the_bad_one():
    assert len(load_jobs(json.dumps(ISSUE_JOB))) == 1
    assert len(load_jobs(json.dumps([ISSUE_JOB, ISSUE_JOB]))) == 2
    with pytest.raises(SandboxError, match="job 1: bad job: program"):
        load_jobs(json.dumps([ISSUE_JOB, {"tests": ISSUE_JOB["tests"]}]), "jobs.json")
    with pytest.raises(SandboxError, match="not valid JSON"):
        load_jobs("{nope", "jobs.json")
    with pytest.raises(SandboxError, match="empty"):
        load_jobs("[]")


def test_wire_job_resolves_limits_against_the_config():
    job = Job("pass", (ScriptTest(""),), limits=Limits(memory_mb=64))
    wire = wire_job(job, timeout_s=3.0, memory_mb=512, max_output_bytes=1024, file_size_mb=4)
    assert wire["limits"] == {"timeout_s": 3.0, "memory_mb": 64, "max_output_bytes": 1024, "file_size_mb": 4,
                              "max_job_output_bytes": 1024 * 1024}
    assert job_deadline_s(wire) > 3.0 + 1.0


# --------------------------------------------------------------------------- harness helpers




# --------------------------------------------------------------------------- limits: one reading


BAD_LIMITS = {
    "negative": {"timeout_s": -1},
    "zero": {"timeout_s": 0},
    "too long": {"timeout_s": 601},
    "not a number": {"timeout_s": "5"},
    "a bool": {"memory_mb": True},
    "a float": {"memory_mb": 1.5},
    "too small": {"memory_mb": 8},
    "unknown key": {"timeout_s": 1, "cpu": 2},
    "not an object": "fast",
}


@pytest.mark.parametrize("limits", BAD_LIMITS.values(), ids=BAD_LIMITS.keys())
def test_bad_limits_are_refused_the_same_way_by_a_job_a_task_line_and_a_suite(tmp_path, limits):
    from grpo_code.errors import SuiteError
    from grpo_code.sandbox.types import LimitsError
    from grpo_code.tasks.suite import load_suite_dir

    with pytest.raises(LimitsError) as refused:
        Limits.from_dict(limits)
    reason = str(refused.value)  # e.g. "limits.timeout_s: -1 must be seconds in (0, 600]"
    assert reason.startswith("limits")

    job = {**ISSUE_JOB, "limits": limits}
    with pytest.raises(SandboxError) as by_job:
        load_jobs(json.dumps(job), "jobs.json")
    assert str(by_job.value.what) == f"jobs.json: bad job: {reason}"

    task = {"id": "x/1", "prompt": "Write add.", "tests": [{"kind": "script", "code": "assert add(1, 2) == 3"}],
            "limits": limits}
    line = tmp_path / "line"
    line.mkdir()
    (line / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    with pytest.raises(SuiteError) as by_task:
        load_suite_dir(line)
    assert by_task.value.what == f"{line / 'tasks.jsonl'}:1: {reason}"

    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "suite.yaml").write_text(f"name: s\nlimits: {json.dumps(limits)}\n")
    (suite / "tasks.jsonl").write_text(json.dumps({**task, "limits": {}}) + "\n")
    with pytest.raises(SuiteError) as by_suite:
        load_suite_dir(suite)
    assert by_suite.value.what == f"{suite / 'suite.yaml'}: {reason}"


def test_good_limits_read_alike_and_a_task_overrides_its_suite_per_field():
    assert Limits.from_dict(None) == Limits.from_dict({}) == Limits()
    assert Limits.from_dict({"timeout_s": 2, "memory_mb": 64}) == Limits(2.0, 64)
    assert Limits(timeout_s=1.0).over(Limits(7.0, 256)) == Limits(1.0, 256)
