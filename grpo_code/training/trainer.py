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

import time
from typing import Any

from transformers import TrainerCallback

from grpo_code import metric_names as M
from grpo_code.training.filter import FilteringSampler, PromptFilter
from grpo_code.training.trl_seam import RepeatPattern, SeamTrainer


class GrpoCodeTrainer(SeamTrainer):
    def __init__(self, *args: Any, prompt_filter: PromptFilter | None = None, trim_padding: bool = True,
                 **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.trim_padding = trim_padding
        self.prompt_filter = prompt_filter
        # First, so every other callback (metrics.jsonl, TensorBoard, the progress bar) sees the step's time.
        self.callback_handler.callbacks.insert(0, StepTimer())

    def train_sampler(self, dataset: Any, pattern: RepeatPattern) -> Any:
        if self.prompt_filter is None:
            return None
        return FilteringSampler(dataset, dataset["task_id"], self.prompt_filter, pattern.mini_repeat_count,
                                pattern.batch_size, pattern.repeat_count, seed=pattern.seed)


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

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if logs is not None and self._last is not None and "loss" in logs:
            logs[M.STEP_S] = self._last
