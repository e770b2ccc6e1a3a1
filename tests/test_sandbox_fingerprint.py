"""The harness fingerprint moves with the sandbox runtime, the language and every limit,
and with nothing that only changes speed."""

from __future__ import annotations

import dataclasses

import pytest

from grpo_code.config import SandboxConfig
from grpo_code.sandbox import image
from grpo_code.sandbox.fingerprint import LIMIT_FIELDS, harness_fingerprint

SB = SandboxConfig()
LIMITS = ["timeout_s", "memory_mb", "max_output_kb", "file_size_mb", "compile_timeout_s", "compile_memory_mb",
          "pids_limit", "tmpfs_mb"]


def test_fingerprint_is_short_hex_and_deterministic() -> None:
    fingerprint = harness_fingerprint("python", SB)
    assert len(fingerprint) == 16 and int(fingerprint, 16) >= 0
    assert harness_fingerprint("python", SandboxConfig()) == fingerprint


def test_a_change_to_the_sandbox_runtime_moves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    before = harness_fingerprint("python", SB)
    monkeypatch.setattr(image, "executor_hash", lambda: "0" * 16)
    assert harness_fingerprint("python", SB) != before


def test_the_language_moves_it() -> None:
    assert harness_fingerprint("cpp", SB) != harness_fingerprint("python", SB)


@pytest.mark.parametrize("name", LIMITS)
def test_every_limit_moves_it(name: str) -> None:
    changed = dataclasses.replace(SB, **{name: getattr(SB, name) * 2})
    assert harness_fingerprint("python", changed) != harness_fingerprint("python", SB)


def test_settings_that_only_change_speed_keep_it() -> None:
    changed = dataclasses.replace(SB, backend="docker", workers=7, container_max_jobs=3)
    assert harness_fingerprint("python", changed) == harness_fingerprint("python", SB)


def test_every_sandbox_setting_is_classified() -> None:
    # A new SandboxConfig field fails here until someone decides whether it can change a verdict.
    speed_or_keyed_elsewhere = {"backend", "workers", "image", "container_max_jobs", "ray"}
    assert {f.name for f in dataclasses.fields(SandboxConfig)} == set(LIMIT_FIELDS) | speed_or_keyed_elsewhere
    assert set(LIMIT_FIELDS) == set(LIMITS)
