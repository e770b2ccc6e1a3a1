"""``GRPOTrainer`` with sandbox scoring overlapped with generation, per-step timing,
prompt filtering and a per-sample completions log.

Overlap: on the transformers generation path the whole batch is generated in one call
(batch size unchanged), and a stopping criterion that never stops (:class:`FinishWatcher`)
looks at each new token: a completion that just ended is handed to the sandbox
(``submit_early``) while the others keep generating, and one whose code block just closed
has that program started (``speculate``; a finished completion that extracts the same
program reuses the run). The reward function then only waits for the tail. vLLM generates
a whole batch in one call, so there the jobs start right after it. Logged per step:

- ``timing/generate_s``: time spent generating,
- ``timing/reward_wait_s``: time blocked on rewards after generation,
- ``timing/sandbox_busy_s``: summed run time of the sandbox jobs executed for the step,
- ``timing/step_s``: wall time of the whole step (generation, scoring, update).

The update's forward pass runs in groups of rows of like length, each cut to its widest
row (``train.trim_padding``, :mod:`grpo_code.training.packing`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from transformers import StoppingCriteria, StoppingCriteriaList
from trl import GRPOTrainer

from grpo_code.generation.hf import TokenKinds
from grpo_code.rewards.functions import CodeReward
from grpo_code.tasks.extract import whole_program
from grpo_code.training.filter import FilteringSampler, PromptFilter
from grpo_code.training.packing import length_chunks


class GrpoCodeTrainer(GRPOTrainer):
    def __init__(self, *args: Any, code_reward: CodeReward, style: str, overlap: bool = True,
                 prompt_filter: PromptFilter | None = None, completions_path: Path | None = None,
                 stop_after_code: bool = False, trim_padding: bool = True, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.trim_padding = trim_padding
        self.code_reward = code_reward
        code_reward.stop_token_ids = set(self.eos_token_ids)
        self.style = style
        self.overlap = overlap
        self.stop_after_code = stop_after_code
        self._stopped_rows = self._generated_rows = self._early_rows = 0
        self.prompt_filter = prompt_filter
        self.completions_path = completions_path
        self._batch_task_ids: list[str] = []
        self._generate_s = 0.0
        self._step_started: float | None = None
        self._speculation_seen = (0, 0)

    # ----------------------------------------------------------------- sampling

    def _get_train_sampler(self, dataset: Any = None) -> Any:
        if self.prompt_filter is None:
            return super()._get_train_sampler(dataset)
        dataset = dataset if dataset is not None else self.train_dataset
        return FilteringSampler(
            dataset, dataset["task_id"], self.prompt_filter,
            mini_repeat_count=self.num_generations,
            batch_size=self.args.generation_batch_size // self.num_generations,
            repeat_count=self.num_iterations * self.args.steps_per_generation,
            seed=self.args.seed,
        )

    # ----------------------------------------------------------------- generation

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self._batch_task_ids = [x["task_id"] for x in inputs]
        self._generate_s = 0.0
        self._stopped_rows = self._generated_rows = self._early_rows = 0
        started = time.perf_counter()
        out = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        self._metrics[mode]["timing/generate_s"].append(self._generate_s)
        if self.overlap:
            self._metrics[mode]["sandbox/early_jobs"].append(float(self._early_rows))
        if self.stop_after_code and self._generated_rows:
            self._metrics[mode]["completions/stopped_after_code"].append(self._stopped_rows / self._generated_rows)
        self._metrics[mode]["timing/score_and_generate_s"].append(time.perf_counter() - started)
        if self.prompt_filter is not None and mode == "train":
            taken, skipped = self.prompt_filter.take_counts()
            if taken + skipped:
                self._metrics[mode]["filter/skipped_frac"].append(skipped / (taken + skipped))
                self._metrics[mode]["filter/generations_saved"].append(float(skipped * self.num_generations))
        return out

    def _generate(self, prompts: list) -> Any:
        started = time.perf_counter()
        try:
            return super()._generate(prompts)
        finally:
            self._generate_s += time.perf_counter() - started

    def _generate_single_turn(self, prompt_ids: Any, images: Any, multimodal_fields: Any, num_generations: int,
                              has_tool_images: bool = False) -> Any:
        rows = len(prompt_ids)
        hf = not self.use_vllm and not self.use_transformers_continuous_batching
        watched = len(self._batch_task_ids) == rows and (self.overlap or (hf and self.stop_after_code))
        if not watched:
            return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations,
                                                 has_tool_images)
        watcher = FinishWatcher(self, rows, overlap=self.overlap, stop_after_code=self.stop_after_code) if hf else None
        with watching_generate(self.accelerator.unwrap_model(self.model_wrapped), watcher):
            completion_ids, logprobs = super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
        if watcher is not None and watcher.stopped:
            # generate pads a stopped row to the batch's length: keep only what was sampled.
            completion_ids = [ids[:watcher.stopped.get(row, len(ids))] for row, ids in enumerate(completion_ids)]
            if logprobs is not None:
                logprobs = [lp[:watcher.stopped.get(row, len(lp))] for row, lp in enumerate(logprobs)]
        self._stopped_rows += len(watcher.stopped) if watcher is not None else 0
        self._generated_rows += rows
        if self.overlap:
            self._early_rows += len(watcher.submitted) if watcher is not None else 0
            # What the watcher did not see end (vLLM batches, completions cut at the length limit).
            done = watcher.submitted if watcher is not None else set()
            for row, ids in enumerate(completion_ids):
                if row not in done:
                    self._submit(row, ids)
        return completion_ids, logprobs

    def _row(self, row: int, ids: list[int]) -> tuple[Any, str]:
        """The task of a batch row and the text of its token ids (the scorer keys on text alone,
        whatever the prompt style)."""
        return self.code_reward.tasks[self._batch_task_ids[row]], self.processing_class.decode(
            ids, skip_special_tokens=True)

    def _submit(self, row: int, completion_ids: list[int]) -> None:
        """Hand a finished completion to the sandbox now; the reward function claims it later."""
        self.code_reward.scorer.submit_early(*self._row(row, completion_ids), self.style,
                                             self.code_reward.truncated(completion_ids))

    def _whole_program(self, row: int, partial_ids: list[int]) -> bool:
        """Whether a completion still being generated already holds its whole program."""
        return whole_program(*self._row(row, partial_ids), self.style, self.code_reward.scorer.extract)

    def _speculate(self, row: int, partial_ids: list[int]) -> None:
        """Start the program of a completion still being generated (its code block just closed)."""
        self.code_reward.scorer.speculate(*self._row(row, partial_ids), self.style)

    # ----------------------------------------------------------------- rewards

    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> Any:
        started = time.perf_counter()
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        waited = time.perf_counter() - started
        self.code_reward.scorer.discard_early()  # nothing of this batch is left to claim
        scored = self.code_reward.last
        busy = sum(s.result.duration_ms for s in scored if s.source == "executed" and s.result is not None) / 1000
        mode = "train" if self.model.training else "eval"
        self._metrics[mode]["timing/reward_wait_s"].append(waited)
        self._metrics[mode]["timing/sandbox_busy_s"].append(busy)
        scorer = self.code_reward.scorer
        started_before, wasted_before = self._speculation_seen
        self._speculation_seen = (scorer.speculated, scorer.speculation_wasted)
        self._metrics[mode]["sandbox/speculative_jobs"].append(float(scorer.speculated - started_before))
        self._metrics[mode]["sandbox/speculative_wasted"].append(float(scorer.speculation_wasted - wasted_before))
        # TRL returns the rewards of all processes; ours are this process's slice.
        start = self.accelerator.process_index * len(prompts)
        local = rewards[start:start + len(prompts)]
        totals = local.nansum(dim=1).tolist() if local.numel() else []
        nan_rows = local.isnan().all(dim=1).tolist() if local.numel() else []
        values = [None if nan else total for total, nan in zip(totals, nan_rows)]
        task_ids = [x["task_id"] for x in inputs]
        if self.prompt_filter is not None and mode == "train":
            for start in range(0, len(values), self.num_generations):
                self.prompt_filter.record(task_ids[start], values[start:start + self.num_generations])
        if self.completions_path is not None and self.accelerator.is_main_process and mode == "train":
            self._log_completions(task_ids, completions, scored, values)
        return rewards

    def _log_completions(self, task_ids: list[str], completions: list[Any], scored: list[Any],
                         rewards: list[float | None]) -> None:
        with self.completions_path.open("a") as fh:
            # The reward function scored exactly these completions, in this order.
            for task_id, completion, s, reward in zip(task_ids, completions, scored, rewards, strict=True):
                text = completion if isinstance(completion, str) else completion[-1]["content"]
                result, program = s.result, s.program
                fh.write(json.dumps({
                    "step": self.state.global_step,
                    "task_id": task_id,
                    "completion": text,
                    "program": program,
                    "status": result.status.value if result else (
                        "unfinished" if s.source == "unfinished" else "no_code" if program is None else None),
                    "verdicts": [t.verdict.value for t in result.tests] if result else [],
                    "reward": reward,
                }, ensure_ascii=False) + "\n")

    # ----------------------------------------------------------------- forward

    def _get_per_token_logps_and_entropies(self, model: Any, input_ids: Any, attention_mask: Any,
                                           logits_to_keep: int, batch_size: int | None = None,
                                           compute_entropy: bool = False, compute_aux_loss: bool = False,
                                           **kwargs: Any) -> Any:
        """TRL's per-token log-probs, computed in groups of rows of similar length, each group
        cut to its widest row (:mod:`grpo_code.training.packing`); same values, less padding."""
        plain = super()._get_per_token_logps_and_entropies
        if not self.trim_padding or compute_aux_loss or any(v is not None for v in kwargs.values()):
            return plain(model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                         compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **kwargs)
        mask = attention_mask.bool()
        width = mask.size(1)
        prompt_width = width - logits_to_keep
        cols = torch.arange(width, device=mask.device)
        first = torch.where(mask, cols, width).min(dim=1).values
        end = torch.where(mask, cols, -1).max(dim=1).values + 1
        prompt_part = (prompt_width - first).clamp(min=0).tolist()
        completion_part = (end - prompt_width).clamp(min=0).tolist()
        logps, entropies, order = [], [], []
        for rows in length_chunks(prompt_part, completion_part, batch_size):
            start = prompt_width - max(prompt_part[r] for r in rows)
            keep = max(1, max(completion_part[r] for r in rows))
            index = torch.tensor(rows, device=input_ids.device)
            part, entropy, _ = plain(model, input_ids[index, start:prompt_width + keep],
                                     attention_mask[index, start:prompt_width + keep], keep,
                                     compute_entropy=compute_entropy)
            logps.append(torch.nn.functional.pad(part, (0, logits_to_keep - keep)))
            if entropy is not None:
                entropies.append(torch.nn.functional.pad(entropy, (0, logits_to_keep - keep)))
            order.extend(rows)
        back = torch.tensor(order, device=input_ids.device).argsort()  # batch row -> place in the groups
        return torch.cat(logps)[back], torch.cat(entropies)[back] if entropies else None, None

    # ----------------------------------------------------------------- steps

    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> Any:
        started = time.perf_counter()
        out = super().training_step(model, inputs, num_items_in_batch)
        self._metrics["train"]["timing/step_s"].append(time.perf_counter() - started)
        return out


class FinishWatcher(StoppingCriteria):
    """A stopping criterion that follows each row as it generates.

    With ``overlap`` it hands the rows that just ended (EOS) to the sandbox and starts the
    program of a row whose code block just closed, so scoring runs while the rest of the
    batch is still generating. With ``stop_after_code`` it ends a row as soon as its whole
    program is there (``stopped`` holds each such row's length); it stops nothing else."""

    def __init__(self, trainer: GrpoCodeTrainer, rows: int, overlap: bool = True, stop_after_code: bool = False):
        self.trainer = trainer
        self.rows = rows
        self.overlap = overlap
        self.stop_after_code = stop_after_code
        self.prompt_length = 0
        self.submitted: set[int] = set()
        self.stopped: dict[int, int] = {}
        self.eos = set(trainer.eos_token_ids)
        self._kind = TokenKinds(trainer.processing_class)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any) -> torch.BoolTensor:
        stop = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        if input_ids.shape[0] != self.rows or input_ids.shape[1] <= self.prompt_length:
            return stop
        length = input_ids.shape[1] - self.prompt_length
        for row, token in enumerate(input_ids[:, -1].tolist()):
            if row in self.stopped:
                stop[row] = True
                continue
            if row in self.submitted:
                continue
            if token in self.eos:
                self.submitted.add(row)
                if self.overlap:
                    self.trainer._submit(row, input_ids[row, self.prompt_length:].tolist())
                continue
            fence, newline = self._kind(token)
            check_whole = self.stop_after_code and (fence or newline)
            if not check_whole and not (self.overlap and fence):
                continue
            ids = input_ids[row, self.prompt_length:].tolist()
            # A program becomes whole when its block closes (a fence), or a continuation when
            # a top-level line follows it (seen at the latest with that line's newline).
            if check_whole and self.trainer._whole_program(row, ids):
                self.stopped[row] = length
                self.submitted.add(row)
                stop[row] = True
                if self.overlap:
                    self.trainer._submit(row, ids)
            elif self.overlap and fence:
                self.trainer._speculate(row, ids)
        return stop


@contextmanager
def watching_generate(model: Any, watcher: FinishWatcher | None) -> Iterator[None]:
    """Make ``model.generate`` run ``watcher`` as an extra stopping criterion, for this block only."""
    if watcher is None:
        yield
        return
    original = model.generate

    def generate(*args: Any, **kwargs: Any) -> Any:
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        watcher.prompt_length = input_ids.shape[1] if input_ids is not None else 0
        criteria = StoppingCriteriaList(kwargs.pop("stopping_criteria", None) or [])
        criteria.append(watcher)
        return original(*args, stopping_criteria=criteria, **kwargs)

    model.generate = generate
    try:
        yield
    finally:
        if model.__dict__.get("generate") is generate:
            del model.generate
