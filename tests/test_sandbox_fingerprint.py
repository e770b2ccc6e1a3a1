"""The harness fingerprint moves with the sandbox runtime, the language and every limit,
and with nothing that only changes speed; the sandbox fingerprint adds the image's identity,
and each backend names its own (what the reward cache and eval resume key on)."""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import grpo_code
from grpo_code.config import SandboxConfig
from grpo_code.sandbox import Sandbox, image
from grpo_code.sandbox.fingerprint import LIMIT_FIELDS, harness_fingerprint, sandbox_fingerprint

SB = SandboxConfig()
PACKAGE = Path(grpo_code.__file__).resolve().parent
LIMITS = ["timeout_s", "memory_mb", "max_output_kb", "file_size_mb", "compile_timeout_s", "compile_memory_mb",
          "pids_limit", "tmpfs_mb"]


def test_fingerprint_is_short_hex_and_deterministic() -> None:
    fingerprint = harness_fingerprint("python", SB)
    assert re.fullmatch(r"[0-9a-f]{16}", fingerprint), fingerprint
    assert harness_fingerprint("javascript", SB) != fingerprint
    assert harness_fingerprint("python", SandboxConfig()) == fingerprint


def test_a_change_to_the_sandbox_runtime_moves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    before = harness_fingerprint("python", SB)
    monkeypatch.setattr(image, "executor_hash", lambda: "0" * 16)
    assert harness_fingerprint("python", SB) != before


HASH = "from grpo_code.sandbox.image import executor_hash; print(executor_hash())"


def copy_hash(tmp_path: Path, edit: str | None = None) -> str:
    """``executor_hash()`` of a copy of the package, with ``edit`` (a module path inside
    it) changed as a developer would change it."""
    copy = tmp_path / "copy"
    shutil.copytree(PACKAGE, copy / "grpo_code", ignore=shutil.ignore_patterns("__pycache__"))
    if edit is not None:
        target = copy / "grpo_code" / edit
        target.write_text(target.read_text() + "\n# a host-side change\nEDITED = True\n")
    out = subprocess.run([sys.executable, "-c", HASH], cwd=copy, env={**os.environ, "PYTHONPATH": str(copy)},
                         capture_output=True, text=True, check=True)
    shutil.rmtree(copy)
    return out.stdout.strip()


@pytest.mark.parametrize("host_only", ["sandbox/languages.py", "sandbox/values.py", "sandbox/wire.py",
                                       "sandbox/types.py", "tasks/evalplus.py"])
def test_editing_host_only_code_keeps_the_executor_hash(tmp_path: Path, host_only: str) -> None:
    """Host-only modules live outside the folder the image hash covers: editing one leaves
    the image, the fingerprint and every stored verdict valid. Editing the executor moves it."""
    assert copy_hash(tmp_path) == image.executor_hash()
    assert copy_hash(tmp_path, host_only) == image.executor_hash()
    assert copy_hash(tmp_path, "sandbox/executor/codec.py") != image.executor_hash()


def test_the_language_moves_it() -> None:
    assert harness_fingerprint("cpp", SB) != harness_fingerprint("python", SB)


@pytest.mark.parametrize("name", LIMITS)
def test_every_limit_moves_it(name: str) -> None:
    changed = dataclasses.replace(SB, **{name: getattr(SB, name) * 2})
    assert harness_fingerprint("python", changed) != harness_fingerprint("python", SB)


def test_settings_that_only_change_speed_keep_it() -> None:
    changed = dataclasses.replace(SB, backend="docker", workers=7, container_max_jobs=3, pin_cpus=False)
    assert harness_fingerprint("python", changed) == harness_fingerprint("python", SB)


def test_every_sandbox_setting_is_classified() -> None:
    # A new SandboxConfig field fails here until someone decides whether it can change a verdict.
    # url/token_file: where the http backend's server is; its fingerprint is the server's own.
    # max_job_output_kb: cuts the output a result keeps, after its verdicts (executor/kept.py).
    # record_output_kb: only record jobs' verdicts, and it is in their wire limits (wire.py).
    speed_or_keyed_elsewhere = {"backend", "workers", "image", "container_max_jobs", "pin_cpus", "ray", "url",
                                "token_file", "max_job_output_kb", "record_output_kb"}
    assert {f.name for f in dataclasses.fields(SandboxConfig)} == set(LIMIT_FIELDS) | speed_or_keyed_elsewhere
    assert set(LIMIT_FIELDS) == set(LIMITS)


# --------------------------------------------------------------------------- the sandbox names itself


def test_the_sandbox_fingerprint_moves_with_the_image_and_the_harness(monkeypatch: pytest.MonkeyPatch) -> None:
    base = sandbox_fingerprint("sha256:a", "python", SB)
    assert len(base) == 16 and sandbox_fingerprint("sha256:a", "python", SandboxConfig()) == base
    assert sandbox_fingerprint("sha256:b", "python", SB) != base
    assert sandbox_fingerprint("sha256:a", "cpp", SB) != base
    assert sandbox_fingerprint("sha256:a", "python", dataclasses.replace(SB, timeout_s=1.0)) != base
    monkeypatch.setattr(image, "executor_hash", lambda: "0" * 16)
    assert sandbox_fingerprint("sha256:a", "python", SB) != base


def test_a_local_sandbox_names_the_host_python_once_per_language(monkeypatch: pytest.MonkeyPatch) -> None:
    with Sandbox(SB, backend="local", quiet=True) as sb:
        expected = sandbox_fingerprint(f"local:{sys.executable}:{sys.version.split()[0]}", "python", sb.config)
        assert sb.fingerprint("python") == expected
        assert sb.fingerprint("javascript") != expected
        monkeypatch.setattr(image, "executor_hash", lambda: "0" * 16)
        assert sb.fingerprint("python") == expected  # memoized: the runtime does not change under a sandbox
        assert sb.worker_names() == [] and sb.stats == {}  # naming itself starts nothing


def test_a_docker_sandbox_names_its_image_by_id(monkeypatch: pytest.MonkeyPatch) -> None:
    from grpo_code.sandbox import engine

    monkeypatch.setattr(engine, "image_id", lambda name: f"sha256:id-of-{name}")
    with Sandbox(dataclasses.replace(SB, image="my-python:1"), backend="docker") as sb:
        assert sb.fingerprint("python") == sandbox_fingerprint("sha256:id-of-my-python:1", "python", sb.config)
        assert sb.fingerprint("cpp") == sandbox_fingerprint(
            "sha256:id-of-grpo-code-sandbox-cpp:latest", "cpp", sb.config)


FORBIDDEN = {"docker_backend", "local_backend", "ray_backend", "pool", "worker", "image", "engine", "node"}


def test_stored_verdicts_reach_the_sandbox_only_through_its_interface() -> None:
    """The reward cache and eval resume key on ``Sandbox.fingerprint``, not on the backends."""
    package = Path(grpo_code.__file__).parent
    files = [*sorted((package / "rewards").rglob("*.py")), *sorted(package.glob("evaluate*.py")),
             *sorted((package / "evaluate").rglob("*.py"))]
    assert files
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[:2] == ["grpo_code", "sandbox"] and len(parts) > 2:
                    assert parts[2] not in FORBIDDEN, f"{path.relative_to(package)} imports {name}"
