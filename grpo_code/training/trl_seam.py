"""Every place grpo-code touches TRL's internals, in one module.

TRL's public surface covers most of what training needs: ``GRPOConfig``, reward
functions (async, returning ``None`` to mask a row), callbacks, ``generation_kwargs``.
What it does not cover goes through :class:`SeamTrainer`, a ``GRPOTrainer`` whose six
overrides of private methods each translate one TRL internal into a hook with our own
name. :class:`~grpo_code.training.trainer.GrpoCodeTrainer` implements the hooks and names
no TRL internal. Each override is pinned by a test in ``tests/test_trl_seam.py``, so a TRL
release that changes one fails that named test instead of a training run.

1. ``_get_train_sampler`` -> :meth:`SeamTrainer.train_sampler`: the prompt filter picks
   prompts; TRL has no public way to choose the sampler. The hook gets TRL's repeat
   pattern (:class:`RepeatPattern`), which a sampler must keep.
2. ``_generate_and_score_completions`` -> :meth:`~SeamTrainer.before_batch` /
   :meth:`~SeamTrainer.after_batch`: the rows' dataset columns (task ids) before
   generation starts, which the per-row stopping criterion needs.
3. ``_generate_single_turn``, with ``model.generate`` wrapped for that call only
   (:func:`watching_generate`) -> :meth:`~SeamTrainer.generation_watcher`: a stopping
   criterion that sees every token (scoring overlapped with generation, stopping a row
   once its program is whole). TRL passes ``generate`` a ``GenerationConfig``, which cannot
   carry a stopping criterion, and ``generation_kwargs`` go into that config. With vLLM
   colocated, the same watcher follows the engine's step loop
   (:func:`grpo_code.generation.vllm.watching_engine`): TRL's one ``LLM.generate`` call
   for the batch then reports each request as it finishes, and stops one whose program
   is whole.
4. ``_calculate_rewards`` -> :meth:`~SeamTrainer.after_rewards`: the rewards of every
   process's rows, as TRL gathered them, for the prompt filter and the completions log.
   A reward function sees only its own process's rows and its own column.
5. ``_get_per_token_logps_and_entropies``: the update's forward pass in groups of rows
   of like length (``train.trim_padding``, :mod:`.packing`).

Multi-turn rollouts (:mod:`.multiturn`) go through TRL's ``rollout_func`` and reach two
more internals, through :meth:`SeamTrainer.tokenize_prompts` (``_tokenize_prompts``) and
:meth:`SeamTrainer.generate_turn` (``_generate_single_turn``, so each turn is generated
the way a single-turn rollout is); the ``env_mask`` they return keeps feedback tokens out
of the loss.

And one attribute: TRL's per-step metric buffer ``_metrics`` (averaged and logged each
step), written through :meth:`SeamTrainer.log_metric`.

6. vLLM's CPU build, colocated: ``VLLMGeneration.sync_weights`` -> :func:`reload_vllm_weights`.
   TRL copies the trained weights into vLLM one tensor at a time through the model's
   ``load_weights``; the CPU build repacks linear layers after loading, so those tensors no
   longer have a ``weight_loader`` (``'Parameter' object has no attribute
   'weight_loader'``). vLLM's own ``reload_weights`` takes all the weights in checkpoint
   format and repacks them again (a head tied to the embeddings is repacked too: it is
   not among the weights loaded); the prefix cache is reset after it, as TRL does. LoRA
   training syncs the same way, merged: TRL's parameter walk merges the adapter into the
   base weights for vLLM (one kernel per layer, no LoRA machinery in the engine), which
   is also what TRL does on GPUs.
7. vLLM's CPU build, colocated: TRL builds its ``LLM`` with fixed arguments; the name
   ``trl.generation.vllm_generation.LLM`` is wrapped while the trainer is made
   (:func:`cpu_engine`), so the engine takes
   :data:`~grpo_code.generation.vllm.CPU_ENGINE` (no ``torch.compile``: a minute less
   start-up on a small CPU, no slower).

Public hooks considered instead: ``rollout_func`` (experimental in TRL 1.16) would take
over generation whole, so prompt tokenization, the chat template and vLLM weight sync
would be ours to redo; environments and tools are for tool-calling conversations.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from transformers import StoppingCriteria, StoppingCriteriaList
from trl import GRPOTrainer

from grpo_code import metric_names as M
from grpo_code.generation.vllm import CPU_ENGINE, watching_engine
from grpo_code.generation.vllm import cpu_build as vllm_cpu_build
from grpo_code.training.packing import length_chunks


@contextmanager
def cpu_engine() -> Iterator[None]:
    """Colocated vLLM engines made in this block take the CPU build's settings
    (:data:`~grpo_code.generation.vllm.CPU_ENGINE`): TRL builds its ``LLM`` with fixed
    arguments, so the name it calls is wrapped (override 7). Elsewhere nothing changes."""
    if not vllm_cpu_build():
        yield
        return
    import trl.generation.vllm_generation as trl_vllm

    made = trl_vllm.LLM
    trl_vllm.LLM = partial(made, **CPU_ENGINE)
    try:
        yield
    finally:
        trl_vllm.LLM = made


def end_token_ids(model: Any, tokenizer: Any) -> list[int]:
    """The token ids that end a completion, as ``GRPOTrainer`` takes them (every eos id of the
    model's generation config, and the tokenizer's): known before the trainer is made, so the
    reward function is built with them (pinned by a test against the trainer's own)."""
    ids = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    if tokenizer.eos_token_id not in ids:
        ids = [tokenizer.eos_token_id, *ids]
    return ids


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

    def __init__(self, *args: Any, **kwargs: Any):
        with cpu_engine():
            super().__init__(*args, **kwargs)
        generation = self.colocated_vllm
        if generation is not None and vllm_cpu_build():
            generation.sync_weights = partial(self._sync_cpu_vllm, generation)  # override 6

    def _sync_cpu_vllm(self, generation: Any) -> None:
        started = time.monotonic()
        reload_vllm_weights(generation)
        self.log_metric(M.WEIGHT_SYNC_S, time.monotonic() - started)

    # ----------------------------------------------------------------- hooks

    def train_sampler(self, dataset: Any, pattern: RepeatPattern) -> Any:
        """The sampler of training prompts; ``None``: TRL's own."""
        return None

    def before_batch(self, inputs: list[dict[str, Any]]) -> None:
        """A batch's rows (dataset columns, this process's share) before it is generated."""

    def after_batch(self) -> None:
        """After the batch was generated and scored."""

    def generation_watcher(self, rows: int) -> StoppingCriteria | None:
        """A stopping criterion run on each token of a transformers ``generate`` call (``rows``
        wide); its ``stopped`` dict (row -> length), if any, cuts rows it ended."""
        return None

    def after_generation(self, completion_ids: list[list[int]], seconds: float) -> None:
        """The completions of a ``generate`` call, cut where the watcher stopped them, and
        how long the call took."""
        self.log_metric(M.GENERATE_S, seconds)

    def after_rewards(self, inputs: list[dict[str, Any]], completions: list[Any], rewards: torch.Tensor,
                      waited_s: float) -> None:
        """``rewards``: one row per completion of every process (in process order), one column
        per reward function, NaN where masked; ``inputs`` and ``completions`` are this
        process's rows; ``waited_s`` the time spent in the reward functions."""

    # ----------------------------------------------------------------- helpers

    @property
    def mode(self) -> str:
        return "train" if self.model.training else "eval"

    def log_metric(self, name: str, value: float, mode: str | None = None) -> None:
        """Add a value to this step's metric ``name`` (TRL averages and logs it)."""
        self._metrics[mode or self.mode][name].append(float(value))

    @property
    def end_token_ids(self) -> list[int]:
        return list(self.eos_token_ids)

    def tokenize_prompts(self, prompts: list[Any]) -> list[list[int]]:
        """Prompt token ids as TRL makes them (the chat template applied to conversations);
        for a ``rollout_func``, which gets the prompts untokenized."""
        return [list(ids) for ids in self._tokenize_prompts(prompts)[0]]

    def generate_turn(self, prompt_ids: list[list[int]], num_generations: int = 1) -> tuple[list, list | None]:
        """One answer per row of ``prompt_ids`` through TRL's generation (transformers or
        vLLM, weights in sync), with our stopping criterion: (completion ids, logprobs or None)."""
        return self._generate_single_turn(prompt_ids, None, {}, num_generations)

    @property
    def colocated_vllm(self) -> Any:
        """TRL's vLLM generation when it runs in this process (colocate mode), else None."""
        generation = getattr(self, "vllm_generation", None) if self.use_vllm else None
        return generation if generation is not None and generation.mode == "colocate" else None

    @property
    def transformers_generation(self) -> bool:
        """Whether completions come from the model's own ``generate`` (not vLLM, not continuous batching)."""
        return not self.use_vllm and not self.use_transformers_continuous_batching

    # ----------------------------------------------------------------- overrides (pinned by tests)

    def _get_train_sampler(self, dataset: Any = None) -> Any:
        dataset = dataset if dataset is not None else self.train_dataset
        pattern = RepeatPattern(self.num_generations, self.args.generation_batch_size // self.num_generations,
                                self.num_iterations * self.args.steps_per_generation, self.args.seed)
        sampler = self.train_sampler(dataset, pattern)
        return sampler if sampler is not None else super()._get_train_sampler(dataset)

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self.before_batch(inputs)
        out = super()._generate_and_score_completions(inputs)
        self.after_batch()
        return out

    def _generate_single_turn(self, prompt_ids: Any, images: Any, multimodal_fields: Any, num_generations: int,
                              has_tool_images: bool = False) -> Any:
        started = time.perf_counter()
        colocated = self.colocated_vllm
        watched = self.transformers_generation or colocated is not None
        watcher = self.generation_watcher(len(prompt_ids)) if watched else None
        model = self.accelerator.unwrap_model(self.model_wrapped)
        with watching_generate(model, watcher if colocated is None else None), \
                watching_engine(colocated.llm if colocated is not None else None, watcher if colocated else None):
            completion_ids, logprobs = super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
        stopped = getattr(watcher, "stopped", None)
        if stopped:
            # generate pads a stopped row to the batch's length: keep only what was sampled.
            completion_ids = [ids[:stopped.get(row, len(ids))] for row, ids in enumerate(completion_ids)]
            if logprobs is not None:
                logprobs = [lp[:stopped.get(row, len(lp))] for row, lp in enumerate(logprobs)]
        self.after_generation(completion_ids, time.perf_counter() - started)
        return completion_ids, logprobs

    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> Any:
        started = time.perf_counter()
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self.after_rewards(inputs, completions, rewards, time.perf_counter() - started)
        return rewards

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


def reload_vllm_weights(generation: Any) -> None:
    """Override 6: the trained weights into the CPU build of vLLM, all at once in checkpoint
    format (vLLM repacks them), then a reset of its prefix cache."""
    runner = generation.llm.llm_engine.model_executor.driver_worker.model_runner
    runner.reload_weights(weights_iterator=generation._iter_named_params(), is_checkpoint_format=True)
    model = runner.get_model()
    head = getattr(model, "lm_head", None)
    embed = getattr(getattr(model, "model", None), "embed_tokens", None)
    if head is not None and embed is not None and head.weight is embed.weight:
        # Tied embeddings: the head is not among the weights loaded, so its packed copy for the
        # CPU matmul would stay the old embedding's; pack it again from the new one.
        head.quant_method.process_weights_after_loading(head)
    generation.llm.reset_prefix_cache()


@contextmanager
def watching_generate(model: Any, watcher: StoppingCriteria | None) -> Iterator[None]:
    """Make ``model.generate`` run ``watcher`` as an extra stopping criterion, for this block
    only; the watcher's ``prompt_length`` is set from each call's input width."""
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
