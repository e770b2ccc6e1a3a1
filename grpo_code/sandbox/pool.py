"""A bounded, thread-safe pool of warm workers with retry, replacement and clean shutdown.

Workers are started lazily (the first jobs start them, in parallel), handed to one job at
a time, retired after ``max_jobs`` jobs, and destroyed when they die or hang. A job whose
worker was lost is retried once on a fresh worker, then reported as ``infra_error`` (never
blamed on the program). A job the executor refuses (it cannot run that job) is an
``infra_error`` at once: the worker is healthy and keeps serving, and running the job
again would end the same way. Every live pool is shut down at interpreter exit.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from grpo_code.errors import SandboxError
from grpo_code.sandbox.wire import job_deadline_s
from grpo_code.sandbox.worker import ExecutorKilled, JobRefused, Worker, WorkerLost

_LIVE: weakref.WeakSet[WorkerPool] = weakref.WeakSet()


def shutdown_all() -> None:
    """Shut down every live pool (registered with ``atexit``)."""
    for pool in list(_LIVE):
        pool.shutdown()


atexit.register(shutdown_all)


class WorkerPool:
    """``size`` workers made by ``factory(index)``; ``run`` executes one wire job."""

    def __init__(self, factory: Callable[[int], Worker], size: int, max_jobs: int, retries: int = 1):
        self._factory = factory
        self.size = size
        self.max_jobs = max_jobs
        self.retries = retries
        self._cond = threading.Condition()
        self._idle: list[Worker] = []
        self._all: set[Worker] = set()
        self._count = 0
        self._index = 0
        self._closed = False
        self._reapers: list[threading.Thread] = []
        self.stats = {"jobs": 0, "lost": 0, "refused": 0, "infra_errors": 0, "started": 0, "retired": 0}
        _LIVE.add(self)

    # ----------------------------------------------------------------- workers

    def _acquire(self) -> Worker:
        with self._cond:
            while True:
                if self._closed:
                    raise SandboxError("the sandbox was shut down", "create a new Sandbox")
                if self._idle:
                    return self._idle.pop()
                if self._count < self.size:
                    self._count += 1
                    self._index += 1
                    index = self._index
                    break
                self._cond.wait()
        try:
            worker = self._factory(index)
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._all.add(worker)
            self.stats["started"] += 1
            if self._closed:
                self._all.discard(worker)
                self._count -= 1
                worker.destroy()
                raise SandboxError("the sandbox was shut down", "create a new Sandbox")
        return worker

    def _release(self, worker: Worker) -> None:
        with self._cond:
            if not self._closed and worker.jobs_done < self.max_jobs:
                self._idle.append(worker)
                self._cond.notify()
                return
            self.stats["retired"] += 1
        self._drop(worker, graceful=True)

    def _drop(self, worker: Worker, graceful: bool) -> None:
        """Stop a worker in the background; its slot frees at once so a fresh one can start."""

        def stop() -> None:
            worker.close() if graceful else worker.destroy()

        thread = threading.Thread(target=stop, name=f"stop-{worker.name}", daemon=True)
        with self._cond:
            self._all.discard(worker)
            self._count -= 1
            self._reapers = [t for t in self._reapers if t.is_alive()]
            self._reapers.append(thread)
            self._cond.notify()
        thread.start()

    def start(self, n: int | None = None) -> None:
        """Start workers ahead of time (in parallel) instead of on first use."""
        n = self.size if n is None else min(n, self.size)
        errors: list[BaseException] = []
        got: list[Worker] = []

        def one() -> None:
            try:
                got.append(self._acquire())
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for w in got:
            self._release(w)
        if errors:
            err = errors[0]
            if isinstance(err, SandboxError):
                raise err
            raise SandboxError(f"cannot start a sandbox worker: {err}", "run `grpo-code sandbox doctor`")

    def worker_names(self) -> list[str]:
        """Names of the live workers (container names for the docker backend)."""
        with self._cond:
            return sorted(w.name for w in self._all)

    # ----------------------------------------------------------------- jobs

    def run(self, wire: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """Run a job; returns (result, None) or (None, infrastructure error)."""
        timeout = job_deadline_s(wire)
        error = "no attempt made"
        killed = 0
        for _attempt in range(self.retries + 1):
            try:
                worker = self._acquire()
            except WorkerLost as exc:
                error = str(exc)
                self._count_stat("lost")
                continue
            try:
                result = worker.run(wire, timeout)
            except JobRefused as exc:
                self._drop(worker, graceful=False)  # whatever caused it stays out of the next job
                self._count_stat("refused")
                self._count_stat("infra_errors")
                return None, f"{worker.name}: the executor could not run this job: {exc}"
            except WorkerLost as exc:
                error = f"{worker.name}: {exc}"
                killed += isinstance(exc, ExecutorKilled)
                self._count_stat("lost")
                self._drop(worker, graceful=False)
                continue
            except BaseException:
                self._drop(worker, graceful=False)
                raise
            if worker.retire:
                self._drop(worker, graceful=False)
                self._count_stat("retired")
            else:
                self._release(worker)
            self._count_stat("jobs")
            return result, None
        if killed == self.retries + 1:
            # Killed during this job on every attempt, by no one but the job's processes:
            # the program's doing, so its verdict (not a masked infra error).
            self._count_stat("jobs")
            return killed_result(wire, error), None
        self._count_stat("infra_errors")
        return None, error

    def _count_stat(self, key: str) -> None:
        with self._cond:
            self.stats[key] += 1

    # ----------------------------------------------------------------- shutdown

    def shutdown(self, timeout_s: float = 15.0) -> None:
        """Stop every worker, hard, in parallel, and wait for them (at most ``timeout_s``).

        Idle workers have nothing to finish, so they are destroyed as busy ones are: one
        forced removal each, instead of waiting for each executor to see the end of its
        input and exit first (on a loaded machine that wait, then a removal racing the
        container's own auto-remove, could hold a Ctrl-C'd owner past its exit)."""
        with self._cond:
            if self._closed and not self._all and not self._reapers:
                return
            self._closed = True
            idle, busy = list(self._idle), [w for w in self._all if w not in self._idle]
            self._idle.clear()
            self._all.clear()
            self._count = 0
            reapers = list(self._reapers)
            self._reapers.clear()
            self._cond.notify_all()
        threads = [threading.Thread(target=w.destroy, daemon=True) for w in idle + busy]
        for t in threads:
            t.start()
        deadline = time.monotonic() + timeout_s
        for t in threads + reapers:
            t.join(max(0.0, deadline - time.monotonic()))
        _LIVE.discard(self)


def killed_result(wire: dict[str, Any], error: str) -> dict[str, Any]:
    """The result of a job whose program killed the executor on every attempt."""
    message = f"the program killed the sandbox's executor ({error})"
    tests = [{"verdict": "runtime_error", "duration_ms": 0.0, "stdout": "", "stderr": "", "message": message}
             for _ in wire["tests"]]
    return {"status": "fail", "passed": 0, "total": len(tests), "tests": tests, "duration_ms": 0.0, "error": None}

