"""Prompt filtering: spend fewer generations on prompts that carry no gradient.

In GRPO a group whose rewards are all equal (every completion passed, or every one
failed) has zero advantage and contributes nothing to the update. :class:`PromptFilter`
keeps, per task, whether its last ``history`` groups were like that; the
:class:`FilteringSampler` then skips such a task with probability ``skip_prob`` and takes
it otherwise, so it is re-probed now and then (the model may have changed).

Both keep state a checkpoint must hold for ``--resume`` to draw the prompts an
uninterrupted run draws: the filter's per-task history and random state, and the
sampler's random state, its pending shuffle and the chunks it drew in the current epoch
(``state_dict`` / ``load_state_dict``, written to ``prompt_filter.json`` in each
checkpoint). On resume the Trainer skips the batches already trained by iterating the
sampler again; the restored sampler replays the chunks it had drawn (filter untouched)
and then draws on from the saved random states.
"""

from __future__ import annotations

import random
import threading
from collections import deque
from collections.abc import Iterator, Sequence, Sized
from typing import Any

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

    def state_dict(self) -> dict[str, Any]:
        with self._lock:
            return {"history": self.history, "zero": {t: list(v) for t, v in self._zero.items()},
                    "rng": _rng_state(self._rng)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with self._lock:
            self._zero = {t: deque(v, maxlen=self.history) for t, v in state["zero"].items()}
            self._rng.setstate(_rng_from(state["rng"]))

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
        self._epoch = 0
        self._drawn: list[list[int]] = []
        """Chunks drawn in the current epoch, in order."""
        self._replay: tuple[int, list[list[int]]] | None = None
        """(epoch, chunks) to hand out again before drawing, after a restore."""

    def set_epoch(self, epoch: int) -> None:
        """Called by the Trainer (through accelerate's data loader) before each epoch."""
        self._epoch = epoch

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self._epoch, "drawn": [list(c) for c in self._drawn], "order": list(self._order),
                "rng": _rng_state(self._rng)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._epoch = int(state["epoch"])
        self._order = [int(i) for i in state["order"]]
        self._rng.setstate(_rng_from(state["rng"]))
        self._replay = (self._epoch, [[int(i) for i in c] for c in state["drawn"]])

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
        replay: list[list[int]] = []
        if self._replay is not None and self._replay[0] == self._epoch:
            replay = self._replay[1]
        self._replay = None
        self._drawn = []
        for i in range(self.num_samples // self.batch_size):
            chunk = replay[i] if i < len(replay) else [self._next_index() for _ in range(self.batch_size)]
            self._drawn.append(chunk)
            for _ in range(self.repeat_count):
                for index in chunk:
                    for _ in range(self.mini_repeat_count):
                        yield index

    def __len__(self) -> int:
        return (self.num_samples // self.batch_size) * self.batch_size * self.mini_repeat_count * self.repeat_count


def _rng_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _rng_from(state: Sequence[Any]) -> tuple[Any, ...]:
    return (state[0], tuple(state[1]), state[2])
