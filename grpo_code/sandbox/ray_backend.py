"""The Ray backend: sandbox jobs spread over a Ray cluster, each node running its own pool.

Selected with ``sandbox.backend: ray`` (extra ``ray``). One :class:`SandboxActor` per
alive node with CPUs (or ``sandbox.ray.actors`` of them, dealt over those nodes) owns a
:class:`~grpo_code.sandbox.node.NodeSandbox` on that node (``sandbox.ray.node_backend``, docker
by default), so verdicts come from the same executor, limits and retries as on one machine.
The driver side, :class:`RayPool`, keeps the queue and hands each actor at most
``max_inflight`` jobs at a time: the nodes' queues stay short, and a slow or lost node holds
few jobs. When an actor dies (crash, kill, its node gone) its in-flight jobs go back to the
front of the queue for the other actors, up to ``sandbox.ray.retries`` times each, and the
actor is replaced while its node is alive. A job's future is resolved exactly once: an
answer for a job that was already answered elsewhere is dropped.

``sandbox.ray.address`` null starts a private single-node Ray bound to 127.0.0.1 (no
dashboard, usage stats off, small object store); otherwise ``ray.init(address=...)`` joins
the cluster. ``ray`` is imported only when this backend is used.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import dataclasses
import hashlib
import itertools
import logging
import os
import queue
import socket
import sys
import threading
import weakref
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any

from grpo_code.config import SandboxConfig
from grpo_code.errors import GrpoCodeError, SandboxError
from grpo_code.sandbox.node import NodeSandbox, resolve_backend
from grpo_code.sandbox.types import Job, Result, Status

# Results are small JSON-like objects; the private instance needs little shared memory.
LOCAL_OBJECT_STORE_BYTES = 96 * 1024 * 1024
ACTOR_START_TIMEOUT_S = 180.0
CLOSE_TIMEOUT_S = 15.0

_LIVE: weakref.WeakSet[RayPool] = weakref.WeakSet()


def _shutdown_all() -> None:
    for pool in list(_LIVE):
        pool.shutdown()


atexit.register(_shutdown_all)


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def _short(exc: BaseException) -> str:
    """One line for an error; for an exception raised inside an actor, the original one."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        exc = cause
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip().rstrip(":")[:300]


