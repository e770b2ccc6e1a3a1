"""The local backend: the same executor as a plain host subprocess. NOT a security boundary.

For machines without Docker (laptops, CI without an engine). Verdicts, limits and
attestation are the same as in a container, but the program runs as your user on your
machine: it can read your files and reach the network. Every use prints a warning.
"""

from __future__ import annotations

import functools
import shutil
import sys
import tempfile
from pathlib import Path

from grpo_code.errors import SandboxError
from grpo_code.sandbox.worker import Worker, WorkerLost, subprocess_worker

EXECUTOR = Path(__file__).resolve().parent / "executor" / "__main__.py"
WARNING = (
    "sandbox backend 'local' runs untrusted code directly on this machine: it is NOT a security "
    "boundary (use the docker backend for isolation; `grpo-code sandbox build --bootstrap`)"
)


def check_tools(language: str) -> None:
    """Raise a SandboxError when the host lacks what the language's runner executes."""
    from grpo_code.sandbox.executor.runners import RUNNERS

    missing = RUNNERS[language].missing_tools()
    if missing:
        raise SandboxError(
            f"the local backend needs {', '.join(missing)} on PATH to run {language} jobs",
            f"install it, or use the docker backend (`grpo-code sandbox build --lang {language} --bootstrap`)",
        )


def warn_local() -> None:
    """Print the not-a-security-boundary warning on stderr."""
    print(f"warning: {WARNING}", file=sys.stderr, flush=True)


class LocalFactory:
    """Makes local workers: ``python -I executor/__main__.py`` in a private temp work dir each."""

    def __call__(self, index: int) -> Worker:
        workdir = tempfile.mkdtemp(prefix="grpo-code-sbx-")
        argv = [sys.executable, "-I", str(EXECUTOR), "--workdir", workdir, "--remove-workdir"]
        remove = functools.partial(shutil.rmtree, workdir, ignore_errors=True)
        try:
            return subprocess_worker(argv, f"local-{index}", start_timeout_s=30.0, after=remove)
        except (OSError, WorkerLost) as exc:
            remove()
            raise WorkerLost(f"cannot start the local executor: {exc}") from None
