"""The sandbox of one machine: a warm worker pool per language, on the docker or local backend.

:class:`NodeSandbox` is what a :class:`~grpo_code.sandbox.api.Sandbox` runs jobs on when its
backend is ``docker`` or ``local``, and what each Ray actor (:mod:`.ray_backend`) runs on its
node. Each language has its own pool (its own image); a job runs as one or more parts
(:func:`~grpo_code.sandbox.wire.split_wire`) in one worker and comes back as one
:class:`~grpo_code.sandbox.types.Result`. :meth:`NodeSandbox.fingerprint` names what produces
the verdicts here (:mod:`.fingerprint`).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from grpo_code.config import SandboxConfig
from grpo_code.errors import SandboxError
from grpo_code.sandbox import checker_image, docker_backend, engine, local_backend, native_checker
from grpo_code.sandbox.executor.calls import NOT_RUN_MESSAGE
from grpo_code.sandbox.fingerprint import sandbox_fingerprint
from grpo_code.sandbox.image import default_image
from grpo_code.sandbox.languages import COMPILED
from grpo_code.sandbox.pool import WorkerPool, shutdown_all
from grpo_code.sandbox.types import Job, Result, Status, TestResult, Verdict
from grpo_code.sandbox.wire import UNDECIDED, held_wire, split_wire, wire_for

BACKENDS = ("auto", "docker", "local", "ray", "http")


def resolve_backend(config: SandboxConfig, language: str = "python") -> str:
    """``auto`` becomes ``docker`` when an engine answers and the language's image exists, else ``local``."""
    if config.backend not in BACKENDS:
        raise SandboxError(f"unknown sandbox backend {config.backend!r}", "use auto, docker, local, ray or http")
    if config.backend != "auto":
        return config.backend
    if engine.engine_version() and engine.image_id(default_image(config, language)):
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


