"""The seam between a trainer that overlaps scoring with generation and the verifier.

The trainer sees completions as they are generated; the reward function sees them later,
as TRL hands them over. :class:`EarlyJobs` is all the trainer holds of scoring:

- ``submit(task_id, text, truncated)``: a completion just ended; its program starts now;
- ``speculate(task_id, partial)``: a completion still being generated holds a closed code
  block; that program starts now (if the finished completion extracts the same program,
  that run is its run, counted as executed, not as a cache hit);
- ``discard()``: the batch is over; forget what was not claimed.

``on_program(task, program, verdict)``, if given, hears of each program as it starts: a
finished completion's (``verdict``: the future of its result, ``None`` without code) and a
speculated one's (``verdict`` ``None``). The generative judge starts its judgments there.

The reward function ``claim``s each completion's early handle (or submits it then).
Handles are keyed by (task id, text, whether it was cut at the length limit).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from grpo_code.tasks.prompts import completion_text
from grpo_code.verify.verifier import Handle, Verifier


def cut_at_limit(completion_ids: Sequence[int] | None, end_token_ids: frozenset[int]) -> bool:
    """Whether a completion's token ids stop without an end token (cut at the length limit).
    Without end tokens (or ids) nothing counts as cut."""
    if not end_token_ids or completion_ids is None:
        return False
    return not len(completion_ids) or int(completion_ids[-1]) not in end_token_ids


class EarlyJobs:
    """Early submission and speculation for one trainer (thread-safe)."""

    def __init__(self, verifier: Verifier, style: str,
                 on_program: Callable[[Any, str | None, Any], None] | None = None):
        self.verifier = verifier
        self.style = style
        self.on_program = on_program
        self._lock = threading.Lock()
        self._early: dict[tuple[str, str, bool], list[Handle]] = defaultdict(list)
        self._speculative: set[str] = set()
        self.speculated = 0
        """Jobs started by ``speculate``; ``speculation_wasted`` of them were never claimed."""
        self.speculation_wasted = 0

    def submit(self, task_id: str, text: str, truncated: bool = False) -> Handle:
        """Start the job of a finished completion; the reward function claims it later."""
        task = self.verifier.task(task_id)
        handle = self._own(self.verifier.submit(task, text, self.style, truncated))
        with self._lock:
            self._early[(task_id, text, truncated)].append(handle)
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

        if self.on_program is not None:
            self.on_program(task, extraction.program, None)
        return self.verifier.start(self.verifier.job(task, extraction.program), launched) is not None

    def claim(self, task: Any, completion: Any, style: str, truncated: bool = False) -> Handle:
        """The early handle of this completion if there is one, else a fresh submission."""
        with self._lock:
            waiting = self._early.get((task.id, completion_text(completion), truncated))
            if waiting and style == self.style:
                return waiting.pop(0)
        return self._own(self.verifier.submit(task, completion, style, truncated))

    def _own(self, handle: Handle) -> Handle:
        """A job this trainer started by speculation is the completion's own run, not a reuse."""
        with self._lock:
            mine = handle.key is not None and handle.key in self._speculative
            self._speculative.discard(handle.key or "")
        if mine and handle.source != "executed":
            self.verifier.recount(handle, "executed")
        return handle

    def discard(self) -> int:
        """Forget unclaimed early handles (the batch is over); returns how many."""
        with self._lock:
            n = sum(len(v) for v in self._early.values())
            self._early.clear()
            self.speculation_wasted += len(self._speculative)
            self._speculative.clear()
        return n
