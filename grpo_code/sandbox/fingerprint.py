"""Fingerprints: what produced a stored verdict, so a stored verdict is reused only under it.

A verdict depends on more than the program and its tests: the image it ran in (the docker
image, or the host Python of the local backend), the in-sandbox runtime (executor,
language runners, harnesses) and the limits a job inherits from the sandbox config.
:func:`sandbox_fingerprint` hashes all three; it is what ``Sandbox.fingerprint(language)``
returns and what the reward cache and an eval's ``results.jsonl`` are keyed by, so after an
image rebuild, a harness fix or a limit change verdicts are executed again instead of
reused. :func:`harness_fingerprint` is its part without the image (the runtime and limits).
"""

from __future__ import annotations

import hashlib
import json

from grpo_code.config import SandboxConfig
from grpo_code.sandbox import image

LIMIT_FIELDS = ("timeout_s", "memory_mb", "max_output_kb", "file_size_mb", "compile_timeout_s",
                "compile_memory_mb", "pids_limit", "tmpfs_mb")
"""The ``SandboxConfig`` fields that can change a verdict (a job's own limits override the
first ones, but its defaults still come from here). ``workers``, ``container_max_jobs``,
``pin_cpus`` (a test's time is CPU time and waiting for a CPU is not charged, so one CPU or
many give the same verdict) and the backend only change how fast verdicts come; the image is keyed by its identity.
``max_job_output_kb`` only cuts the output a result keeps, after its verdicts are decided
(executor/kept.py), so it is not here; ``record_output_kb`` changes only record jobs'
verdicts, and their wire limits (hence any key hashed from them) carry it."""


def _digest(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def harness_fingerprint(language: str, config: SandboxConfig) -> str:
    """Short hex digest of (runtime hash, language, the config's default limits)."""
    return _digest({
        "executor": image.executor_hash(),
        "language": language,
        "limits": {name: getattr(config, name) for name in LIMIT_FIELDS},
    })


def sandbox_fingerprint(image_identity: str, language: str, config: SandboxConfig) -> str:
    """Short hex digest of (the image's identity, :func:`harness_fingerprint`).

    ``image_identity`` is a docker image id, ``local:<python>:<version>`` for the local
    backend, or what a Ray cluster's nodes run (``Sandbox.fingerprint`` finds it)."""
    return _digest({"image": image_identity, "harness": harness_fingerprint(language, config)})
