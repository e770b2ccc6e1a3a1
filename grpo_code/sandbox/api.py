"""The Python API of the sandbox: ``Sandbox(config).run(jobs) -> results``.

One :class:`Sandbox` owns one worker pool per language, shared by every caller (training and eval):
``run`` blocks, ``arun`` awaits, ``submit`` returns a future so scoring can start while
the rest of a batch is still being generated. At most ``sandbox.workers`` jobs run at
once; the pool starts lazily on the first job and stops on ``close()``, at the end of a
``with`` block, or at interpreter exit (SIGTERM included)::

    from grpo_code.sandbox import Job, Sandbox, ScriptTest
    with Sandbox() as sb:
        [result] = sb.run([Job("def f(): return 1", [ScriptTest("assert f() == 1")])])
        result.status, result.pass_fraction
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from grpo_code.config import SandboxConfig
from grpo_code.errors import SandboxError
from grpo_code.sandbox import docker_backend, local_backend
from grpo_code.sandbox.executor.runners import RUNNERS
from grpo_code.sandbox.pool import WorkerPool, shutdown_all
from grpo_code.sandbox.types import Job, Result, Status, split_wire, wire_for

BACKENDS = ("auto", "docker", "local", "ray")


def default_image(config: SandboxConfig, language: str = "python") -> str:
    """The image of a language: ``sandbox.image`` for Python when set, else the built one."""
    if language == "python" and config.image:
        return config.image
    return docker_backend.image_name(language)


def resolve_backend(config: SandboxConfig, language: str = "python") -> str:
    """``auto`` becomes ``docker`` when an engine answers and the language's image exists, else ``local``."""
    if config.backend not in BACKENDS:
        raise SandboxError(f"unknown sandbox backend {config.backend!r}", "use auto, docker, local or ray")
    if config.backend != "auto":
        return config.backend
    if docker_backend.engine_version() and docker_backend.image_id(default_image(config, language)):
        return "docker"
    return "local"


_SIGTERM_INSTALLED = False


def _install_sigterm() -> None:
    """Turn SIGTERM into a normal exit so atexit removes the containers."""
    global _SIGTERM_INSTALLED
    if _SIGTERM_INSTALLED or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_term(signum: int, frame: Any) -> None:
        shutdown_all()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    _SIGTERM_INSTALLED = True


