"""Where grpo-code keeps what it caches: models, rootfs tarballs, oracles, ONNX exports.

One rule for every cache: ``$GRPO_CODE_CACHE``, else ``~/.cache/grpo-code``. Callers add
their own subdirectory (``cache_dir() / "models"``).
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Root of everything grpo-code caches (``$GRPO_CODE_CACHE`` or ``~/.cache/grpo-code``)."""
    root = os.environ.get("GRPO_CODE_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "grpo-code"
