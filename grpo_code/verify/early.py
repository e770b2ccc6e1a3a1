"""Scoring that starts while a batch still generates: the trainer's rollouts hold this.

- ``submit(task_id, text, truncated)``: a completion just ended; its program starts now and
  the returned handle travels with the completion's rollout record to the reward function;
- ``speculate(task_id, partial)``: a completion still being generated holds a closed code
  block; that program starts now (if the finished completion extracts the same program,
  that run is its run, counted as executed, not as a cache hit);
- ``discard()``: every completion of the batch has its handle; speculations none took were wasted.

``on_program(task, program, verdict)``, if given, hears of each program as it starts: a
finished completion's (``verdict``: the future of its result, ``None`` without code) and a
speculated one's (``verdict`` ``None``). The generative judge starts its judgments there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from grpo_code.verify.runs import Source
from grpo_code.verify.verifier import Handle, Verifier


class EarlyJobs:
    """Early submission and speculation for one trainer (thread-safe)."""

    def __init__(self, verifier: Verifier, style: str,
                 on_program: Callable[[Any, str | None, Any], None] | None = None):
        self.verifier = verifier
        self.style = style
        self.on_program = on_program
        self._lock = threading.Lock()
        self._speculative: set[str] = set()
        self.speculated = 0
        """Jobs started by ``speculate``; ``speculation_wasted`` of them were never claimed."""
        self.speculation_wasted = 0
        self._batch_speculated = 0

    def submit(self, task_id: str, text: str, truncated: bool = False) -> Handle:
        """Start the job of a finished completion; its record carries the handle."""
        task = self.verifier.task(task_id)
        handle = self._own(self.verifier.submit(task, text, self.style, truncated))
        if self.on_program is not None:
            self.on_program(task, handle.extraction.program, handle.future)
        return handle

    def speculate(self, task_id: str, partial: str) -> bool:
        """Start the program of a completion still being generated, when it is whole (a code
        block that closed) and not yet stored or running. Needs the verdict store. Returns
        whether a job started."""
        task = self.verifier.task(task_id)
        extraction = self.verifier.program(task, partial, self.style)
        if extraction.program is None or extraction.cut:
            return False
        def launched(key: str) -> None:  # under the verifier's lock: no submission shares it unseen
            with self._lock:
                self._speculative.add(key)
                self.speculated += 1
                self._batch_speculated += 1

        if self.on_program is not None:
            self.on_program(task, extraction.program, None)
        return self.verifier.start(self.verifier.job(task, extraction.program), launched) is not None

    def _own(self, handle: Handle) -> Handle:
        """A job this trainer started by speculation is the completion's own run, not a reuse."""
        with self._lock:
            mine = handle.key is not None and handle.key in self._speculative
            self._speculative.discard(handle.key or "")
        if mine and handle.source is not Source.EXECUTED:
            self.verifier.recount(handle, Source.EXECUTED)
        return handle

    def discard(self) -> tuple[int, int]:
        """The batch's completions all have their handles: count the speculated jobs none took
        as wasted. Returns the batch's ``(speculated, wasted)``: since the last call."""
        with self._lock:
            n = len(self._speculative)
            self.speculation_wasted += n
            self._speculative.clear()
            started, self._batch_speculated = self._batch_speculated, 0
        return started, n
