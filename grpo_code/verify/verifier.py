"""The verifier: one judge of answers for every path.

A training reward, an eval sample (from a model or a samples file), a multi-turn turn,
``tasks check --solutions`` and the reference oracle all judge through a
:class:`Verifier`, so the same answer gets the same verdict wherever it comes from. It
holds each rule once:

- **task lookup**: an answer names its task by id; an id outside the task set is an error;
- **extraction**: a live answer's program (:func:`~grpo_code.tasks.extract.build_program`,
  by prompt style), a samples file's ``completion`` or ``solution``
  (:func:`~grpo_code.tasks.samples.program_from_completion`);
- **the truncation rule** (:func:`.extraction.unfinished`): an answer cut at the length limit whose program runs to the cut
  (a code block never closed) is *unfinished*: its program is not run and it does not pass
  (training scores it ``rewards.tests.truncated``; eval counts it as not passed);
- **jobs**: the task's tests, or its public ones for a multi-turn check;
- **the verdict store**: jobs are keyed by content and the sandbox's fingerprint
  (:mod:`.store`); a key already stored is a hit, a key still running shares the running
  future, only a new key executes; infrastructure errors are never stored;
- **attestation**: a pass of a test whose asserts ran inside the program's process
  (``attested: false``: JavaScript and C++ ``script`` tests) is a ``fail`` unless
  ``trust_unattested`` (:mod:`.attested`); the first such answer is logged once, naming
  its task and the key;
- **failures**: only a :class:`~grpo_code.errors.SandboxError` (the sandbox went away under
  a job) becomes a masked ``infra_error``; any other exception from a job is a bug in our
  host code and is raised, never masked;
and it is composed of one part per concern: extraction (:mod:`.extraction`), the verdict
store with in-flight sharing (:mod:`.runs`); what a multi-turn answer is told of its
program lives with the turns (:mod:`.turns`)::

    verifier = Verifier(suite, sandbox)
    handles = [verifier.submit(task, text) for text in completions]   # jobs start now
    verdicts = verifier.judge(handles)                                 # Judged, in order
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from grpo_code.errors import GrpoCodeError, SandboxError
from grpo_code.sandbox.types import Job, Result, Status, Verdict
from grpo_code.tasks.extract import Extraction
from grpo_code.verify.attested import attested_only, unattested_passes
from grpo_code.verify.extraction import Extractor, unfinished
from grpo_code.verify.failure import Failure, failure_of
from grpo_code.verify.runs import Runs, Source
from grpo_code.verify.store import RewardCache

log = logging.getLogger(__name__)

class UnknownTask(GrpoCodeError):
    """An answer names a task id that is not in the verifier's task set."""


def task_index(tasks: Any) -> dict[str, Any]:
    """Tasks by id from a Suite, a mapping of id to task, or an iterable of tasks."""
    if isinstance(tasks, Mapping):
        return dict(tasks)
    items: Iterable[Any] = getattr(tasks, "tasks", tasks)
    return {t.id: t for t in items}


@dataclass
class Handle:
    """A submitted answer: its extraction and, when its program runs, the job's future."""

    task: Any
    extraction: Extraction
    future: Future[Result] | None
    source: Source
    key: str | None = None
    tests: int = 0
    """How many tests the job runs (an infra error reports that many)."""
    submitted: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class Judged:
    """The verdict on one answer and how it was reached."""

    task_id: str
    result: Result | None
    """The sandbox's result; ``None`` when nothing ran (no code, unfinished)."""
    source: Source
    how: str
    """Which extraction rule found the program (``none`` for no code)."""
    program: str | None = None
    conversation: tuple[dict[str, str], ...] | None = None
    """A multi-turn answer: the answers and the feedback between them."""

    @property
    def status(self) -> str:
        """``pass``, ``fail``, ``infra_error``, ``no_code`` or ``unfinished``."""
        if not self.source.ran:
            return self.source.value
        assert self.result is not None
        return self.result.status.value

    @property
    def passed(self) -> bool:
        return self.result is not None and self.result.status is Status.PASS and self.source.ran

    @property
    def masked(self) -> bool:
        """The sandbox failed, not the program: no verdict (a masked reward, a rerun in eval)."""
        return self.result is not None and self.result.status is Status.INFRA_ERROR

    @property
    def error(self) -> str | None:
        return self.result.error if self.result is not None else None

    @property
    def failure(self) -> Failure | None:
        return failure_of(self.result)

    @property
    def compile_error(self) -> str | None:
        """The compiler's message when the program did not compile."""
        r = self.result
        if r is None or not r.tests or r.tests[0].verdict is not Verdict.COMPILE_ERROR:
            return None
        return r.tests[0].why or "(no message)"


