"""The sandbox: run untrusted programs against unit tests and return attested verdicts.

Stages: :mod:`~grpo_code.sandbox.types` (jobs and results), :mod:`.executor` (the warm
in-sandbox harness, stdlib only), :mod:`.worker` and :mod:`.pool` (warm executors with
retry and replacement), :mod:`.docker_backend` / :mod:`.local_backend` / :mod:`.ray_backend`
(jobs spread over a Ray cluster), :mod:`.api` (``Sandbox``), :mod:`.image` (building the
images), :mod:`.doctor` and :mod:`.bench`.
See docs/sandbox.md.
"""

from grpo_code.sandbox.api import Sandbox, resolve_backend
from grpo_code.sandbox.fingerprint import harness_fingerprint
from grpo_code.sandbox.types import (
    CallTest,
    IoTest,
    Job,
    Limits,
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
]
