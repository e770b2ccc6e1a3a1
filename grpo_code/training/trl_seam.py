"""Every place grpo-code touches TRL's internals, in one module: three, each pinned by a
test in ``tests/test_trl_seam.py`` (a TRL release that changes one fails that named test,
not a training run).

Generation reaches TRL through its public ``rollout_func`` (:mod:`.rollouts`), scoring
through reward functions and their public ``log_metric``/``log_extra``/``trainer_state``
keywords, timing through a callback. What has no public hook:

1. ``_get_train_sampler`` -> :meth:`SeamTrainer.train_sampler`: the prompt filter picks
   prompts; TRL has no public way to choose the sampler. The hook gets TRL's repeat
   pattern (:class:`RepeatPattern`), which a sampler must keep.
2. ``_get_per_token_logps_and_entropies``: the update's forward pass in groups of rows of
   like length (``train.trim_padding``, :mod:`.packing`), on a CPU of at most 512 tokens a
   call; TRL has no hook into its forward pass.
3. The rollout engine (:mod:`.engines`) -> :meth:`SeamTrainer.use_engine`. An engine of
   ours where TRL expects its vLLM engine: the rollout worker ahead of the update
   (:mod:`.ahead`) and, on vLLM's CPU build, the colocated engine (:mod:`.colocated`: TRL's
   cannot size its KV cache nor load weights into the CPU build's repacked layers). TRL's
   importance-sampling correction, and its weight sync before each generation call, run
   only when ``use_vllm`` is set; the trainer is built without it (TRL starts no engine),
   then the flag is set with ``vllm_generation`` our engine (its ``sync_weights``) and
   ``_last_loaded_step`` as TRL's ``__init__`` would set it. (The share of clipped
   importance ratios is read from the batch ``compute_loss`` receives: public.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from trl import GRPOTrainer

from grpo_code.training.engines import EngineKind
from grpo_code.training.packing import CPU_TOKENS_PER_CALL, length_chunks, teaching_rows


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

    skip_zero_advantage = False
    """Whether the update leaves out the rows whose advantage is zero (same gradient, when
    :meth:`zero_rows_teach_nothing`)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._engine: Any = None
        self._clipped: list[float] = []

    def use_engine(self, engine: Any) -> None:
        """The rollout engine (:class:`~grpo_code.training.engines.RolloutEngine`) generates
        for this trainer. Touch point 3, for an engine of ours that stands in for TRL's vLLM
        engine (not the policy itself, not TRL's own): TRL calls its ``sync_weights()`` when
        the step moved on, and its importance-sampling correction weighs the engine's log-probs."""
        engine.attach(self)
        self._engine = engine
        if engine.kind in (EngineKind.COLOCATED, EngineKind.AHEAD):
            self.use_vllm = True
            self.vllm_generation = engine
            self._last_loaded_step = -1

    @property
    def _ahead(self) -> bool:
        return self._engine is not None and self._engine.kind is EngineKind.AHEAD

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
        if self._ahead:
            return self._engine.wrap_sampler(sampler)  # read ahead of the trainer (.ahead)
        return sampler

    def compute_loss(self, model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if self._ahead:
            share = clipped_share(inputs, self.vllm_importance_sampling_mode,
                                  self.vllm_importance_sampling_clip_min, self.vllm_importance_sampling_clip_max)
            if share is not None:
                self._clipped.append(share)
        kept = teaching_rows(inputs, self.loss_type) if self.skip_zero_advantage and self.zero_rows_teach_nothing() else None
        if kept is None:
            return super().compute_loss(model, inputs, *args, **kwargs)
        rows, scale = kept
        loss = super().compute_loss(model, rows, *args, **kwargs)
        return loss * scale if scale != 1.0 else loss

    def zero_rows_teach_nothing(self) -> bool:
        """Whether the loss has no term that a row of zero advantage feeds: no KL term, no
        entropy bonus, no entropy quantile mask (it ranks the batch's rows together), no
        auxiliary (router) loss. Read from TRL's public config."""
        args = self.args
        return (args.beta == 0.0 and args.entropy_coef == 0.0 and not getattr(args, "use_adaptive_entropy", False)
                and args.top_entropy_quantile >= 1.0 and not getattr(self, "aux_loss_enabled", False))

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
        cut to its widest row (:mod:`grpo_code.training.packing`); same values, less padding.
        On a CPU a call takes at most ``CPU_TOKENS_PER_CALL`` tokens (the memory of TRL's
        log-prob tiles), with the padding cut or not."""
        plain = super()._get_per_token_logps_and_entropies
        budget = CPU_TOKENS_PER_CALL if input_ids.device.type == "cpu" else None
        if not self.trim_padding or compute_aux_loss or any(v is not None for v in kwargs.values()):
            if budget:
                batch_size = max(1, min(batch_size or input_ids.size(0), budget // input_ids.size(1)))
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
        for rows in length_chunks(prompt_part, completion_part, batch_size, max_tokens=budget):
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
