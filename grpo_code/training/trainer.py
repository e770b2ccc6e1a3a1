"""The GRPO trainer: TRL's ``GRPOTrainer`` with our rollouts, our prompt sampler and a step timer.

Generation goes through TRL's public ``rollout_func`` (:mod:`.rollouts`: the project's
own backends, each sample a typed record, scoring started as each completion ends); the
reward function (:class:`~grpo_code.rewards.functions.CodeReward`) claims the records'
verdicts, logs the batch's timings and hands the scored rows to
:class:`~grpo_code.training.rollout_log.RolloutLog` (``completions.jsonl``, the prompt
filter). What is left here: the prompt filter's sampler (through the seam's one hook for
it) and ``timing/step_s``. Logged per step:

- ``timing/generate_s``: time spent generating,
- ``timing/reward_wait_s``: time blocked in the reward function after generation,
- ``timing/sandbox_busy_s``: summed run time of the sandbox jobs executed for the step,
- ``timing/step_s``: wall time of the whole step (generation, scoring, update).
"""

from __future__ import annotations

import ctypes
import json
import os
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from grpo_code import metric_names as M
from grpo_code.training.filter import FilteringSampler, PromptFilter
from grpo_code.training.trl_seam import RepeatPattern, SeamTrainer


class GrpoCodeTrainer(SeamTrainer):
    def __init__(self, *args: Any, prompt_filter: PromptFilter | None = None, trim_padding: bool = True,
                 skip_zero_advantage: bool = False, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.trim_padding = trim_padding
        self.skip_zero_advantage = skip_zero_advantage
        self.prompt_filter = prompt_filter
        self.filter_sampler: FilteringSampler | None = None
        self._sampler_state: dict[str, Any] | None = None
        # First, so every other callback (metrics.jsonl, TensorBoard, the progress bar) sees the step's time.
        self.callback_handler.callbacks.insert(0, StepTimer())
        if prompt_filter is not None:
            self.add_callback(FilterCheckpoint(self))

    def train_sampler(self, dataset: Any, pattern: RepeatPattern) -> Any:
        if self.prompt_filter is None:
            return None
        self.filter_sampler = FilteringSampler(dataset, dataset["task_id"], self.prompt_filter,
                                               pattern.mini_repeat_count, pattern.batch_size, pattern.repeat_count,
                                               seed=pattern.seed)
        if self._sampler_state is not None:
            self.filter_sampler.load_state_dict(self._sampler_state)
        return self.filter_sampler

    def filter_state(self) -> dict[str, Any]:
        """What ``prompt_filter.json`` holds: the filter's and its sampler's state."""
        assert self.prompt_filter is not None
        sampler = self.filter_sampler.state_dict() if self.filter_sampler is not None else None
        return {"filter": self.prompt_filter.state_dict(), "sampler": sampler}

    def restore_filter(self, checkpoint: Path) -> bool:
        """Load the prompt filter's state saved in ``checkpoint``; False when it holds none
        (a checkpoint of a run without the filter, or of an older grpo-code)."""
        path = Path(checkpoint) / FILTER_STATE
        if self.prompt_filter is None or not path.is_file():
            return False
        state = json.loads(path.read_text())
        self.prompt_filter.load_state_dict(state["filter"])
        self._sampler_state = state["sampler"]
        return True


FILTER_STATE = "prompt_filter.json"


class FilterCheckpoint(TrainerCallback):
    """Writes the prompt filter's state into each checkpoint, for a faithful ``--resume``."""

    def __init__(self, trainer: GrpoCodeTrainer) -> None:
        self.trainer = trainer

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if checkpoint.is_dir():
            tmp = checkpoint / (FILTER_STATE + ".tmp")
            tmp.write_text(json.dumps(self.trainer.filter_state()))
            os.replace(tmp, checkpoint / FILTER_STATE)


class StepTimer(TrainerCallback):
    """``timing/step_s``: the wall time of each optimizer step (generation, scoring, update),
    added to the step's logged values."""

    def __init__(self) -> None:
        self._started: float | None = None
        self._last: float | None = None

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._started = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._started is not None:
            self._last = time.perf_counter() - self._started
        release_free_memory()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if logs is not None and self._last is not None and "loss" in logs:
            logs[M.STEP_S] = self._last
            logs.update(process_memory())


_PROCESS = ctypes.CDLL(None)
"""The symbols already loaded into this process (the C library's among them)."""


def release_free_memory() -> None:
    """Hand the memory the allocator holds free back to the system (glibc's
    ``malloc_trim``), once per step: the process then holds what it needs between steps,
    not the holes its last step's tensors left (the demo: 2.4 GiB instead of 3.4-5.3). It
    does not lower the peak, which is the step's own working set. Elsewhere than glibc,
    nothing."""
    trim = getattr(_PROCESS, "malloc_trim", None)
    if trim is not None:
        trim(0)


def process_memory() -> dict[str, float]:
    """This process's resident memory now and at its peak, in GiB (Linux; else nothing)."""
    out = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[M.RSS_GIB if key == "VmRSS" else M.PEAK_RSS_GIB] = int(value.split()[0]) / (1 << 20)
    except OSError:
        return {}
    return out
