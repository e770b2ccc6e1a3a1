"""Every place grpo-code touches TRL's internals, in one module: four, each pinned by a
test in ``tests/test_trl_seam.py`` (a TRL release that changes one fails that named test,
not a training run).

Generation reaches TRL through its public ``rollout_func`` (:mod:`.rollouts`), scoring
through reward functions and their public ``log_metric``/``log_extra``/``trainer_state``
keywords, timing through a callback. What has no public hook:

1. ``_get_train_sampler`` -> :meth:`SeamTrainer.train_sampler`: the prompt filter picks
   prompts; TRL has no public way to choose the sampler. The hook gets TRL's repeat
   pattern (:class:`RepeatPattern`), which a sampler must keep.
2. ``_get_per_token_logps_and_entropies``: the update's forward pass in groups of rows of
   like length (``train.trim_padding``, :mod:`.packing`); TRL has no hook into its
   forward pass.
3. vLLM's CPU build, colocated: ``VLLMGeneration.sync_weights`` -> :func:`reload_vllm_weights`.
   TRL copies the trained weights into vLLM one tensor at a time through the model's
   ``load_weights``; the CPU build repacks linear layers after loading, so those tensors no
   longer have a ``weight_loader`` (``'Parameter' object has no attribute
   'weight_loader'``). vLLM's own ``reload_weights`` takes all the weights in checkpoint
   format and repacks them again (a head tied to the embeddings is repacked too: it is
   not among the weights loaded); the prefix cache is reset after it, as TRL does. LoRA
   training syncs the same way, merged: TRL's parameter walk merges the adapter into the
   base weights for vLLM, which is also what TRL does on GPUs.
4. Rollouts ahead of the update (:mod:`.ahead`) -> :meth:`SeamTrainer.use_rollout_worker`:
   the trainer has no engine of its own, yet TRL's importance-sampling correction (and its
   weight sync before each generation call) run only when ``use_vllm`` is set; the flag is
   set after ``__init__``, with ``vllm_generation`` the worker's weight push and
   ``_last_loaded_step`` as TRL's ``__init__`` would set it. (The share of clipped
   importance ratios is read from the batch ``compute_loss`` receives: public.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from trl import GRPOTrainer

from grpo_code.generation.vllm import cpu_build as vllm_cpu_build
from grpo_code.training.packing import length_chunks


@dataclass(frozen=True)
class RepeatPattern:
    """TRL's sampling pattern: each prompt ``mini_repeat_count`` times in a row (its group),
    each chunk of ``batch_size`` prompts ``repeat_count`` times (generation reuse)."""

    mini_repeat_count: int
    batch_size: int
    repeat_count: int
    seed: int


class SeamTrainer(GRPOTrainer):
    """``GRPOTrainer`` with our hooks in place of its internals (see the module docs)."""

    trim_padding = False
    """Whether the update's forward pass runs in length groups (exact for relative positions only)."""

    weight_sync_s: float | None = None
    """How long the last sync of the CPU build's weights took (the rollout logs and clears it)."""

    lookahead: Any = None
    """With rollouts ahead of the update: a sampler wrapper that can be read ahead (:mod:`.ahead`)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._worker_push: Any = None
        self._clipped: list[float] = []
        generation = getattr(self, "vllm_generation", None) if self.use_vllm else None
        if generation is not None and generation.mode == "colocate" and vllm_cpu_build():
            generation.sync_weights = partial(self._sync_cpu_vllm, generation)  # touch point 3

    def _sync_cpu_vllm(self, generation: Any) -> None:
        started = time.monotonic()
        reload_vllm_weights(generation)
        self.weight_sync_s = time.monotonic() - started

    def use_rollout_worker(self, push: Any) -> None:
        """Touch point 4: generation happens in a rollout worker; ``push.sync_weights()`` sends
        it the policy, and TRL's importance-sampling correction weighs its log-probs."""
        self.use_vllm = True
        self.vllm_generation = push
        self._last_loaded_step = -1
        self._worker_push = push

    # ----------------------------------------------------------------- hooks

    def train_sampler(self, dataset: Any, pattern: RepeatPattern) -> Any:
        """The sampler of training prompts; ``None``: TRL's own."""
        return None

    # ----------------------------------------------------------------- overrides (pinned by tests)

    def _get_train_sampler(self, dataset: Any = None) -> Any:
        dataset = dataset if dataset is not None else self.train_dataset
        pattern = RepeatPattern(self.num_generations, self.args.generation_batch_size // self.num_generations,
                                self.num_iterations * self.args.steps_per_generation, self.args.seed)
        sampler = self.train_sampler(dataset, pattern)
        sampler = sampler if sampler is not None else super()._get_train_sampler(dataset)
        if self._worker_push is not None:
            from grpo_code.training.ahead import LookaheadSampler

            self.lookahead = LookaheadSampler(sampler)
            return self.lookahead
        return sampler

    def compute_loss(self, model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if self._worker_push is not None:
            share = clipped_share(inputs, self.vllm_importance_sampling_mode,
                                  self.vllm_importance_sampling_clip_min, self.vllm_importance_sampling_clip_max)
            if share is not None:
                self._clipped.append(share)
        return super().compute_loss(model, inputs, *args, **kwargs)

    def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
        if self._clipped and "loss" in logs:
            from grpo_code import metric_names as M

            logs[M.IS_CLIPPED] = sum(self._clipped) / len(self._clipped)
            self._clipped = []
        super().log(logs, *args, **kwargs)

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


def clipped_share(output: dict[str, Any], mode: str, low: float | None, high: float | None) -> float | None:
    """Share of completion tokens (sequences, in the sequence modes) whose importance ratio
    ``pi_trainer / pi_behaviour`` fell outside ``[low, high]``: truncated or masked."""
    old, sampled = output.get("old_per_token_logps"), output.get("sampling_per_token_logps")
    if old is None or sampled is None:
        return None
    mask = output["completion_mask"].bool()
    diff = torch.nan_to_num((old - sampled) * mask, nan=0.0)
    if mode.startswith("sequence"):
        ratio, keep = diff.sum(-1).exp(), mask.any(-1)
    else:
        ratio, keep = diff.exp(), mask
    outside = torch.zeros_like(ratio, dtype=torch.bool)
    if high is not None:
        outside |= ratio > high
    if low is not None:
        outside |= ratio < low
    total = int(keep.sum())
    return float((outside & keep).sum()) / total if total else None


def reload_vllm_weights(generation: Any) -> None:
    """Touch point 3: the trained weights into the CPU build of vLLM, all at once in checkpoint
    format (vLLM repacks them), then a reset of its prefix cache."""
    from grpo_code.generation.vllm import load_engine_weights

    load_engine_weights(generation.llm, generation._iter_named_params())
