"""Scoring completions against their tasks' tests, early and once per distinct program.

:class:`RewardScorer` is the object training and eval hold. ``submit(task, completion)``
extracts the program and starts its sandbox job at once, returning a :class:`Handle`;
``wait(handles)`` (or ``await scorer.gather(handles)``) turns handles into
:class:`Scored` items with the reward. A trainer that overlaps scoring with generation
calls ``submit_early`` as each completion appears, and ``speculate`` on a completion still
being generated once it holds a closed code block (its program starts running; if the
finished completion extracts the same program, that run is its run). The reward function
later ``claim``s the early handles instead of submitting again::

    scorer = RewardScorer(cfg.rewards, Sandbox(cfg.sandbox))
    handles = [scorer.submit(task, text) for text in completions]   # jobs start now
    rewards = [s.reward for s in scorer.wait(handles)]               # None = masked

Every job goes through the content-addressed cache (:mod:`.cache`): a key already
stored is a hit, a key still running shares the running future (``inflight``), and only
a new key executes. Infrastructure errors are not cached, so a rerun retries them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from grpo_code.config import RewardsConfig
from grpo_code.errors import SandboxError
from grpo_code.rewards.cache import RewardCache, cache_key
from grpo_code.rewards.model.reward_model import message_text
from grpo_code.rewards.verifiable import score_result, weights_for
from grpo_code.sandbox.fingerprint import sandbox_fingerprint
from grpo_code.sandbox.types import Result, Status
from grpo_code.tasks.extract import Extraction, build_program

SOURCES = ("no_code", "unfinished", "cache", "inflight", "executed")


def completion_text(completion: Any) -> str:
    """The text of a completion: a string, or the assistant messages of a conversation."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return message_text(completion)
    messages = list(completion)
    assistant = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
    return "\n".join(message_text(m) for m in (assistant or messages))


@dataclass
class Handle:
    """A submitted completion: its extraction and, when it has code, the job's future."""

    task: Any
    extraction: Extraction
    future: Future[Result] | None
    source: str
    key: str | None = None
    weights: tuple[float, ...] | None = None
    submitted: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class Scored:
    """The reward of one completion and how it was obtained."""

    task_id: str
    reward: float | None
    result: Result | None
    source: str
    how: str
    program: str | None = None
    """The extracted program that ran (None: no code)."""

    @property
    def error(self) -> str | None:
        return self.result.error if self.result is not None else None


