"""The verdict store with in-flight sharing: how a job's result is had, once per content.

A job is keyed by its content and the sandbox's fingerprint (:func:`~.store.cache_key`). A
key already stored is a hit (``cache``), a key still running shares the running future
(``inflight``), only a new key executes (``executed``). A finished run is stored unless the
sandbox failed it (infrastructure errors are never stored). Without a store every job runs.
:class:`Runs` also counts, over its lifetime, how each answer got its verdict.
"""

from __future__ import annotations

import enum
import threading
from concurrent.futures import Future
from typing import Any

from grpo_code.sandbox.fingerprint import sandbox_fingerprint
from grpo_code.sandbox.types import Job, Result
from grpo_code.verify.store import RewardCache, cache_key


class Source(str, enum.Enum):
    """How an answer got its verdict: where it came from, or why nothing ran (what the
    verdict says is the result's :class:`~grpo_code.sandbox.types.Status`)."""

    NO_CODE = "no_code"
    """No program in the answer: nothing ran."""
    UNFINISHED = "unfinished"
    """Cut at the length limit inside its program: not run."""
    CACHE = "cache"
    """A stored verdict of the same program on the same tests."""
    INFLIGHT = "inflight"
    """A run it shared with an identical program still running."""
    EXECUTED = "executed"
    """Its own run."""

    def __str__(self) -> str:
        return self.value

    @property
    def ran(self) -> bool:
        """A program ran for it (its own run, or one it shared or found stored)."""
        return self not in (Source.NO_CODE, Source.UNFINISHED)

    @property
    def reused(self) -> bool:
        """Its verdict came from another answer's run."""
        return self in (Source.CACHE, Source.INFLIGHT)


SOURCES = tuple(Source)


class Runs:
    """Jobs through the store, shared while in flight. Thread-safe."""

    def __init__(self, sandbox: Any, cache: RewardCache | None = None, image_id: str | None = None):
        self.sandbox = sandbox
        self.cache = cache
        self._image_id = image_id
        self._lock = threading.RLock()
        self._inflight: dict[str, Future[Result]] = {}
        self.counts: dict[Source, int] = {s: 0 for s in SOURCES}
        """Lifetime count of answers per source."""

    def fingerprint(self, language: str) -> str:
        """What store keys carry of the sandbox: ``sandbox.fingerprint(language)``, or, with an
        ``image_id`` given to the constructor, that id standing for the image of every language."""
        if self._image_id is not None:
            return sandbox_fingerprint(self._image_id, language, self.sandbox.config)
        return self.sandbox.fingerprint(language)

    def run(self, job: Job) -> tuple[Future[Result], Source, str | None]:
        """A job's result through the store: (future, source, key)."""
        if self.cache is None:
            return self.sandbox.submit(job), Source.EXECUTED, None
        key = cache_key(job, self.sandbox.config, self.fingerprint(job.language))
        with self._lock:
            cached = self.cache.get(key)
            if cached is not None:
                done: Future[Result] = Future()
                done.set_result(cached)
                return done, Source.CACHE, key
            running = self._inflight.get(key)
            if running is not None:
                return running, Source.INFLIGHT, key
            return self._launch(key, job), Source.EXECUTED, key

    def start(self, job: Job, launched: Any = lambda key: None) -> str | None:
        """Start ``job`` if no run of it is stored or running (speculation); its key, or ``None``.
        ``launched(key)`` runs before any other submission can share the run."""
        if self.cache is None:
            return None
        key = cache_key(job, self.sandbox.config, self.fingerprint(job.language))
        with self._lock:
            if key in self._inflight or self.cache.get(key) is not None:
                return None
            self._launch(key, job)
            launched(key)
        return key

    def _launch(self, key: str, job: Job) -> Future[Result]:
        # Waiters get the result only after it is stored: a caller that finishes on the last
        # verdict and opens a new store (a rerun, the next audit) finds every verdict there.
        shared: Future[Result] = Future()
        shared.set_running_or_notify_cancel()
        with self._lock:
            self._inflight[key] = shared
        self.sandbox.submit(job).add_done_callback(lambda f, k=key: self._finished(k, f, shared))
        return shared

    def _finished(self, key: str, future: Future[Result], shared: Future[Result]) -> None:
        try:
            result, error = future.result(), None
        except BaseException as exc:  # cancelled or crashed: nothing to store (the waiter sees why)
            result, error = None, exc
        with self._lock:
            if result is not None and self.cache is not None:
                self.cache.put(key, result)  # refuses infra errors
            if self._inflight.get(key) is shared:
                del self._inflight[key]
        if error is not None:
            shared.set_exception(error)
        else:
            shared.set_result(result)

    def count(self, source: Source) -> None:
        with self._lock:
            self.counts[source] += 1

    def recount(self, was: Source, source: Source) -> None:
        """An answer counted as ``was`` got its verdict as ``source`` after all."""
        with self._lock:
            self.counts[was] -= 1
            self.counts[source] += 1

    @property
    def hit_rate(self) -> float:
        """Lifetime share of answers with code that did not need a new execution."""
        with_code = sum(n for s, n in self.counts.items() if s.ran)
        return sum(n for s, n in self.counts.items() if s.reused) / with_code if with_code else 0.0

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