class Sandbox:
    """Runs jobs on the configured backend with bounded concurrency. Thread-safe."""

    def __init__(self, config: SandboxConfig | None = None, backend: str | None = None, quiet: bool = False):
        self.config = config or SandboxConfig()
        if backend is not None:
            self.config = SandboxConfig(**{**self.config.__dict__, "backend": backend})
        self.workers = self.config.workers or os.cpu_count() or 1
        self._quiet = quiet
        self._lock = threading.Lock()
        self._pools: dict[str, WorkerPool] = {}
        """One pool per language (each language has its own image); the ray pool serves all."""
        self._threads: ThreadPoolExecutor | None = None
        self._backend: str | None = None
        self._closed = False

    # ----------------------------------------------------------------- lifecycle

    @property
    def backend(self) -> str:
        """The resolved backend name (``docker``, ``local`` or ``ray``); resolves it on first use."""
        if self._backend is None:
            self._ensure()
        assert self._backend is not None
        return self._backend

    def _ensure(self, language: str = "python") -> WorkerPool:
        with self._lock:
            if self._closed:
                raise SandboxError("the sandbox is closed", "create a new Sandbox")
            pool = self._pools.get(language)
            if pool is not None:
                return pool
            cfg = self.config
            # One backend per sandbox, resolved for the first language it is asked for.
            backend = self._backend or resolve_backend(cfg, language)
            if backend == "ray":  # actors on the cluster's nodes run the docker/local pools
                from grpo_code.sandbox.ray_backend import RayPool

                ray_pool = next(iter(self._pools.values()), None) or RayPool(cfg)
                self._pools[language] = ray_pool  # type: ignore[assignment]
                self._backend = backend
                return ray_pool  # type: ignore[return-value]
            if backend == "docker":
                runner = RUNNERS[language]
                # A compiler may use compile_memory_mb, the container must hold it.
                memory = max(cfg.memory_mb, cfg.compile_memory_mb) if runner.compiled else cfg.memory_mb
                factory: Any = docker_backend.DockerFactory(
                    default_image(cfg, language), memory, cfg.pids_limit, cfg.tmpfs_mb
                )
            else:
                local_backend.check_tools(language)
                if not self._quiet and self._backend is None:
                    local_backend.warn_local()
                factory = local_backend.LocalFactory()
            _install_sigterm()
            self._pools[language] = pool = WorkerPool(factory, self.workers, cfg.container_max_jobs)
            if self._threads is None:
                self._threads = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="grpo-sandbox")
            self._backend = backend
            return pool

    def start(self, language: str = "python") -> Sandbox:
        """Start every worker of a language now (otherwise they start with the first jobs)."""
        self._ensure(language).start()
        return self

    def close(self) -> None:
        """Stop the workers and remove their containers / temp dirs. Idempotent."""
        with self._lock:
            self._closed = True
            pools, threads = self._live_pools(), self._threads
            self._pools, self._threads = {}, None
        if threads is not None:
            threads.shutdown(wait=False, cancel_futures=True)
        for pool in pools:
            pool.shutdown()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _live_pools(self) -> list[WorkerPool]:
        return list({id(p): p for p in self._pools.values()}.values())

    def worker_names(self) -> list[str]:
        """Names of the live workers (docker: container names), for diagnostics."""
        return sorted(name for pool in self._live_pools() for name in pool.worker_names())

    @property
    def stats(self) -> dict[str, int]:
        """Counters summed over the pools of every language used so far."""
        total: dict[str, int] = {}
        for pool in self._live_pools():
            for key, value in pool.stats.items():
                total[key] = total.get(key, 0) + value
        return total

    # ----------------------------------------------------------------- jobs

    def _wire(self, job: Job | dict[str, Any]) -> tuple[Job, dict[str, Any]]:
        if isinstance(job, dict):
            job = Job.from_dict(job)
        return job, wire_for(job, self.config)

    def _execute(self, pool: WorkerPool, job: Job, wire: dict[str, Any]) -> Result:
        start = time.monotonic()
        parts = split_wire(wire)
        if isinstance(parts, str):
            return Result.infra_error(len(job.tests), parts)
        results = []
        for part in parts:
            result, error = pool.run(part)
            if result is None:
                elapsed = round((time.monotonic() - start) * 1000, 3)
                return Result.infra_error(len(job.tests), error or "unknown sandbox failure", elapsed)
            results.append(result)
        elapsed = round((time.monotonic() - start) * 1000, 3)
        try:
            tests = tuple(t for r in results for t in Result.from_dict(r).tests)
        except (KeyError, ValueError, TypeError) as exc:
            return Result.infra_error(len(job.tests), f"malformed result from the executor: {exc}", elapsed)
        if len(tests) != len(job.tests) or any(r.get("total") != len(r.get("tests", ())) for r in results):
            return Result.infra_error(
                len(job.tests), "the executor returned the wrong number of tests", elapsed
            )
        passed = sum(t.passed for t in tests)
        return Result(Status.PASS if passed == len(tests) else Status.FAIL, passed, len(tests), tests, elapsed, None)

    def submit(self, job: Job | dict[str, Any]) -> Future[Result]:
        """Queue one job; the future resolves to its :class:`Result`."""
        job, wire = self._wire(job)
        pool = self._ensure(job.language)
        if self._backend == "ray":
            return pool.submit(job)  # type: ignore[attr-defined]
        assert self._threads is not None
        return self._threads.submit(self._execute, pool, job, wire)

    def run(self, jobs: Iterable[Job | dict[str, Any]]) -> list[Result]:
        """Run jobs (at most ``workers`` at once) and return their results in order."""
        futures = [self.submit(job) for job in jobs]
        return [f.result() for f in futures]

    def run_one(self, job: Job | dict[str, Any]) -> Result:
        return self.submit(job).result()

    async def arun(self, jobs: Iterable[Job | dict[str, Any]]) -> list[Result]:
        """``run`` for async code: awaits the results without blocking the event loop."""
        futures = [asyncio.wrap_future(self.submit(job)) for job in jobs]
        return list(await asyncio.gather(*futures))