class RewardScorer:
    """Turns (task, completion) pairs into rewards through the sandbox and the cache. Thread-safe."""

    def __init__(self, config: RewardsConfig, sandbox: Any, extract: str = "last",
                 image_id: str | None = None, cache: RewardCache | None = None):
        self.config = config
        self.sandbox = sandbox
        self.extract = extract
        self._image_id = image_id
        if cache is None and config.cache:
            cache = RewardCache(config.cache_size, config.cache_path)
        self.cache = cache if config.cache else None
        self._lock = threading.RLock()
        self._inflight: dict[str, Future[Result]] = {}
        self._early: dict[tuple[str, str, str, bool], list[Handle]] = defaultdict(list)
        self._speculative: set[str] = set()
        self.speculated = 0
        """Jobs started by ``speculate``; ``speculation_wasted`` of them were never claimed."""
        self.speculation_wasted = 0
        self.counts: dict[str, int] = {s: 0 for s in SOURCES}
        """Lifetime count of completions per source (no_code, cache, inflight, executed)."""

    def fingerprint(self, language: str) -> str:
        """What cache keys carry of the sandbox: ``sandbox.fingerprint(language)``, or, with an
        ``image_id`` given to the constructor, that id standing for the image of every language."""
        if self._image_id is not None:
            return sandbox_fingerprint(self._image_id, language, self.sandbox.config)
        return self.sandbox.fingerprint(language)

    # ----------------------------------------------------------------- submitting

    def submit(self, task: Any, completion: Any, style: str = "chat", truncated: bool = False) -> Handle:
        """Extract the program and start (or share) its job; returns immediately.

        ``truncated``: the completion was cut at the length limit. If its program runs to
        the cut (an unclosed code block), the program is unfinished: it is not run and
        scores ``rewards.tests.truncated`` (unless that is null)."""
        extraction = build_program(task, completion_text(completion), style, self.extract)
        weights = weights_for(task, self.config.tests)
        if extraction.program is None:
            return self._count(Handle(task, extraction, None, "no_code", weights=weights))
        if truncated and extraction.cut and self.config.tests.truncated is not None:
            return self._count(Handle(task, extraction, None, "unfinished", weights=weights))
        job = task.job(extraction.program)
        if self.cache is None:
            return self._count(Handle(task, extraction, self.sandbox.submit(job), "executed", weights=weights))
        key = cache_key(job, self.sandbox.config, self.fingerprint(job.language))
        with self._lock:
            # A job started by ``speculate`` is this completion's own execution, not a reuse.
            reused = "executed" if key in self._speculative else None
            self._speculative.discard(key)
            cached = self.cache.get(key)
            if cached is not None:
                done: Future[Result] = Future()
                done.set_result(cached)
                return self._count(Handle(task, extraction, done, reused or "cache", key, weights))
            running = self._inflight.get(key)
            if running is not None:
                return self._count(Handle(task, extraction, running, reused or "inflight", key, weights))
            future = self._launch(key, job)
        return self._count(Handle(task, extraction, future, "executed", key, weights))

    def _launch(self, key: str, job: Any) -> Future[Result]:
        """Start ``job`` as the one run of ``key``; its result goes to the cache. Call with the lock held."""
        future = self.sandbox.submit(job)
        self._inflight[key] = future
        future.add_done_callback(lambda f, k=key: self._finished(k, f))
        return future

    def _count(self, handle: Handle) -> Handle:
        with self._lock:
            self.counts[handle.source] += 1
        return handle

    def _finished(self, key: str, future: Future[Result]) -> None:
        try:
            result = future.result()
        except BaseException:  # cancelled or crashed: nothing to cache
            result = None
        with self._lock:
            if self._inflight.get(key) is future:
                if result is not None and self.cache is not None:
                    self.cache.put(key, result)  # refuses infra errors
                del self._inflight[key]

    def submit_early(self, task: Any, completion: Any, style: str = "chat", truncated: bool = False) -> Handle:
        """``submit`` for a completion the reward function will see later; it ``claim``s this handle."""
        handle = self.submit(task, completion, style, truncated)
        with self._lock:
            self._early[(task.id, style, completion_text(completion), truncated)].append(handle)
        return handle

    def speculate(self, task: Any, partial: Any, style: str = "chat") -> bool:
        """Start the job of the program in a completion that is still being generated.

        Nothing is counted or claimed: the job only warms the cache, so a finished completion
        that extracts the same program finds it running or done. Needs the cache. A program
        that runs to the end of the text so far (an unclosed code block) is still being
        written and is not run. Returns whether a new job started."""
        if self.cache is None:
            return False
        extraction = build_program(task, completion_text(partial), style, self.extract)
        if extraction.program is None or extraction.cut:
            return False
        job = task.job(extraction.program)
        key = cache_key(job, self.sandbox.config, self.fingerprint(job.language))
        with self._lock:
            if key in self._inflight or self.cache.get(key) is not None:
                return False
            self._launch(key, job)
            self._speculative.add(key)
            self.speculated += 1
        return True

    def claim(self, task: Any, completion: Any, style: str = "chat", truncated: bool = False) -> Handle:
        """The early handle of this completion if there is one, else a fresh ``submit``."""
        with self._lock:
            waiting = self._early.get((task.id, style, completion_text(completion), truncated))
            if waiting:
                return waiting.pop(0)
        return self.submit(task, completion, style, truncated)

    def discard_early(self) -> int:
        """Forget unclaimed early handles (e.g. a batch that was dropped); returns how many."""
        with self._lock:
            n = sum(len(v) for v in self._early.values())
            self._early.clear()
            self.speculation_wasted += len(self._speculative)
            self._speculative.clear()
        return n

    # ----------------------------------------------------------------- results

    def _scored(self, handle: Handle, result: Result | None) -> Scored:
        if handle.source == "unfinished":
            reward = self.config.tests.truncated
        elif handle.future is not None:
            reward = score_result(result, self.config.tests, handle.weights)
        else:
            reward = score_result(None, self.config.tests)
        return Scored(handle.task.id, reward, result, handle.source, handle.extraction.how,
                      handle.extraction.program)

    @staticmethod
    def _result(handle: Handle, timeout: float | None) -> Result | None:
        if handle.future is None:
            return None
        try:
            return handle.future.result(timeout=timeout)
        except SandboxError as exc:  # the sandbox went away under the job: its fault, not the program's
            return Result.infra_error(len(handle.task.tests), f"{type(exc).__name__}: {exc}")
        # Anything else is a bug in our host code: it fails the step, loudly, and is never
        # a masked reward (the sandbox reports its own failures as infra_error results).

    def wait(self, handles: Sequence[Handle], timeout: float | None = None) -> list[Scored]:
        """Block until every handle has a result; rewards in handle order."""
        return [self._scored(h, self._result(h, timeout)) for h in handles]

    async def gather(self, handles: Sequence[Handle]) -> list[Scored]:
        """``wait`` for async code: awaits the jobs without blocking the event loop."""
        pending = [asyncio.wrap_future(h.future) for h in handles if h.future is not None]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        return self.wait(handles)

    def scores(self, handles: Sequence[Handle]) -> list[float | None]:
        """Just the rewards of ``wait``."""
        return [s.reward for s in self.wait(handles)]

    @property
    def hit_rate(self) -> float:
        """Lifetime share of completions with code that did not need a new execution."""
        with_code = self.counts["cache"] + self.counts["inflight"] + self.counts["executed"]
        return (self.counts["cache"] + self.counts["inflight"]) / with_code if with_code else 0.0

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()


def masked_errors(scored: Sequence[Scored]) -> list[str]:
    """The sandbox's messages for the masked items (for error reports)."""
    return [s.error or "" for s in scored if s.reward is None and s.result is not None
            and s.result.status is Status.INFRA_ERROR]
