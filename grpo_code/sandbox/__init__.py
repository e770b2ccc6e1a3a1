"""The sandbox: run untrusted programs against unit tests and return attested verdicts.

Stages: :mod:`~grpo_code.sandbox.types` (jobs) and :mod:`.results`, :mod:`.wire` (a job as
the executor receives it), :mod:`.executor` (the warm in-sandbox harness, stdlib only),
:mod:`.worker` and :mod:`.pool` (warm executors with retry and replacement),
:mod:`.docker_backend` (containers) on :mod:`.engine` (the Docker SDK) / :mod:`.local_backend`,
:mod:`.node` (one machine's pools) / :mod:`.ray_backend` (jobs spread over a Ray cluster),
:mod:`.api` (``Sandbox``), :mod:`.fingerprint` (what produced a verdict), :mod:`.image`
(building the images), :mod:`.doctor` and :mod:`.bench`.
See docs/sandbox.md.
"""

from grpo_code.sandbox.api import Sandbox
from grpo_code.sandbox.fingerprint import harness_fingerprint, sandbox_fingerprint
from grpo_code.sandbox.node import resolve_backend
from grpo_code.sandbox.types import (
    CallTest,
    IoTest,
    Job,
    Limits,
    LimitsError,
    Result,
    ScriptTest,
    Status,
    TestCase,
    TestResult,
    Verdict,
    load_jobs,
)

__all__ = [
    "CallTest",
    "IoTest",
    "Job",
    "Limits",
    "LimitsError",
    "Result",
    "Sandbox",
    "ScriptTest",
    "Status",
    "TestCase",
    "TestResult",
    "Verdict",
    "harness_fingerprint",
    "load_jobs",
    "resolve_backend",
    "sandbox_fingerprint",
]
