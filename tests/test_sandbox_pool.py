"""The worker and the pool against fake executors (no engine, no processes): which answers
make a lost worker (destroyed, the job retried: death, garbage, a harness failure) and which
a job error (the executor refuses the job: the worker stays, no retry), and that an engine
timing out while a container starts is an infra error that says what timed out and what
to do."""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import requests
import urllib3.exceptions

from grpo_code.config import SandboxConfig
from grpo_code.errors import SandboxError
from grpo_code.sandbox import docker_backend, engine
from grpo_code.sandbox.node import NodeSandbox
from grpo_code.sandbox.pool import WorkerPool
from grpo_code.sandbox.types import Job, ScriptTest, Status
from grpo_code.sandbox.wire import wire_for
from grpo_code.sandbox.worker import HARNESS_FAILURE, JobRefused, Worker, WorkerLost

JOB = Job("x = 1", (ScriptTest("assert x == 1"),))
WIRE = wire_for(JOB, SandboxConfig())
PASSED = {"status": "pass", "passed": 1, "total": 1, "duration_ms": 1.0, "error": None,
          "tests": [{"verdict": "pass", "duration_ms": 1.0, "stdout": "", "stderr": "", "message": ""}]}


class FakeExecutor:
    """The executor's end of a channel: says ready, then answers each job with ``answer(n)``
    (the n-th job of this executor): a reply dict, or None to go away."""

    def __init__(self, answer: Callable[[int], dict[str, Any] | None]):
        self.answer = answer
        self.host, self.theirs = socket.socketpair()
        self.jobs = 0
        self.destroyed = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        out = self.theirs.makefile("wb")
        out.write(b'{"ready": true}\n')
        out.flush()
        for line in self.theirs.makefile("rb"):
            msg = json.loads(line)
            if msg.get("ping"):
                reply: dict[str, Any] | None = {"pong": True}
            else:
                self.jobs += 1
                reply = self.answer(self.jobs)
            if reply is None:
                break
            out.write(json.dumps({"id": msg["id"], **reply}).encode() + b"\n")
            out.flush()
        self.theirs.close()

    def worker(self, name: str) -> Worker:
        def destroy() -> None:
            self.destroyed = True
            self.host.close()

        fd = self.host.fileno()
        return Worker(name, fd, fd, self.host.close, destroy, start_timeout_s=5.0)


def pool_of(*answers: Callable[[int], dict[str, Any] | None]) -> tuple[WorkerPool, list[FakeExecutor]]:
    """A one-worker pool whose n-th started worker answers with ``answers[n]``."""
    made: list[FakeExecutor] = []

    def factory(index: int) -> Worker:
        made.append(FakeExecutor(answers[index - 1]))
        return made[-1].worker(f"fake-{index}")

    return WorkerPool(factory, size=1, max_jobs=100), made


def test_a_refused_job_is_a_job_error_not_retried_and_its_worker_is_replaced():
    refuse = lambda n: {"error": "executor failure: KeyError: 'tests'"}  # noqa: E731
    serve = lambda n: {"result": PASSED}  # noqa: E731
    pool, made = pool_of(refuse, serve)
    try:
        result, error = pool.run(WIRE)
        assert result is None and "could not run this job: executor failure: KeyError: 'tests'" in error
        assert pool.stats["refused"] == 1 and pool.stats["lost"] == 0 and pool.stats["infra_errors"] == 1
        # not retried; and a program may have caused the failure (a full pids limit, say),
        # so the worker does not serve another job: the next runs on a fresh executor.
        assert len(made) == 1 and made[0].jobs == 1 and made[0].destroyed
        assert pool.run(WIRE) == (PASSED, None)
        assert len(made) == 2 and made[1].jobs == 1 and pool.stats["started"] == 2
    finally:
        pool.shutdown()


def test_a_result_that_asks_to_retire_keeps_its_verdicts_and_replaces_the_worker():
    unclean = lambda n: {"result": PASSED, "retire": "could not empty /tmp"}  # noqa: E731
    serve = lambda n: {"result": PASSED}  # noqa: E731
    pool, made = pool_of(unclean, serve)
    try:
        assert pool.run(WIRE) == (PASSED, None)
        assert made[0].destroyed and pool.stats["retired"] == 1 and pool.stats["infra_errors"] == 0
        assert pool.run(WIRE) == (PASSED, None) and len(made) == 2 and not made[1].destroyed
    finally:
        pool.shutdown()


def test_the_sandbox_reports_a_refused_job_as_an_infra_error_once():
    pool, made = pool_of(lambda n: {"error": "executor failure: Traceback ... KeyError: 'tests'"})
    node = NodeSandbox(SandboxConfig(), "local", 1, quiet=True)
    try:
        result = node._execute(pool, JOB, WIRE)
        assert result.status is Status.INFRA_ERROR and result.pass_fraction is None
        assert "KeyError: 'tests'" in result.error and made[0].jobs == 1
    finally:
        pool.shutdown()


