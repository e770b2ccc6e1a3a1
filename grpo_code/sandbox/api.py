"""The Python API of the sandbox: ``Sandbox(config).run(jobs) -> results``.

One :class:`Sandbox` runs jobs for every caller (training and eval) on the configured
backend: this machine's pools (:class:`~grpo_code.sandbox.node.NodeSandbox`, ``docker`` or
``local``) or a Ray cluster's (:class:`~grpo_code.sandbox.ray_backend.RayPool`). ``run``
blocks, ``arun`` awaits, ``submit`` returns a future so scoring can start while the rest of
a batch is still being generated. At most ``sandbox.workers`` jobs run at once per
language; the pools start lazily on the first job and stop on ``close()``, at the end of a
``with`` block, or at interpreter exit (SIGTERM included). ``fingerprint(language)`` names
what produces the verdicts, for keys of stored verdicts (the reward cache, eval resume)::

    from grpo_code.sandbox import Job, Sandbox, ScriptTest
    with Sandbox() as sb:
        [result] = sb.run([Job("def f(): return 1", [ScriptTest("assert f() == 1")])])
        result.status, result.pass_fraction
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

from grpo_code.config import SandboxConfig
from grpo_code.errors import SandboxError
from grpo_code.sandbox.http_backend import HttpPool
from grpo_code.sandbox.node import BACKENDS, NodeSandbox, resolve_backend
from grpo_code.sandbox.ray_backend import RayPool
from grpo_code.sandbox.types import Job, Result

__all__ = ["BACKENDS", "Sandbox", "resolve_backend"]


class Sandbox:
    """Runs jobs on the configured backend with bounded concurrency. Thread-safe."""

    def __init__(self, config: SandboxConfig | None = None, backend: str | None = None, quiet: bool = False):
        self.config = config or SandboxConfig()
        if backend is not None:
            self.config = dataclasses.replace(self.config, backend=backend)
        self.workers = self.config.workers or os.cpu_count() or 1
        self._quiet = quiet
        self._lock = threading.Lock()
        self._runner: NodeSandbox | RayPool | HttpPool | None = None
        self._backend: str | None = None
        self._fingerprints: dict[str, str] = {}
        self._closed = False

    # ----------------------------------------------------------------- lifecycle

    @property
    def backend(self) -> str:
        """The resolved backend name (``docker``, ``local`` or ``ray``); resolves it on first use."""
        if self._backend is None:
            self._ensure()
        assert self._backend is not None
        return self._backend

    def _ensure(self, language: str = "python") -> NodeSandbox | RayPool | HttpPool:
        with self._lock:
            if self._closed:
                raise SandboxError("the sandbox is closed", "create a new Sandbox")
            if self._runner is None:
                # One backend per sandbox, resolved for the first language it is asked for.
                backend = resolve_backend(self.config, language)
                if backend == "ray":  # actors on the cluster's nodes run NodeSandboxes
                    self._runner = RayPool(self.config)
                elif backend == "http":  # a `grpo-code sandbox serve` elsewhere
                    self._runner = HttpPool(self.config, self.workers)
                else:
                    self._runner = NodeSandbox(self.config, backend, self.workers, self._quiet)
                self._backend = backend
            return self._runner

    def start(self, language: str = "python") -> Sandbox:
        """Start every worker of a language now (otherwise they start with the first jobs)."""
        self._ensure(language).start(language)
        return self

    def close(self) -> None:
        """Stop the workers and remove their containers / temp dirs. Idempotent."""
        with self._lock:
            self._closed = True
            runner, self._runner = self._runner, None
        if runner is not None:
            runner.shutdown()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def worker_names(self) -> list[str]:
        """Names of the live workers (docker: container names; ray: actors), for diagnostics."""
        runner = self._runner
        return runner.worker_names() if runner is not None else []

    @property
    def stats(self) -> dict[str, int]:
        """Counters of the pools (summed over languages) or of the Ray actors."""
        runner = self._runner
        return dict(runner.stats) if runner is not None else {}

    def fingerprint(self, language: str = "python") -> str:
        """What produces this sandbox's verdicts for ``language``: the image's identity (docker
        image id; ``local:<python>:<version>``; on Ray, what the actors' nodes run), the
        harness version and the default limits (:mod:`~grpo_code.sandbox.fingerprint`).
        Stored verdicts are keyed by it. Computed once per language."""
        with self._lock:
            found = self._fingerprints.get(language)
        if found is None:
            found = self._ensure(language).fingerprint(language)
            with self._lock:
                found = self._fingerprints.setdefault(language, found)
        return found

    # ----------------------------------------------------------------- jobs

    def submit(self, job: Job | dict[str, Any]) -> Future[Result]:
        """Queue one job; the future resolves to its :class:`Result`."""
        if isinstance(job, dict):
            job = Job.from_dict(job)
        return self._ensure(job.language).submit(job)

    def run(self, jobs: Iterable[Job | dict[str, Any]]) -> list[Result]:
        """Run jobs (at most ``workers`` at once) and return their results in order."""
        futures = [self.submit(job) for job in jobs]
        return [f.result() for f in futures]
