"""`grpo-code sandbox ...` through Typer's CliRunner: exit codes, messages, JSON output."""

from __future__ import annotations

import json
import os

import pytest
import sandbox_cases as cases
from typer.testing import CliRunner

from grpo_code.cli import app
from grpo_code.sandbox import Result, Status

runner = CliRunner()


def output_of(result) -> str:
    return result.output + (getattr(result, "stderr", "") or "")


@pytest.fixture
def mixed_job_file(tmp_path):
    path = tmp_path / "job.json"
    path.write_text(cases.MIXED.to_json())
    return path


def test_exec_mixed_job_local(mixed_job_file):
    result = runner.invoke(app, ["sandbox", "exec", str(mixed_job_file), "--backend", "local"])
    assert result.exit_code == 0, output_of(result)
    data = json.loads(result.stdout)
    assert set(data) == {"status", "passed", "total", "tests", "duration_ms", "error"}
    cases.check_mixed(Result.from_dict(data))
    assert "NOT a security boundary" in result.stderr


def test_exec_a_list_of_jobs_prints_a_list(tmp_path):
    path = tmp_path / "jobs.json"
    good = cases.script(cases.ADD, "assert add(1, 2) == 3").to_dict()
    bad = cases.script(cases.ADD, "assert add(1, 2) == 0").to_dict()
    path.write_text(json.dumps([good, bad]))
    result = runner.invoke(app, ["sandbox", "exec", str(path), "--backend", "local", "--workers", "2"])
    assert result.exit_code == 0, output_of(result)
    statuses = [Result.from_dict(r).status for r in json.loads(result.stdout)]
    assert statuses == [Status.PASS, Status.FAIL]


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"program": "x = 1", "tests": []}), "tests"),
        (json.dumps({"program": "x = 1", "tests": [{"kind": "nope"}]}), "tests[0].kind"),
        (json.dumps([{"program": 1, "tests": [{"kind": "script", "code": ""}]}]), "job 0"),
    ],
)
def test_exec_bad_job_file_exits_2_with_one_error_line(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    result = runner.invoke(app, ["sandbox", "exec", str(path), "--backend", "local"])
    assert result.exit_code == 2, output_of(result)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert "Traceback" not in output_of(result)


def test_exec_missing_file_and_bad_backend(tmp_path, mixed_job_file):
    result = runner.invoke(app, ["sandbox", "exec", str(tmp_path / "missing.json")])
    assert result.exit_code == 2 and "error:" in result.stderr and "not found" in result.stderr
    result = runner.invoke(app, ["sandbox", "exec", str(mixed_job_file), "--backend", "magic"])
    assert result.exit_code == 2 and "sandbox.backend" in result.stderr


def test_doctor_local_reports_and_self_tests():
    result = runner.invoke(app, ["sandbox", "doctor", "--backend", "local"])
    assert result.exit_code == 0, output_of(result)
    for word in (
        "backend",
        "local",
        "limits",
        "timeout_s=",
        "pass",
        "timeout",
        "memory",
        "network",
        "sandbox OK",
    ):
        assert word in result.stdout, word


@pytest.mark.docker
def test_exec_mixed_job_docker(mixed_job_file, docker_ready):
    result = runner.invoke(app, ["sandbox", "exec", str(mixed_job_file), "--backend", "docker"])
    assert result.exit_code == 0, output_of(result)
    cases.check_mixed(Result.from_json(result.stdout))


@pytest.mark.docker
def test_doctor_docker(docker_ready):
    result = runner.invoke(app, ["sandbox", "doctor", "--backend", "docker"])
    assert result.exit_code == 0, output_of(result)
    assert "network blocked" in result.stdout and "FAILED" not in result.stdout


@pytest.mark.docker
def test_build_is_idempotent_and_fast_when_up_to_date(docker_ready):
    import subprocess
    import time

    from grpo_code.sandbox.docker_backend import DEFAULT_IMAGES, image_id

    tag = f"grpo-code-sandbox-test:{os.getpid()}"
    args = ["sandbox", "build", "--base-image", DEFAULT_IMAGES["python"], "--tag", tag]
    try:
        first = runner.invoke(app, args)
        assert first.exit_code == 0, output_of(first)
        assert first.stdout.strip() == tag and image_id(tag)
        start = time.monotonic()
        again = runner.invoke(app, args)
        assert again.exit_code == 0 and "up to date" in again.stderr, output_of(again)
        assert time.monotonic() - start < 5.0
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


@pytest.mark.docker
def test_bench_json_shape(docker_ready):
    from grpo_code.sandbox.bench import default_data

    if default_data() is None:
        pytest.skip("HumanEval data not available")
    args = ["sandbox", "bench", "--json", "--repeat", "1", "--limit", "12", "--docker-run-samples", "2"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, output_of(result)
    data = json.loads(result.stdout)
    assert data["backend"] == "docker"
    assert set(data) == {
        "backend",
        "samples",
        "ours_per_s",
        "ratio_vs_mp",
        "ratio_vs_docker_run",
        "ratio_vs_fork",
        "wrong_verdicts",
    }
    assert set(data["wrong_verdicts"]) == {"ours", "mp", "docker_run", "fork"}
    assert data["samples"] == 12 and data["wrong_verdicts"]["ours"] == 0 and data["ours_per_s"] > 0
