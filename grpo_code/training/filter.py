"""Prompt filtering: spend fewer generations on prompts that carry no gradient.

In GRPO a group whose rewards are all equal (every completion passed, or every one
failed) has zero advantage and contributes nothing to the update. :class:`PromptFilter`
keeps, per task, whether its last ``history`` groups were like that; the
:class:`FilteringSampler` then skips such a task with probability ``skip_prob`` and takes
it otherwise, so it is re-probed now and then (the model may have changed).
"""

from __future__ import annotations

import random
import threading
from collections import deque
from collections.abc import Iterator, Sequence, Sized

from torch.utils.data import Sampler


class PromptFilter:
    def __init__(self, history: int = 2, skip_prob: float = 0.8, seed: int = 0):
        self.history = history
        self.skip_prob = skip_prob
        self._zero: dict[str, deque[bool]] = {}
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.taken = 0
        self.skipped = 0

    def record(self, task_id: str, rewards: Sequence[float | None]) -> None:
        """Note one group's rewards (masked ones ignored)."""
        present = [r for r in rewards if r is not None]
        if len(present) < 2:
            return
        zero = max(present) - min(present) < 1e-9
        with self._lock:
            self._zero.setdefault(task_id, deque(maxlen=self.history)).append(zero)

    def zero_advantage(self, task_id: str) -> bool:
        seen = self._zero.get(task_id)
        return seen is not None and len(seen) == self.history and all(seen)

    def admit(self, task_id: str) -> bool:
        """Whether to generate for this task now (counts skips for the metrics)."""
        with self._lock:
            if self.zero_advantage(task_id) and self._rng.random() < self.skip_prob:
                self.skipped += 1
                return False
            self.taken += 1
            return True

    def take_counts(self) -> tuple[int, int]:
        """(taken, skipped) since the last call."""
        with self._lock:
            out = (self.taken, self.skipped)
            self.taken = self.skipped = 0
        return out


class FilteringSampler(Sampler[int]):
    """TRL's repeat pattern (each prompt ``mini_repeat_count`` times in a row, each chunk of
    ``batch_size`` prompts ``repeat_count`` times), drawing prompts the filter admits."""

    def __init__(self, data_source: Sized, task_ids: Sequence[str], prompt_filter: PromptFilter,
                 mini_repeat_count: int, batch_size: int, repeat_count: int, seed: int = 0):
        self.task_ids = list(task_ids)
        self.filter = prompt_filter
        self.mini_repeat_count = mini_repeat_count
        self.batch_size = batch_size
        self.repeat_count = repeat_count
        self.num_samples = len(data_source)
        self._rng = random.Random(seed)
        self._order: list[int] = []

    def _next_index(self) -> int:
        tries = 0
        while True:
            if not self._order:
                self._order = list(range(self.num_samples))
                self._rng.shuffle(self._order)
            index = self._order.pop()
            tries += 1
            # Never stall: after a full pass of refusals, take the prompt anyway.
            if tries > self.num_samples or self.filter.admit(self.task_ids[index]):
                return index

    def __iter__(self) -> Iterator[int]:
        for _ in range(self.num_samples // self.batch_size):
            chunk = [self._next_index() for _ in range(self.batch_size)]
            for _ in range(self.repeat_count):
                for index in chunk:
                    for _ in range(self.mini_repeat_count):
                        yield index

    def __len__(self) -> int:
        return (self.num_samples // self.batch_size) * self.batch_size * self.mini_repeat_count * self.repeat_count