def import_ray() -> Any:
    """Import ray with usage stats off; a missing install is a user error."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError:
        raise SandboxError("sandbox backend 'ray' needs Ray", "pip install 'grpo-code[ray]'") from None
    return ray


def connect(address: str | None) -> Any:
    """Join the Ray cluster at ``address``, or start a private one on 127.0.0.1 when it is None.

    A driver that is already connected (``ray.init`` called earlier) keeps its connection.
    """
    if address is None:
        # Ray listens on the machine's external address unless it is told this is not a
        # cluster; a private instance has no reason to be reachable from elsewhere.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray = import_ray()
    if ray.is_initialized():
        return ray
    try:
        if address is None:
            from ray._private import ray_constants

            if os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") == "0":
                ray_constants.ENABLE_RAY_CLUSTER = False  # ray was imported before we set the variable
            ray.init(
                address="local",  # a new instance even when `ray start` left one on this machine
                num_cpus=os.cpu_count() or 1,
                include_dashboard=False,
                object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                _node_ip_address="127.0.0.1",
                logging_level=logging.WARNING,
            )
        else:
            ray.init(address=address, logging_level=logging.WARNING)
    except Exception as exc:  # noqa: BLE001 - Ray raises many types for "cannot connect"
        where = f"the Ray cluster at {address!r}" if address else "a local Ray instance"
        hint = (
            "start it with `ray start --head` (and `ray start --address HEAD:6379` on other nodes), "
            "or set sandbox.ray.address=null for a private local Ray"
            if address
            else "check `ray start --head` works on this machine, or use sandbox.backend=docker"
        )
        raise SandboxError(f"cannot connect to {where}: {_short(exc)}", hint) from None
    return ray


class SandboxActor:
    """A Ray actor on one node: that node's sandbox, running the jobs it is handed."""

    def __init__(self, config: SandboxConfig):
        self._sandbox = NodeSandbox(config, resolve_backend(config), config.workers or os.cpu_count() or 1)

    def start(self) -> dict[str, Any]:
        """Start the pool's workers; returns where this actor runs and how big its pool is."""
        import ray

        self._sandbox.start()
        return {
            "node_id": ray.get_runtime_context().get_node_id(),
            "ip": ray.util.get_node_ip_address(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "workers": self._sandbox.workers,
            "backend": self._sandbox.backend,
        }

    async def run(self, job: Job) -> Result:
        try:
            return await asyncio.wrap_future(self._sandbox.submit(job))
        except GrpoCodeError as exc:
            return Result.infra_error(len(job.tests), f"{socket.gethostname()}: {exc}")

    def stats(self) -> dict[str, int]:
        return self._sandbox.stats

    def fingerprint(self, language: str) -> str:
        return self._sandbox.fingerprint(language)

    def close(self) -> None:
        self._sandbox.shutdown()


@dataclass(eq=False)
class _Item:
    job: Job
    future: Future[Result]
    attempts: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass(eq=False)
class _Actor:
    name: str
    handle: Any
    node_id: str  # the node it is pinned to
    workers: int
    ready_ref: Any
    replacements: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    limit: int = 1
    inflight: set[_Item] = field(default_factory=set)
    jobs: int = 0  # answers received
    ready: bool = False
    lost: bool = False


class RayPool:
    """Jobs spread over sandbox actors with bounded in-flight work per actor. Thread-safe.

    ``submit(job)`` returns a future of the job's :class:`Result`; one dispatcher thread owns
    the queue and the actors and reacts to events (new job, answer, actor ready).
    """

    def __init__(self, config: SandboxConfig):
        self.config = config
        self.ray_config = config.ray
        self.stats = {"jobs": 0, "infra_errors": 0, "resubmitted": 0, "actors_started": 0, "actors_lost": 0}
        self._ray: Any = None
        self._cls: Any = None
        self._lock = threading.Lock()
        self._events: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._pending: collections.deque[_Item] = collections.deque()
        self._actors: list[_Actor] = []
        self._names = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._closed = False

    # ----------------------------------------------------------------- actors

    def start(self, language: str = "python") -> RayPool:
        """Connect, start the actors (in parallel) and wait until they are ready. Idempotent.
        (Every actor serves every language: ``language`` is for the ``Sandbox`` interface.)"""
        with self._lock:
            if self._closed:
                raise SandboxError("the sandbox was shut down", "create a new Sandbox")
            if self._thread is not None:
                return self
            self._ray = connect(self.ray_config.address)
            self._cls = self._ray.remote(SandboxActor)
            actors = [self._spawn(node, workers) for node, workers in self._placements()]
            errors = []
            for actor in actors:
                try:
                    self._mark_ready(actor, self._ray.get(actor.ready_ref, timeout=ACTOR_START_TIMEOUT_S))
                except Exception as exc:  # noqa: BLE001 - reported below
                    errors.append(f"{actor.name}: {_short(exc)}")
                    self._kill(actor)
            self._actors = [a for a in actors if a.ready]
            if not self._actors:
                raise SandboxError(
                    f"no Ray sandbox actor started ({errors[0] if errors else 'no placement'})",
                    "install grpo-code and build the sandbox image on every Ray node "
                    "(`grpo-code sandbox doctor` there tells what is missing)",
                )
            for error in errors:
                _warn(f"a Ray sandbox actor did not start, continuing without it: {error}")
            _LIVE.add(self)
            self._thread = threading.Thread(target=self._loop, name="grpo-sandbox-ray", daemon=True)
            self._thread.start()
        return self

    def _placements(self) -> list[tuple[str, int]]:
        """(node id, pool size) per actor: one per node that offers CPUs to Ray, or
        ``sandbox.ray.actors`` dealt round-robin over those nodes. A node's CPUs are shared
        by its actors unless ``sandbox.workers`` sets the pool size."""
        nodes = [n for n in self._ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]
        if not nodes:
            raise SandboxError(
                "the Ray cluster has no alive node with CPUs for sandbox actors",
                "start sandbox nodes with `ray start --address HEAD:6379` (their --num-cpus sizes the pools)",
            )
        count = self.ray_config.actors or len(nodes)
        chosen = [nodes[i % len(nodes)] for i in range(count)]
        per_node = collections.Counter(n["NodeID"] for n in chosen)
        return [
            (n["NodeID"], self.config.workers or max(1, int(n["Resources"]["CPU"]) // per_node[n["NodeID"]]))
            for n in chosen
        ]

    def _spawn(self, node_id: str, workers: int, replacements: int = 0) -> _Actor:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
        node_config = dataclasses.replace(self.config, backend=self.ray_config.node_backend, workers=workers)
        # num_cpus=0: the actor's pool sizes itself to the node; reserving Ray CPUs for it
        # could leave it unschedulable next to training tasks on the same node.
        handle = self._cls.options(
            num_cpus=0, scheduling_strategy=strategy, max_restarts=0, max_task_retries=0
        ).remote(node_config)
        name = f"sandbox-actor-{next(self._names)}"
        return _Actor(name, handle, node_id, workers, handle.start.remote(), replacements)

    def _mark_ready(self, actor: _Actor, info: dict[str, Any]) -> None:
        actor.info = info
        actor.name = f"{actor.name}@{info.get('ip', '?')}"
        actor.limit = self.ray_config.max_inflight or 2 * max(1, int(info.get("workers") or 1))
        actor.ready = True
        self.stats["actors_started"] += 1

    def _kill(self, actor: _Actor) -> None:
        try:
            self._ray.kill(actor.handle, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def actors(self) -> list[dict[str, Any]]:
        """The live actors: name, node, pid, pool size, jobs in flight (for diagnostics and tests)."""
        return [
            {**a.info, "name": a.name, "inflight": len(a.inflight), "limit": a.limit, "jobs": a.jobs}
            for a in list(self._actors)
            if a.ready and not a.lost
        ]

    def worker_names(self) -> list[str]:
        return sorted(a["name"] for a in self.actors())

    def fingerprint(self, language: str) -> str:
        """What the actors' nodes run for ``language`` (:meth:`NodeSandbox.fingerprint` of
        each); nodes that run different images make a fingerprint of them all."""
        self.start()
        actors = [a for a in list(self._actors) if a.ready and not a.lost]
        try:
            found = sorted(set(self._ray.get([a.handle.fingerprint.remote(language) for a in actors],
                                             timeout=ACTOR_START_TIMEOUT_S)))
        except Exception as exc:  # noqa: BLE001 - Ray raises many types for a lost actor
            raise SandboxError(f"cannot read the sandbox fingerprint of the Ray actors: {_short(exc)}",
                               "rerun; `grpo-code sandbox doctor` on the nodes tells what is missing") from None
        if len(found) == 1:
            return found[0]
        return hashlib.sha256(" ".join(found).encode()).hexdigest()[:16]

    # ----------------------------------------------------------------- jobs

    def submit(self, job: Job) -> Future[Result]:
        """Queue one job; the future resolves to its :class:`Result` (exactly once)."""
        self.start()
        item = _Item(job, Future())
        self._events.put(("job", item))
        return item.future

    def _loop(self) -> None:
        while True:
            event = self._events.get()
            kind = event[0]
            if kind == "stop":
                return
            try:
                if kind == "job":
                    self._pending.append(event[1])
                elif kind == "done":
                    self._on_done(*event[1:])
                elif kind == "ready":
                    self._on_ready(*event[1:])
                self._dispatch()
            except Exception as exc:  # noqa: BLE001 - a dispatcher bug must not hang callers
                self._fail_all(f"the Ray dispatcher failed: {_short(exc)}")

    def _dispatch(self) -> None:
        while self._pending:
            open_actors = [a for a in self._actors if a.ready and not a.lost and len(a.inflight) < a.limit]
            if not open_actors:
                break
            actor = min(open_actors, key=lambda a: len(a.inflight) / a.limit)
            item = self._pending.popleft()
            if item.future.done():  # cancelled by the caller
                continue
            try:
                ref = actor.handle.run.remote(item.job)
            except Exception as exc:  # noqa: BLE001 - the handle is unusable: treat as lost
                self._pending.appendleft(item)
                self._lose(actor, exc)
                continue
            actor.inflight.add(item)
            ref.future().add_done_callback(lambda f, a=actor, i=item: self._events.put(("done", a, i, f)))
        if self._pending and not any(not a.lost for a in self._actors):
            self._fail_all("no Ray sandbox actor is alive (all died or none could be placed)")

    def _on_done(self, actor: _Actor, item: _Item, fut: Future[Result]) -> None:
        actor.inflight.discard(item)
        exc = fut.exception()
        if exc is None:
            actor.jobs += 1
            self._resolve(item, fut.result())
            return
        if isinstance(exc, self._ray.exceptions.RayActorError):
            self._lose(actor, exc)
        self._retry(item, f"{actor.name}: {_short(exc)}")

    def _on_ready(self, actor: _Actor, fut: Future[Any]) -> None:
        if actor.lost:
            return
        exc = fut.exception()
        if exc is not None:
            actor.lost = True
            self._actors.remove(actor)
            self._kill(actor)
            _warn(f"replacement Ray sandbox actor did not start: {_short(exc)}")
            return
        self._mark_ready(actor, fut.result())

    def _retry(self, item: _Item, why: str) -> None:
        item.attempts += 1
        item.errors.append(why)
        if item.attempts > self.ray_config.retries:
            error = f"lost the job {item.attempts} times on Ray sandbox actors; last: {item.errors[-1]}"
            self._resolve(item, Result.infra_error(len(item.job.tests), error))
            return
        self.stats["resubmitted"] += 1
        self._pending.appendleft(item)

    def _resolve(self, item: _Item, result: Result) -> None:
        if item.future.done():
            return  # answered already (or cancelled): a job resolves once
        try:
            item.future.set_result(result)
        except InvalidStateError:  # cancelled by the caller in between
            return
        self.stats["jobs"] += 1
        if result.status is Status.INFRA_ERROR:
            self.stats["infra_errors"] += 1

    def _lose(self, actor: _Actor, exc: BaseException) -> None:
        """Stop using an actor; its in-flight jobs come back as errors and are resubmitted."""
        if actor.lost:
            return
        actor.lost = True
        self.stats["actors_lost"] += 1
        self._actors.remove(actor)
        self._kill(actor)
        node_alive = any(n.get("NodeID") == actor.node_id and n.get("Alive") for n in self._safe_nodes())
        replace = node_alive and actor.replacements < self.ray_config.retries and not self._closed
        _warn(
            f"Ray sandbox actor {actor.name} lost ({_short(exc)}); its jobs go to the other actors"
            + ("; starting a replacement" if replace else "")
        )
        if replace:
            new = self._spawn(actor.node_id, actor.workers, actor.replacements + 1)
            self._actors.append(new)
            new.ready_ref.future().add_done_callback(lambda f, a=new: self._events.put(("ready", a, f)))

    def _safe_nodes(self) -> list[dict[str, Any]]:
        try:
            return list(self._ray.nodes())
        except Exception:  # noqa: BLE001 - the head is unreachable: no node counts as alive
            return []

    def _fail_all(self, error: str) -> None:
        items = list(self._pending) + [i for a in self._actors for i in a.inflight]
        self._pending.clear()
        for item in items:
            self._resolve(item, Result.infra_error(len(item.job.tests), error))

    # ----------------------------------------------------------------- shutdown

    def shutdown(self) -> None:
        """Stop the dispatcher, fail unanswered jobs, close the actors' pools. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        _LIVE.discard(self)
        if thread is None:
            return
        self._events.put(("stop",))
        thread.join(CLOSE_TIMEOUT_S)
        error = SandboxError("the sandbox was shut down", "create a new Sandbox")
        for item in list(self._pending) + [i for a in self._actors for i in a.inflight]:
            if not item.future.done():
                try:
                    item.future.set_exception(error)
                except InvalidStateError:
                    pass
        self._pending.clear()
        actors, self._actors = list(self._actors), []
        try:
            closing = [a.handle.close.remote() for a in actors if a.ready]
            if closing:
                self._ray.wait(closing, num_returns=len(closing), timeout=CLOSE_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - Ray already gone (interpreter exit)
            pass
        for actor in actors:
            self._kill(actor)
