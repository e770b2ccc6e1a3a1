"""The built wheel carries what the tool needs: every module, the bundled configs, suites
and sandbox definitions, the executor with its harnesses; and from the unpacked wheel,
outside the checkout, the bundled data resolves to the wheel's copy.
(scripts/wheel_check.sh installs the wheel in a fresh venv and runs the commands.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

from conftest import REPO

SOURCES = ("pyproject.toml", "README.md", "grpo_code", "configs", "tasks", "sandboxes")


def _repo_files(top: str) -> set[str]:
    return {
        p.relative_to(REPO / top).as_posix()
        for p in (REPO / top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def _build_isolation() -> list[str]:
    """Build with this environment's setuptools when it is new enough (pyproject.toml's
    build-system asks >= 77), else let pip fetch one."""
    try:
        return ["--no-build-isolation"] if int(version("setuptools").split(".")[0]) >= 77 else []
    except (PackageNotFoundError, ValueError):
        return []


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from a copy of the sources, so the build leaves nothing in the checkout (~3 s)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy(REPO / name, src / name)
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", *_build_isolation(), "-q", "-w", str(tmp)],
        capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "absent from the `packages` configuration" not in out.stderr
    (path,) = tmp.glob("grpo_code-*.whl")
    return path


@pytest.fixture(scope="module")
def names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        return set(z.namelist())


def test_wheel_carries_the_demo_suites_sandboxes_and_executor(names: set[str]) -> None:
    bundled = "grpo_code/_bundled/"
    assert bundled + "configs/demo.yaml" in names
    for suite in ("demo", "demo-js", "demo-cpp"):
        assert {bundled + f"tasks/{suite}/suite.yaml", bundled + f"tasks/{suite}/tasks.jsonl"} <= names
    for lang in ("python", "javascript", "cpp"):
        assert bundled + f"sandboxes/{lang}/Dockerfile" in names
    executor = "grpo_code/sandbox/executor/"
    assert {executor + "__init__.py", executor + "__main__.py", executor + "runners.py"} <= names
    assert {executor + "harness/cpp.hpp", executor + "harness/javascript.js"} <= names


def test_wheel_carries_every_file_of_the_package_and_the_bundled_directories(names: set[str]) -> None:
    expected = {"grpo_code/" + f for f in _repo_files("grpo_code")}
    for top in ("configs", "tasks", "sandboxes"):
        expected |= {f"grpo_code/_bundled/{top}/{f}" for f in _repo_files(top)}
    missing = sorted(expected - names)
    assert not missing, f"not in the wheel (pyproject.toml [tool.setuptools] packages/package-data): {missing}"


def test_unpacked_wheel_resolves_its_own_copy_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    code = (
        "from grpo_code import resources as r; from grpo_code.config import load_config;"
        "from grpo_code.tasks.suite import list_suites;"
        "print(r.package_dir()); print(r.source_checkout()); print(load_config().name);"
        "print(' '.join(p.name for p in list_suites())); print(r.sandbox_dir('cpp'))"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    pkg, checkout, name, suites, cpp = out.stdout.splitlines()
    assert pkg == str(site / "grpo_code") and checkout == "None"
    assert name == "demo" and suites.split() == ["demo", "demo-cpp", "demo-js"]
    assert cpp == str(site / "grpo_code" / "_bundled" / "sandboxes" / "cpp")
