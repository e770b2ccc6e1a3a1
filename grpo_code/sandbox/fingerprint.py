"""The harness fingerprint: which harness, under which limits, produced a stored verdict.

A verdict depends on more than the program and its tests: the in-sandbox runtime
(executor, language runners, harnesses) and the limits a job inherits from the sandbox
config decide it too. Stored verdicts (the reward cache, an eval's ``results.jsonl``) are
keyed by this fingerprint, so after a harness fix or a limit change they are executed
again instead of reused.
"""

from __future__ import annotations

import hashlib
import json

from grpo_code.config import SandboxConfig
from grpo_code.sandbox import image

LIMIT_FIELDS = ("timeout_s", "memory_mb", "max_output_kb", "file_size_mb", "compile_timeout_s",
                "compile_memory_mb", "pids_limit", "tmpfs_mb")
"""The ``SandboxConfig`` fields that can change a verdict (a job's own limits override the
first ones, but its defaults still come from here). ``workers``, ``container_max_jobs``
and the backend only change how fast verdicts come; the image is keyed by its id."""


def harness_fingerprint(language: str, config: SandboxConfig) -> str:
    """Short hex digest of (runtime hash, language, the config's default limits)."""
    payload = {
        "executor": image.executor_hash(),
        "language": language,
        "limits": {name: getattr(config, name) for name in LIMIT_FIELDS},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
