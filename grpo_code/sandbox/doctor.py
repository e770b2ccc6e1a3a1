"""``grpo-code sandbox doctor``: what backend would run, with which limits, and does it work.

:func:`diagnose` reports the resolved backend, the Docker engine, the sandbox images and the
limits, then runs a short self-test through the real backend: a passing test, a failing
test, an infinite loop (``timeout``), a memory bomb (``memory``), and a network check (no
interface but loopback, connections fail). Network isolation is only expected from the
docker backend; the local backend reports it as not isolated.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from grpo_code.config import SandboxConfig
from grpo_code.errors import GrpoCodeError
from grpo_code.sandbox import docker_backend
from grpo_code.sandbox import engine as docker_engine
from grpo_code.sandbox.languages import FACTS
from grpo_code.sandbox.types import Job, Limits, ScriptTest, Verdict

NETWORK_PROGRAM = """\
import socket
names = [name for _, name in socket.if_nameindex()]
blocked = names == ["lo"]
if blocked:  # with loopback only, this cannot leave the sandbox; it must fail at once
    try:
        socket.create_connection(("192.0.2.1", 9), timeout=0.5).close()
        blocked = False
    except OSError:
        pass
"""

SELF_TESTS: list[tuple[str, Job, Verdict]] = [
    ("pass", Job("def add(a, b):\n    return a + b\n", (ScriptTest("assert add(1, 2) == 3"),)), Verdict.PASS),
    ("fail", Job("def add(a, b):\n    return a - b\n", (ScriptTest("assert add(1, 2) == 3"),)), Verdict.FAIL),
    (
        "timeout",
        Job("while True:\n    pass\n", (ScriptTest(""),), limits=Limits(timeout_s=1.0)),
        Verdict.TIMEOUT,
    ),
    (
        "memory",
        Job("x = bytearray(1 << 40)\n", (ScriptTest(""),), limits=Limits(memory_mb=128)),
        Verdict.MEMORY,
    ),
    ("network blocked", Job(NETWORK_PROGRAM, (ScriptTest("assert blocked, names"),)), Verdict.PASS),
    # The packages datasets assume (languages.py, modules): a correct reference that imports
    # one must not fail for its absence.
    ("packages", Job("".join(f"import {m}\n" for m in FACTS["python"].modules), (ScriptTest(""),)), Verdict.PASS),
]


@dataclass
class Check:
    name: str
    expected: str
    got: str
    ok: bool
    ms: float = 0.0
    note: str = ""


@dataclass
class DoctorReport:
    backend: str | None
    engine: str | None
    channel: str
    images: dict[str, dict[str, Any]]
    limits: dict[str, Any]
    checks: list[Check] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and all(c.ok for c in self.checks)


def diagnose(config: SandboxConfig | None = None, run_self_test: bool = True) -> DoctorReport:
    """Collect the doctor's report (never raises for sandbox problems: they go in ``error``)."""
    from grpo_code.sandbox.api import Sandbox, resolve_backend
    from grpo_code.sandbox.image import EXECUTOR_LABEL, default_image, executor_hash
    from grpo_code.sandbox.types import LANGUAGES

    cfg = config or SandboxConfig()
    engine = docker_engine.engine_version()
    images: dict[str, dict[str, Any]] = {}
    if engine:
        for language in LANGUAGES:  # each language has its own image; only python is self-tested
            name = default_image(cfg, language)
            present = docker_engine.image_id(name) is not None
            try:
                current = present and docker_engine.image_label(name, EXECUTOR_LABEL) == executor_hash()
            except GrpoCodeError:  # the engine failed between two calls: reported as not current
                current = False
            images[language] = {"image": name, "present": present, "up_to_date": bool(current)}
    limits = {
        "workers": cfg.workers or "cpu count",
        "timeout_s": cfg.timeout_s,
        "memory_mb": cfg.memory_mb,
        "max_output_kb": cfg.max_output_kb,
        "file_size_mb": cfg.file_size_mb,
        "pids_limit": cfg.pids_limit,
        "tmpfs_mb": cfg.tmpfs_mb,
        "container_max_jobs": cfg.container_max_jobs,
    }
    report = DoctorReport(None, engine, docker_backend.channel_mode(), images, limits)
    try:
        report.backend = resolve_backend(cfg)
    except GrpoCodeError as exc:
        report.error = str(exc)
        return report
    if not run_self_test:
        return report
    try:
        with Sandbox(cfg) as sandbox:
            t0 = time.perf_counter()
            sandbox.start()
            report.limits["startup_s"] = round(time.perf_counter() - t0, 2)
            results = sandbox.run([job for _, job, _ in SELF_TESTS])
    except GrpoCodeError as exc:
        report.error = str(exc)
        return report
    for (name, _, expected), result in zip(SELF_TESTS, results):
        got = result.tests[0].verdict.value if result.tests else f"infra_error: {result.error}"
        ok = got == expected.value
        note = ""
        if name == "network blocked" and report.backend == "local":
            ok, note = True, "not isolated: the local backend is not a security boundary"
        elif name == "packages" and report.backend == "local" and not ok:
            ok, note = True, f"the host's Python lacks one of {', '.join(FACTS['python'].modules)}"
        elif name == "packages":
            note = ", ".join(FACTS["python"].modules)
        elif not ok and result.tests:
            note = result.tests[0].message[-200:]
        report.checks.append(Check(name, expected.value, got, ok, result.duration_ms, note))
    return report
