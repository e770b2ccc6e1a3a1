"""The GRPO trainer: sandbox scoring overlapped with generation, prompt filtering, per-step
timing and a per-sample completions log. It names no TRL internal: it implements the hooks
of :class:`~grpo_code.training.trl_seam.SeamTrainer`, which holds every touch point with TRL.

Overlap: on the transformers generation path the whole batch is generated in one call
(batch size unchanged), and a stopping criterion (:class:`~grpo_code.generation.watch.RowWatcher`)
looks at each new token: a completion that just ended is handed to the sandbox
(:class:`~grpo_code.verify.early.EarlyJobs`, the trainer's one handle on scoring) while the
others keep generating, and one whose code block just closed has that program started
(``speculate``; a finished completion that extracts the same program reuses the run). The reward function then only waits for the tail. vLLM generates
a whole batch in one call, so there the jobs start right after it. Logged per step:

- ``timing/generate_s``: time spent generating,
- ``timing/reward_wait_s``: time blocked on rewards after generation,
- ``timing/sandbox_busy_s``: summed run time of the sandbox jobs executed for the step,
- ``timing/step_s``: wall time of the whole step (generation, scoring, update).

Several processes (``accelerate launch``): each generates and scores its share of a
batch's rows, and TRL gathers the rewards. The prompt filter records every group from
those gathered rewards and the gathered task ids, so every process keeps the same history
and its sampler draws the same prompts, as one process would; the main process logs the
completions of all processes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from accelerate.utils import gather_object

from grpo_code import metric_names as M
from grpo_code.generation.watch import RowWatcher, TokenKinds
from grpo_code.rewards.functions import CodeReward
from grpo_code.training.filter import FilteringSampler, PromptFilter
from grpo_code.training.trl_seam import RepeatPattern, SeamTrainer
from grpo_code.verify.early import EarlyJobs, cut_at_limit


class GrpoCodeTrainer(SeamTrainer):
    def __init__(self, *args: Any, code_reward: CodeReward, early: EarlyJobs | None = None,
                 prompt_filter: PromptFilter | None = None, completions_path: Path | None = None,
                 stop_after_code: bool = False, trim_padding: bool = True, **kwargs: Any):
        """``early``: where finished completions go while the batch still generates (``None``:
        no overlap; they are scored when TRL calls the reward function). ``code_reward``'s
        latest verdicts (``last``) feed the completions log."""
        super().__init__(*args, **kwargs)
        self.trim_padding = trim_padding
        self.code_reward = code_reward
        self.early = early
        self.overlap = early is not None
        if code_reward.end_token_ids != frozenset(self.end_token_ids):
            # The reward function decides which completions were cut at the length limit.
            raise ValueError(f"the reward function's end tokens {sorted(code_reward.end_token_ids)} differ from "
                             f"the trainer's {sorted(self.end_token_ids)}: build it with "
                             "grpo_code.training.trl_seam.end_token_ids(model, tokenizer)")
        self.stop_after_code = stop_after_code
        self._stopped_rows = self._generated_rows = self._early_rows = 0
        self.prompt_filter = prompt_filter
        self.completions_path = completions_path
        self._batch_task_ids: list[str] = []
        self._watcher: RowWatcher | None = None
        self._row_end: Any = None
        self._generate_s = 0.0
        self._speculation_seen = (0, 0)
        self._kinds = TokenKinds(self.processing_class)

    # ----------------------------------------------------------------- sampling

    def train_sampler(self, dataset: Any, pattern: RepeatPattern) -> Any:
        if self.prompt_filter is None:
            return None
        return FilteringSampler(dataset, dataset["task_id"], self.prompt_filter, pattern.mini_repeat_count,
                                pattern.batch_size, pattern.repeat_count, seed=pattern.seed)

    # ----------------------------------------------------------------- generation

    @property
    def batch_task_ids(self) -> list[str]:
        """The task ids of the batch's rows (this process's share), in order."""
        return list(self._batch_task_ids)

    @contextmanager
    def rows_of(self, task_ids: list[str], on_end: Any = None) -> Iterator[None]:
        """Generate for these rows (a multi-turn rollout's turn): the stopping criterion maps
        rows to these tasks for the block, and calls ``on_end(row, ids)`` as each row ends
        (transformers generation), so its check can start while the others generate."""
        batch, self._batch_task_ids = self._batch_task_ids, list(task_ids)
        self._row_end = on_end
        try:
            yield
        finally:
            self._batch_task_ids, self._row_end = batch, None

    def before_batch(self, inputs: list[dict[str, Any]]) -> None:
        self._batch_task_ids = [x["task_id"] for x in inputs]
        self._stopped_rows = self._generated_rows = self._early_rows = 0
        self._generate_s = 0.0

    def after_batch(self) -> None:
        self.log_metric(M.GENERATE_S, self._generate_s)
        if self.overlap:
            self.log_metric(M.EARLY_JOBS, self._early_rows)
        if self.stop_after_code and self._generated_rows:
            self.log_metric(M.STOPPED_AFTER_CODE, self._stopped_rows / self._generated_rows)
        if self.prompt_filter is not None and self.mode == "train":
            taken, skipped = self.prompt_filter.take_counts()
            if taken + skipped:
                self.log_metric(M.FILTER_SKIPPED_FRAC, skipped / (taken + skipped))
                self.log_metric(M.FILTER_GENERATIONS_SAVED, skipped * self.num_generations)

    def generation_watcher(self, rows: int) -> RowWatcher | None:
        self._watcher = None
        ended = self._row_end if self._row_end is not None else (self._submit if self.overlap else None)
        if len(self._batch_task_ids) != rows or not (ended or self.stop_after_code):
            return None
        self._watcher = RowWatcher(
            self._kinds, rows, eos=frozenset(self.end_token_ids),
            is_whole=self._whole_program if self.stop_after_code else None,
            on_end=ended, on_fence=self._speculate if self.overlap else None)
        return self._watcher

    def after_generation(self, completion_ids: list[list[int]], seconds: float) -> None:
        self._generate_s += seconds  # a multi-turn rollout generates several times a batch
        watcher, self._watcher = self._watcher, None
        self._generated_rows += len(completion_ids)
        self._stopped_rows += len(watcher.stopped) if watcher is not None else 0
        if not self.overlap or len(self._batch_task_ids) != len(completion_ids):
            return
        done = watcher.ended if watcher is not None else set()
        self._early_rows += len(done)
        # What the watcher did not see end (vLLM batches, completions cut at the length limit).
        for row, ids in enumerate(completion_ids):
            if row not in done:
                self._submit(row, ids)

    def _row(self, row: int, ids: list[int]) -> tuple[str, str]:
        """The task id of a batch row and the text of its token ids (early jobs key on text
        alone, whatever the prompt style)."""
        return self._batch_task_ids[row], self.processing_class.decode(ids, skip_special_tokens=True)

    def _submit(self, row: int, completion_ids: list[int]) -> None:
        """Hand a finished completion to the sandbox now; the reward function claims it later."""
        assert self.early is not None
        self.early.submit(*self._row(row, completion_ids), cut_at_limit(completion_ids, frozenset(self.end_token_ids)))

    def _whole_program(self, row: int, partial_ids: list[int]) -> bool:
        """Whether a completion still being generated already holds its whole program."""
        style = self.early.style if self.early is not None else (self.code_reward.style or "chat")
        return self.code_reward.verifier.whole(self.code_reward.verifier.task(self._batch_task_ids[row]),
                                               self.processing_class.decode(partial_ids, skip_special_tokens=True),
                                               style)

    def _speculate(self, row: int, partial_ids: list[int]) -> None:
        """Start the program of a completion still being generated (its code block just closed)."""
        assert self.early is not None
        self.early.speculate(*self._row(row, partial_ids))

    # ----------------------------------------------------------------- rewards

    def after_rewards(self, inputs: list[dict[str, Any]], completions: list[Any], rewards: torch.Tensor,
                      waited_s: float) -> None:
        scored = self.code_reward.last
        busy = sum(s.result.duration_ms for s in scored if s.source == "executed" and s.result is not None) / 1000
        self.log_metric(M.REWARD_WAIT_S, waited_s)
        self.log_metric(M.SANDBOX_BUSY_S, busy)
        if self.early is not None:
            self.early.discard()  # nothing of this batch is left to claim
            started_before, wasted_before = self._speculation_seen
            self._speculation_seen = (self.early.speculated, self.early.speculation_wasted)
            self.log_metric(M.SPECULATIVE_JOBS, self.early.speculated - started_before)
            self.log_metric(M.SPECULATIVE_WASTED, self.early.speculation_wasted - wasted_before)
        logging = self.completions_path is not None
        if self.mode != "train" or not (logging or self.prompt_filter is not None):
            return
        values = row_totals(rewards)  # every process's rows, in process order
        # A multi-turn rollout's conversations come back as its rows' ``conversation`` column.
        local = [_completion_record(x["task_id"], c, s, x.get("conversation")) if logging else {"task_id": x["task_id"]}
                 for x, c, s in zip(inputs, completions, scored, strict=True)]
        rows = gather_object(local) if self.accelerator.num_processes > 1 else local
        if len(rows) != len(values):
            raise RuntimeError(f"{len(rows)} gathered rows for {len(values)} rewards")
        if self.prompt_filter is not None:
            for start in range(0, len(rows), self.num_generations):
                self.prompt_filter.record(rows[start]["task_id"], values[start:start + self.num_generations])
        if logging and self.accelerator.is_main_process:
            with self.completions_path.open("a") as fh:
                for row, reward in zip(rows, values, strict=True):
                    fh.write(json.dumps({"step": self.state.global_step, **row, "reward": reward},
                                        ensure_ascii=False) + "\n")

    # ----------------------------------------------------------------- steps

    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> Any:
        started = time.perf_counter()
        out = super().training_step(model, inputs, num_items_in_batch)
        self.log_metric(M.STEP_S, time.perf_counter() - started, "train")
        return out


def row_totals(rewards: torch.Tensor) -> list[float | None]:
    """Per row, the sum of the reward functions' values; ``None`` where every one was masked."""
    if not rewards.numel():
        return []
    totals = rewards.nansum(dim=1).tolist()
    masked = rewards.isnan().all(dim=1).tolist()
    return [None if nan else total for total, nan in zip(totals, masked, strict=True)]


def _completion_record(task_id: str, completion: Any, s: Any,
                       conversation: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """One line of ``completions.jsonl`` (without step and reward): what was written (a
    multi-turn rollout: its last answer, and the whole ``conversation``), the program that
    ran, its status (``pass``, ``fail``, ``no_code``, ``unfinished``, ``infra_error`` with
    ``masked_because``) and its verdicts."""
    text = completion if isinstance(completion, str) else completion[-1]["content"]
    result, program = s.result, s.program
    extra = {} if conversation is None else {"conversation": conversation, "turns": (len(conversation) + 1) // 2}
    if s.verdict.masked:  # a masked reward keeps its reason: what the sandbox said
        extra["masked_because"] = s.verdict.error
    return {
        "task_id": task_id,
        "completion": text if conversation is None else conversation[-1]["content"],
        **extra,
        "program": program,
        "status": s.verdict.status,
        "verdicts": [t.verdict.value for t in result.tests] if result else [],
    }