class NodeSandbox:
    """Runs jobs on this machine with at most ``workers`` at once per language. Thread-safe."""

    def __init__(self, config: SandboxConfig, backend: str, workers: int, quiet: bool = False):
        if backend not in ("docker", "local"):
            raise SandboxError(f"a machine's sandbox runs on docker or local, not {backend!r}",
                               "set sandbox.backend (or sandbox.ray.node_backend) to docker, local or auto")
        self.config = config
        self.backend = backend
        self.workers = workers
        self._quiet = quiet
        self._lock = threading.Lock()
        self._pools: dict[str, WorkerPool] = {}
        self._threads: ThreadPoolExecutor | None = None
        self._closed = False

    def image_identity(self, language: str) -> str:
        """What the verdicts' runtime is: the docker image's id, or the host Python that runs
        the local executor."""
        if self.backend == "docker":
            image = default_image(self.config, language)
            return engine.image_id(image) or f"docker:absent:{image}"
        return f"local:{sys.executable}:{sys.version.split()[0]}"

    def fingerprint(self, language: str) -> str:
        """The sandbox fingerprint of a language here: image identity, harness, default limits."""
        return sandbox_fingerprint(self.image_identity(language), language, self.config)

    def _ensure(self, language: str) -> WorkerPool:
        with self._lock:
            if self._closed:
                raise SandboxError("the sandbox is closed", "create a new Sandbox")
            pool = self._pools.get(language)
            if pool is not None:
                return pool
            cfg = self.config
            if self.backend == "docker":
                # A compiler may use compile_memory_mb, the container must hold it.
                memory = max(cfg.memory_mb, cfg.compile_memory_mb) if language in COMPILED else cfg.memory_mb
                factory: Any = docker_backend.DockerFactory(
                    default_image(cfg, language), memory, cfg.pids_limit, cfg.tmpfs_mb, pin_cpus=cfg.pin_cpus
                )
            else:
                local_backend.check_tools(language)
                if not self._quiet and not self._pools:
                    local_backend.warn_local()
                factory = local_backend.LocalFactory()
            _install_sigterm()
            self._pools[language] = pool = WorkerPool(factory, self.workers, cfg.container_max_jobs)
            if self._threads is None:
                self._threads = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="grpo-sandbox")
            return pool

    def start(self, language: str = "python") -> NodeSandbox:
        """Start every worker of a language now (otherwise they start with the first jobs)."""
        self._ensure(language).start()
        return self

    def shutdown(self) -> None:
        """Stop the workers and remove their containers / temp dirs. Idempotent."""
        with self._lock:
            self._closed = True
            pools, threads = list(self._pools.values()), self._threads
            self._pools, self._threads = {}, None
        if threads is not None:
            threads.shutdown(wait=False, cancel_futures=True)
        for pool in pools:
            pool.shutdown()

    def worker_names(self) -> list[str]:
        """Names of the live workers (docker: container names), for diagnostics."""
        with self._lock:
            pools = list(self._pools.values())
        return sorted(name for pool in pools for name in pool.worker_names())

    @property
    def stats(self) -> dict[str, int]:
        """Counters summed over the pools of every language used so far."""
        with self._lock:
            pools = list(self._pools.values())
        total: dict[str, int] = {}
        for pool in pools:
            for key, value in pool.stats.items():
                total[key] = total.get(key, 0) + value
        return total

    def submit(self, job: Job) -> Future[Result]:
        """Queue one job; the future resolves to its :class:`Result`."""
        pool = self._ensure(job.language)
        assert self._threads is not None
        return self._threads.submit(self._execute, pool, job, wire_for(job, self.config))

    def _execute(self, pool: WorkerPool, job: Job, wire: dict[str, Any]) -> Result:
        start = time.monotonic()
        # C++ checkers as binaries, compiled once (docker: in the C++ image; local: with g++).
        wire = native_checker.compiled_wire(wire, checker_image.compile_checker if self.backend == "docker"
                                            else native_checker.compile_on_host)
        held = held_wire(wire) if job.language == "python" and not job.record else None
        if held is not None:
            # Large expected values stay here: an answer written exactly as one passes on its
            # digest; any other answer is undecided there, and the job goes again, whole.
            result = self._run(pool, job, held, start)
            if result is not None:
                return result
            parts = split_wire(wire)
            if isinstance(parts, str):
                # A value too large to send at all: the digest decides, and an answer that is
                # not its exact encoding is a fail (never the infra_error a wrong answer would
                # escape to). The job runs again, held (rare: a test over 48 MiB).
                result = self._run(pool, job, held, start, undecided_fails=True)
                if result is not None:
                    return result
            result = self._run(pool, job, wire, start, parts)
        else:
            result = self._run(pool, job, wire, start)
        if result is None:  # a bug of ours, not the program's: loud, never a masked infra_error
            raise RuntimeError("the executor left a test undecided with its expected value in hand")
        return result

    def _run(self, pool: WorkerPool, job: Job, wire: dict[str, Any], start: float,
             parts: list[dict[str, Any]] | str | None = None, undecided_fails: bool = False) -> Result | None:
        """The job's result from one sending of ``wire`` (``parts``: its split, when known;
        ``None``: a test was undecided, unless ``undecided_fails``: then such a test is a fail)."""
        if parts is None:
            parts = split_wire(wire)
        if isinstance(parts, str):
            return Result.infra_error(len(job.tests), parts)
        results = []
        sent = 0
        for part in parts:
            result, error = pool.run(part)
            if result is None:
                elapsed = round((time.monotonic() - start) * 1000, 3)
                return Result.infra_error(len(job.tests), error or "unknown sandbox failure", elapsed)
            if result.get(UNDECIDED):
                if not undecided_fails:
                    return None
                result = _undecided_failed(result)
            results.append(result)
            sent += len(part["tests"])
            if job.stop_on_failure and result.get("status") != "pass":
                break  # the later parts are not sent (their expected values stay here) nor run
        elapsed = round((time.monotonic() - start) * 1000, 3)
        try:
            tests = tuple(t for r in results for t in Result.from_dict(r).tests)
        except (KeyError, ValueError, TypeError) as exc:
            return Result.infra_error(len(job.tests), f"malformed result from the executor: {exc}", elapsed)
        if len(tests) == sent < len(job.tests):
            tests += (TestResult(Verdict.NOT_RUN, message=NOT_RUN_MESSAGE),) * (len(job.tests) - sent)
        if len(tests) != len(job.tests) or any(r.get("total") != len(r.get("tests", ())) for r in results):
            return Result.infra_error(
                len(job.tests), "the executor returned the wrong number of tests", elapsed
            )
        passed = sum(t.passed for t in tests)
        return Result(Status.PASS if passed == len(tests) else Status.FAIL, passed, len(tests), tests, elapsed, None)


def _undecided_failed(result: dict[str, Any]) -> dict[str, Any]:
    """A part's result whose undecided tests (an answer that is not the exact encoding of an
    expected value held on the host) are fails: the value is too large to send and compare."""
    tests = [{**t, "verdict": "fail", "message": "returned a value other than the expected one (which is too "
              "large to send whole, docs/sandbox.md Values: only its exact encoding passes)"}
             if t.get("verdict") == UNDECIDED else t for t in result.get("tests", [])]
    passed = sum(t.get("verdict") == "pass" for t in tests)
    return {**result, "tests": tests, "passed": passed, "status": "pass" if tests and passed == len(tests) else "fail",
            UNDECIDED: False}