@pytest.mark.parametrize("goes", ["away", "garbage", "harness failure"])
def test_a_dead_garbled_or_failing_executor_is_a_lost_worker_and_the_job_is_retried(goes):
    def broken(n: int) -> dict[str, Any] | None:
        replies = {"away": None, "garbage": {"oops": True},
                   "harness failure": {"error": "harness failure: the zygote could not start the program's process"}}
        return replies[goes]

    pool, made = pool_of(broken, lambda n: {"result": PASSED})
    try:
        assert pool.run(WIRE) == (PASSED, None)
        assert pool.stats["lost"] == 1 and pool.stats["refused"] == 0 and len(made) == 2
        assert made[0].destroyed and not made[1].destroyed
    finally:
        pool.shutdown()


def test_a_harness_failure_on_every_attempt_is_an_infra_error():
    fails = lambda n: {"error": "harness failure: the judge is gone"}  # noqa: E731
    pool, made = pool_of(fails, fails)
    try:
        result, error = pool.run(WIRE)
        assert result is None and "harness failure: the judge is gone" in error
        assert pool.stats["lost"] == 2 and pool.stats["refused"] == 0 and len(made) == 2
    finally:
        pool.shutdown()


def test_the_executor_sends_the_error_replies_the_host_tells_apart():
    """The host splits the executor's ``error`` replies by how they start (the executor is
    copied into the images, so its wording is part of the protocol)."""
    main = (Path(engine.__file__).parent / "executor" / "main.py").read_text()
    starts = set(re.findall(r'"error": f?"([a-z ]+):', main))
    assert starts == {"harness failure", "executor failure"}, starts
    assert HARNESS_FAILURE == "harness failure:"


def test_a_refused_job_leaves_the_worker_alive_and_counted():
    executor = FakeExecutor(lambda n: {"error": "executor failure: no"})
    worker = executor.worker("w")
    with pytest.raises(JobRefused, match="executor failure: no"):
        worker.run(WIRE, 5.0)
    assert not worker.dead and worker.jobs_done == 1 and worker.ping()
    worker.close()


# --------------------------------------------------------------------------- starting a container


def docker_factory() -> docker_backend.DockerFactory:
    f = object.__new__(docker_backend.DockerFactory)  # no engine: skip check_ready
    f.image, f.memory_mb, f.pids_limit, f.tmpfs_mb = "grpo-code-sandbox-python:latest", 256, 32, 64
    f.channel, f.prefix, f.pin_cpus = "socket", "grpo-code-sbx-test", False
    return f


TIMEOUTS = {
    "requests": requests.exceptions.ReadTimeout("Read timed out. (read timeout=120)"),
    "body read": requests.exceptions.ConnectionError(
        urllib3.exceptions.ReadTimeoutError(None, "/containers/create", "Read timed out.")),
    "urllib3": urllib3.exceptions.ReadTimeoutError(None, "/containers/x/start", "Read timed out."),
    "socket": TimeoutError("timed out"),
}


@pytest.mark.parametrize("exc", TIMEOUTS.values(), ids=TIMEOUTS.keys())
def test_an_engine_timeout_while_starting_a_container_is_an_infra_error_with_the_fix(monkeypatch, exc):
    removed: list[str] = []

    def create_container(**kwargs: Any) -> Any:
        raise exc

    api = SimpleNamespace(create_host_config=lambda **kw: {}, create_container=create_container)
    monkeypatch.setattr(engine, "client", lambda *a, **k: SimpleNamespace(api=api))
    monkeypatch.setattr(docker_backend, "_remove_container", lambda name, *a, **k: removed.append(name))
    with pytest.raises(WorkerLost) as info:
        docker_factory()(1)
    message = str(info.value)
    assert message.startswith("starting container grpo-code-sbx-test-")
    assert "did not answer in time" in message and "`docker info`" in message
    assert engine.TIMEOUT_ENV in message and removed  # nothing half-made is left
    # through the pool: an infra error for the job, and a SandboxError for an eager start
    pool = WorkerPool(lambda index: docker_factory()(index), size=1, max_jobs=10)
    result, error = pool.run(WIRE)
    assert result is None and "did not answer in time" in error and pool.stats["infra_errors"] == 1
    with pytest.raises(SandboxError, match="did not answer in time"):
        pool.start()
    pool.shutdown()


def test_the_api_timeout_can_be_raised(monkeypatch):
    monkeypatch.delenv(engine.TIMEOUT_ENV, raising=False)
    assert engine.api_timeout_s() == engine.DEFAULT_API_TIMEOUT_S
    monkeypatch.setenv(engine.TIMEOUT_ENV, "300")
    assert engine.api_timeout_s() == 300.0
    for bad in ("soon", "0", "-5"):
        monkeypatch.setenv(engine.TIMEOUT_ENV, bad)
        with pytest.raises(SandboxError, match=engine.TIMEOUT_ENV):
            engine.api_timeout_s()