class Verifier:
    """Judges (task, answer) pairs through the sandbox and the verdict store. Thread-safe."""

    def __init__(self, tasks: Any, sandbox: Any, extract: str = "last", cache: RewardCache | None = None,
                 image_id: str | None = None, stop_on_failure: bool = False, trust_unattested: bool = False):
        self.tasks = task_index(tasks)
        self.suite_name = getattr(tasks, "name", None)
        self.trust_unattested = trust_unattested
        """Count a pass of an unattested test as a pass (``rewards.tests.trust_unattested``;
        a reward-hack risk, docs/rewards.md)."""
        self.unattested = 0
        """Lifetime count of answers that lost a pass to the attestation rule."""
        self.stop_on_failure = stop_on_failure
        """Only pass/fail is asked (eval's pass@k, ``tasks check``, an all-or-nothing reward):
        a job stops at its first failing test and the rest are ``not_run``."""
        self.sandbox = sandbox
        self.extractor = Extractor(extract)
        self.runs = Runs(sandbox, cache, image_id)
        self._lock = threading.Lock()

    # ----------------------------------------------------------------- rules

    def task(self, task_id: Any) -> Any:
        task = self.tasks.get(task_id)
        if task is None:
            raise UnknownTask(f"an answer names task id {task_id!r}, which is not in the task set",
                              "judge answers against the suite they were made for (a training dataset, its "
                              "reward functions and an eval's samples must come from one suite)")
        return task

    def fingerprint(self, language: str) -> str:
        return self.runs.fingerprint(language)

    def program(self, task: Any, answer: Any, style: str = "chat") -> Extraction:
        return self.extractor.program(task, answer, style)

    def whole(self, task: Any, partial: str, style: str = "chat") -> bool:
        return self.extractor.whole(task, partial, style)

    def sample_program(self, task: Any, sample: Mapping[str, Any]) -> Extraction:
        return self.extractor.sample_program(task, sample)

    def job(self, task: Any, program: str, public: bool = False) -> Job:
        """The job that runs ``program`` on the task's tests (``public``: its public ones)."""
        return task.job(program, public=public, stop_on_failure=self.stop_on_failure)

    # ----------------------------------------------------------------- running

    def submit(self, task: Any, answer: Any, style: str = "chat", truncated: bool = False) -> Handle:
        """Start (or share) the run of a live answer's program; returns at once."""
        return self.submit_extraction(task, self.program(task, answer, style), truncated)

    def submit_sample(self, task: Any, sample: Mapping[str, Any]) -> Handle:
        """Start the run of a samples-file line (``truncated``: it was cut at the length limit)."""
        return self.submit_extraction(task, self.sample_program(task, sample), bool(sample.get("truncated")))

    def submit_extraction(self, task: Any, extraction: Extraction, truncated: bool = False,
                          public: bool = False) -> Handle:
        if extraction.program is None:
            return self._count(Handle(task, extraction, None, Source.NO_CODE))
        if unfinished(extraction, truncated):
            return self._count(Handle(task, extraction, None, Source.UNFINISHED))
        job = self.job(task, extraction.program, public)
        future, source, key = self.runs.run(job)
        return self._count(Handle(task, extraction, future, source, key, len(job.tests)))

    def record(self, task: Any, program: str) -> Handle:
        """Run ``program`` as the task's reference whose answers become the expected values
        (the reference oracle's record job; never stored: the oracle keeps its own cache)."""
        job = task.job(program, record=True)
        return self._count(Handle(task, Extraction(program, "solution"), self.sandbox.submit(job), Source.EXECUTED,
                                  tests=len(job.tests)))

    def start(self, job: Job, launched: Any = lambda key: None) -> str | None:
        """Start ``job`` if no run of it is stored or running (speculation): :meth:`.runs.Runs.start`."""
        return self.runs.start(job, launched)

    def _count(self, handle: Handle) -> Handle:
        self.runs.count(handle.source)
        return handle

    def recount(self, handle: Handle, source: Source) -> None:
        """Say that ``handle`` got its verdict another way (a speculative run was its own)."""
        self.runs.recount(handle.source, source)
        handle.source = source

    @property
    def counts(self) -> dict[str, int]:
        """Lifetime count of answers per source (:data:`.runs.SOURCES`)."""
        return self.runs.counts

    # ----------------------------------------------------------------- verdicts

    @staticmethod
    def result(handle: Handle, timeout: float | None = None) -> Result | None:
        """The handle's result (``None``: nothing ran). Only the sandbox's own failure is
        masked; anything else raised is a bug in our host code and propagates."""
        if handle.future is None:
            return None
        try:
            return handle.future.result(timeout=timeout)
        except SandboxError as exc:  # the sandbox went away under the job: its fault, not the program's
            return Result.infra_error(handle.tests, f"{type(exc).__name__}: {exc}")

    def judged(self, handle: Handle, timeout: float | None = None) -> Judged:
        return Judged(handle.task.id, self.attested(handle.task, self.result(handle, timeout)), handle.source,
                      handle.extraction.how, handle.extraction.program)

    def attested(self, task: Any, result: Result | None) -> Result | None:
        """The attestation rule (:mod:`.attested`) applied to one raw result."""
        if self.trust_unattested or not unattested_passes(result):
            return result
        with self._lock:
            self.unattested += 1
            first = self.unattested == 1
        if first:
            log.warning("suite %s, task %s (%s): a pass rests on tests judged inside the program's process (attested: "
                        "false); it counts as a fail. Convert the suite's asserts to call or io tests, or set "
                        "rewards.tests.trust_unattested=true to accept the reward-hack risk (docs/rewards.md)",
                        self.suite_name or "?", task.id, task.language)
        return attested_only(result)

    def judge(self, handles: Sequence[Handle], timeout: float | None = None) -> list[Judged]:
        """Block until every handle has a result; verdicts in handle order."""
        return [self.judged(h, timeout) for h in handles]

    async def gather(self, handles: Sequence[Handle]) -> list[Judged]:
        """``judge`` for async code: awaits the jobs without blocking the event loop."""
        pending = [asyncio.wrap_future(h.future) for h in handles if h.future is not None]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        return self.judge(handles)

    def close(self) -> None:
        self.runs.close()


def masked_errors(verdicts: Sequence[Judged]) -> list[str]:
    """The sandbox's messages for the masked verdicts (for error reports)."""
    return [v.error or "" for v in verdicts if v.masked]
