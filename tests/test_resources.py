"""Bundled configs, suites and sandbox definitions: found in the checkout and in a wheel's
layout; a missing one is an error naming where it looked, never a silent default."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import REPO
from grpo_code import resources
from grpo_code.cli import app
from grpo_code.config import load_config
from grpo_code.errors import MissingFileError, SandboxError, SuiteError
from grpo_code.tasks.suite import list_suites, load_suite

runner = CliRunner()


def test_checkout_resolves_to_the_top_level_directories() -> None:
    assert resources.source_checkout() == REPO
    for kind in resources.KINDS:
        assert resources.bundled_dir(kind) == REPO / kind
    assert resources.config("demo") == REPO / "configs" / "demo.yaml"
    assert resources.config("accelerate/zero3.yaml") == REPO / "configs" / "accelerate" / "zero3.yaml"
    assert resources.sandbox_dir("cpp") == REPO / "sandboxes" / "cpp"
    assert "demo" in resources.config_names() and "accelerate/ddp" not in resources.config_names()


def test_configs_suites_and_sandboxes_are_found_by_name() -> None:
    assert {p.name for p in list_suites()} >= {"demo", "demo-js", "demo-cpp"}
    assert load_suite("demo-js").language == "javascript"
    assert load_config().name == "demo"
    assert load_config("qwen-coder-1.5b-vllm").name == load_config(REPO / "configs/qwen-coder-1.5b-vllm.yaml").name
    with pytest.raises(SandboxError, match=r"no sandbox image definition for language 'cobol'.*known languages: cpp, javascript, python"):
        resources.sandbox_dir("cobol")


def _wheel_layout(tmp_path: Path) -> Path:
    """A package directory as a wheel installs it: no pyproject.toml above, data in _bundled/."""
    pkg = tmp_path / "site-packages" / "grpo_code"
    for kind in resources.KINDS:
        (pkg / "_bundled" / kind).mkdir(parents=True)
    (pkg / "_bundled" / "configs" / "demo.yaml").write_text("name: wheel-demo\n")
    suite = pkg / "_bundled" / "tasks" / "only"
    suite.mkdir()
    for name in ("suite.yaml", "tasks.jsonl"):
        (suite / name).write_bytes((REPO / "tasks" / "demo" / name).read_bytes())
    (pkg / "_bundled" / "sandboxes" / "python").mkdir()
    (pkg / "_bundled" / "sandboxes" / "python" / "Dockerfile").write_text("FROM scratch\n")
    return pkg


def test_an_installed_wheel_resolves_its_bundled_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = _wheel_layout(tmp_path)
    monkeypatch.setattr(resources, "package_dir", lambda: pkg)
    assert resources.source_checkout() is None
    assert resources.bundled_dir("tasks") == pkg / "_bundled" / "tasks"
    assert load_config().name == "wheel-demo"
    assert [p.name for p in list_suites()] == ["only"]
    assert resources.sandbox_dir("python") == pkg / "_bundled" / "sandboxes" / "python"


def test_a_foreign_pyproject_above_the_package_is_not_a_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = _wheel_layout(tmp_path)
    (pkg.parent / "pyproject.toml").write_text('[project]\nname = "something-else"\n')
    monkeypatch.setattr(resources, "package_dir", lambda: pkg)
    assert resources.source_checkout() is None
    assert resources.candidates("configs") == [pkg / "_bundled" / "configs"]


def test_missing_bundled_data_is_an_error_naming_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "site-packages" / "grpo_code"
    pkg.mkdir(parents=True)
    monkeypatch.setattr(resources, "package_dir", lambda: pkg)
    where = str(pkg / "_bundled")
    with pytest.raises(MissingFileError, match="no bundled config 'demo'") as exc:
        load_config()  # never the built-in defaults
    assert str(pkg / "_bundled" / "configs" / "demo.yaml") in str(exc.value)
    with pytest.raises(MissingFileError, match="bundled task suites are missing") as exc:
        list_suites()
    assert where in str(exc.value)
    with pytest.raises(MissingFileError, match="bundled sandbox image definitions are missing"):
        resources.sandbox_dir("python")

    result = runner.invoke(app, ["config", "show"])
    assert result.exit_code == 2 and result.stdout == ""
    assert f"no bundled config 'demo' (looked in {pkg / '_bundled' / 'configs' / 'demo.yaml'})" in result.stderr
    result = runner.invoke(app, ["tasks", "list"])
    assert result.exit_code == 2 and where in result.stderr


def test_unknown_suite_and_config_name_the_places_looked_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SuiteError, match=r"unknown suite 'nope' \(bundled/configured: demo.*; looked in .*tasks"):
        load_suite("nope")
    with pytest.raises(MissingFileError) as exc:
        load_config("configs/demo.yaml")  # a checkout-relative path, outside the checkout
    assert str(tmp_path / "configs" / "demo.yaml") in str(exc.value) and "name a bundled config: demo" in str(exc.value)
