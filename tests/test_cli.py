"""The CLI surface: help, version, the error boundary's exit codes and messages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from conftest import REPO
from grpo_code.cli import app
from grpo_code.cli.common import command
from grpo_code.errors import GrpoCodeError

runner = CliRunner()
COMMANDS = ["train", "eval", "tasks", "sandbox", "report", "config", "models"]


def test_help_lists_every_command() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert f" {name} " in result.stdout, name


def test_help_does_not_import_heavy_libraries() -> None:
    code = ("import sys; from grpo_code.cli import app; "
            "print(sorted(m for m in ('torch','transformers','trl','vllm','matplotlib','ray') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


def test_version() -> None:
    from grpo_code import __version__

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"grpo-code {__version__}"


def test_config_show_applies_overrides() -> None:
    result = runner.invoke(app, ["config", "show", str(REPO / "configs/demo.yaml"), "sandbox.workers=3"])
    assert result.exit_code == 0, result.output
    assert "  workers: 3\n" in result.stdout


def test_config_show_unknown_key_exits_2_naming_it() -> None:
    result = runner.invoke(app, ["config", "show", str(REPO / "configs/demo.yaml"), "sandbox.nope=1"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "sandbox.nope" in lines[0]
    assert result.stdout == ""


def test_config_show_missing_file() -> None:
    result = runner.invoke(app, ["config", "show", "nope.yaml"])
    assert result.exit_code == 2
    err = result.stderr.strip()
    assert err.startswith("error: config file 'nope.yaml' not found (looked in ") and err.count("\n") == 0
    assert str(REPO / "configs" / "nope.yaml") in err and "name a bundled config: demo" in err


def test_config_validate_reports_each_file(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("sandbox:\n  workers: -1\ntrain:\n  trl:\n    learnig_rate: 1.0e-5\n")
    result = runner.invoke(app, ["config", "validate", str(REPO / "configs/demo.yaml"), str(bad)])
    assert result.exit_code == 2
    assert "ok: " in result.stdout
    assert "sandbox.workers: -1 is too small" in result.stderr


def test_config_validate_names_unknown_trl_keys(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  trl:\n    learnig_rate: 1.0e-5\n")
    result = runner.invoke(app, ["config", "validate", str(bad)])
    assert result.exit_code == 2
    assert "train.trl.learnig_rate: unknown GRPOConfig option (did you mean 'learning_rate'?)" in result.stderr


def test_report_needs_a_directory() -> None:
    result = runner.invoke(app, ["report"])
    assert result.exit_code == 2 and "Missing argument" in result.output


def test_train_rejects_bad_config_before_anything_else() -> None:
    result = runner.invoke(app, ["train", str(REPO / "configs/demo.yaml"), "sandbox.workers=x"])
    assert result.exit_code == 2 and "sandbox.workers" in result.stderr


@pytest.mark.parametrize("args", [
    ["train"], ["config", "show"], ["eval", "smollm2-135m-instruct"], ["eval", "--samples", "s.jsonl"],
    ["tasks", "list"], ["tasks", "show", "demo"], ["tasks", "show", "demo", "demo/001-add"], ["tasks", "check", "demo"],
])
def test_every_command_with_a_config_takes_positional_overrides(args: list[str]) -> None:
    """One override syntax: a positional key=value, checked before anything else runs."""
    result = runner.invoke(app, [*args, "sandbox.nope=1"])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and "sandbox.nope: unknown key" in result.stderr


USER_ERRORS = {
    # command: (arguments, what the one line must say); files named here do not exist.
    "train --resume": (["train", "--resume", "{tmp}/no-run"], "no-run"),
    "eval --samples": (["eval", "--samples", "{tmp}/missing.jsonl", "--tasks", "demo"], "missing.jsonl"),
    "eval --k": (["eval", "--samples", "{tmp}/missing.jsonl", "--k", "one"], "--k"),
    "tasks show": (["tasks", "show", "no-such-suite"], "no-such-suite"),
    "tasks convert": (["tasks", "convert", "humaneval", "{tmp}/missing.jsonl", "{tmp}/out"], "missing.jsonl"),
    "tasks check": (["tasks", "check", "no-such-suite"], "no-such-suite"),
    "sandbox exec": (["sandbox", "exec", "{tmp}/missing-job.json"], "missing-job.json"),
    "sandbox exec (bad job)": (["sandbox", "exec", "{tmp}/bad-job.json"], "program"),
    "sandbox build": (["sandbox", "build", "--lang", "cobol"], "cobol"),
    "sandbox serve": (["sandbox", "serve", "--token-file", "{tmp}/missing-token"], "missing-token"),
    "report": (["report", "{tmp}/no-dir"], "no-dir"),
    "config show": (["config", "show", "{tmp}/missing.yaml"], "missing.yaml"),
    "config validate": (["config", "validate", "--no-trl", "{tmp}/bad.yaml"], "sandbox.workers"),
    "models pull": (["models", "pull", "no-such-model", "--source", "pypi"], "no-such-model"),
}


@pytest.mark.parametrize("name", sorted(USER_ERRORS))
def test_each_command_s_common_user_error_exits_2_with_one_line(name: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPO_CODE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "bad-job.json").write_text('{"tests": [{"kind": "call", "fn": "f", "args": []}]}')
    (tmp_path / "bad.yaml").write_text("sandbox:\n  workers: 0\n")
    args, said = USER_ERRORS[name]
    result = runner.invoke(app, [a.replace("{tmp}", str(tmp_path)) for a in args])
    assert result.exit_code == 2, (name, result.output)
    lines = result.stderr.splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and said in errors[0], (name, result.stderr)


def test_eval_has_no_set_option() -> None:
    result = runner.invoke(app, ["eval", "--set", "sandbox.workers=2"])
    assert result.exit_code == 2 and "No such option: --set" in result.output


# The boundary itself, on a throwaway app so each error class is exercised.
probe = typer.Typer()


@command(probe, "user")
def _user() -> None:
    raise GrpoCodeError("no Docker engine answers", "start dockerd or use sandbox.backend=local")


@command(probe, "bug")
def _bug() -> None:
    raise RuntimeError("boom")


@command(probe, "ok")
def _ok() -> None:
    typer.echo("fine")


def test_boundary_user_error_is_one_line_exit_2() -> None:
    result = runner.invoke(probe, ["user"])
    assert result.exit_code == 2
    assert result.stderr == "error: no Docker engine answers (start dockerd or use sandbox.backend=local)\n"


def test_boundary_bug_exits_1_without_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRPO_CODE_DEBUG", raising=False)
    result = runner.invoke(probe, ["bug"])
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert result.stderr.startswith("error: unexpected RuntimeError: boom (this is a bug; rerun with GRPO_CODE_DEBUG=1")


def test_boundary_debug_shows_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRPO_CODE_DEBUG", "1")
    result = runner.invoke(probe, ["user"])
    assert isinstance(result.exception, GrpoCodeError)  # re-raised, so the traceback prints


def test_console_script_error_exit_codes() -> None:
    exe = REPO / ".venv" / "bin" / "grpo-code"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "grpo_code"]
    out = subprocess.run([*cmd, "config", "show", "configs/demo.yaml", "sandbox.nope=1"], capture_output=True,
                         text=True, cwd=REPO)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "sandbox.nope" in out.stderr
    out = subprocess.run([*cmd, "config", "show", "configs/demo.yaml"], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0 and out.stdout.startswith("name: demo")


def test_after_an_error_what_vllm_or_triton_print_at_exit_goes_to_the_cache_log(tmp_path: Path) -> None:
    # A command that fails with triton loaded: its leak report must not follow the error line.
    script = (
        "import atexit, sys, types\n"
        "import typer\n"
        "from grpo_code.cli.common import guarded\n"
        "from grpo_code.errors import GrpoCodeError\n"
        "sys.modules['triton'] = types.ModuleType('triton')\n"
        "atexit.register(lambda: print('nanobind: leaked 3 instances!', file=sys.stderr))\n"
        "def fails():\n"
        "    raise GrpoCodeError('the run cannot start', 'fix the config')\n"
        "try:\n"
        "    guarded(fails)()\n"
        "except typer.Exit as exc:\n"
        "    sys.exit(exc.exit_code)\n"
    )
    env = {**os.environ, "GRPO_CODE_CACHE": str(tmp_path)}
    env.pop("GRPO_CODE_DEBUG", None)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("error: the run cannot start")
    assert "nanobind" not in done.stderr
    assert (tmp_path / "logs" / "exit.log").read_text() == "nanobind: leaked 3 instances!\n"


def test_what_libraries_print_at_exit_goes_to_the_run_log_not_after_the_summary(tmp_path: Path) -> None:
    # As after `grpo-code train`'s summary: a library's atexit report (nanobind's leak list).
    script = (
        "import atexit, sys\n"
        "from pathlib import Path\n"
        "from grpo_code.cli.common import quiet_exit\n"
        "atexit.register(lambda: print('nanobind: leaked 3 instances!', file=sys.stderr))\n"
        "print('evaluate it: grpo-code eval runs/x/final')\n"
        f"quiet_exit(Path({str(tmp_path / 'exit.log')!r}))\n"
        "print('engine shutdown')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.splitlines()[-1] == "evaluate it: grpo-code eval runs/x/final"
    assert "nanobind" not in done.stderr
    assert (tmp_path / "exit.log").read_text() == "engine shutdown\nnanobind: leaked 3 instances!\n"
    # Under a test runner's swapped streams nothing changes.
    from grpo_code.cli.common import quiet_exit

    quiet_exit(tmp_path / "other.log")
    assert not (tmp_path / "other.log").exists()
