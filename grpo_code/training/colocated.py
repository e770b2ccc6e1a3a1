"""vLLM's CPU build colocated with the trainer: an engine of ours in the training process,
standing where TRL expects its own (:meth:`~grpo_code.training.trl_seam.SeamTrainer.use_engine`).

Why not TRL's: TRL starts its colocated engine with no way to size its KV cache, and the
CPU build then takes what ``VLLM_CPU_KVCACHE_SPACE`` says in whole GiB (30% of RAM
unset): 1 GiB held for the whole run where the demo's batch needs under 0.2. Ours is sized
for the batch (:func:`engine_size`). TRL also loads the trained weights tensor by tensor
through each layer's ``weight_loader``, which the CPU build no longer has after repacking
its linear layers; ours loads them all at once in checkpoint format (:meth:`sync_weights`).
And ours prefills prompts whole, so each row takes its own seed (the rollout's
``CallSeeds``): a run repeats with the same seed, resumed or not.

TRL calls :meth:`ColocatedEngine.sync_weights` before each generation call when the step
moved on; the rollout (:func:`~grpo_code.training.rollouts.sample_rows`) steps ``llm``
itself. On GPUs TRL's engine is used as TRL builds it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EngineSize:
    max_model_len: int
    """The longest prompt and completion the engine takes."""
    kv_bytes: int
    """Its KV cache: the larger of one ``max_model_len`` sequence and a whole generation batch."""


def engine_size(model: Any, longest_prompt: int, args: Any, dtype: str, multi_turn: bool = False) -> EngineSize:
    """The engine a training run needs. Single-turn: the longest prompt and completion
    (``train.trl.vllm_max_model_length`` when set), within the model's own limit;
    multi-turn, whose later prompts carry the conversation so far: the model's limit, as
    TRL's engine. The KV cache holds a generation batch (``per_device_train_batch_size``
    times ``steps_per_generation`` rows, TRL's ``max_num_seqs``) of the longest rows."""
    from grpo_code.generation.vllm import kv_cache_bytes

    limit = getattr(model.config, "max_position_embeddings", None)
    row = longest_prompt + int(args.max_completion_length) + 16
    length = getattr(args, "vllm_max_model_length", None)
    if length is None:
        length = limit if multi_turn and limit else min(row, limit) if limit else row
    rows = int(args.per_device_train_batch_size) * int(args.steps_per_generation or 1)
    tokens = max(length, rows * min(row, length))
    return EngineSize(int(length), kv_cache_bytes(model.config, dtype, tokens))


class ColocatedEngine:
    """The CPU build's engine in the training process, in TRL's ``vllm_generation`` slot."""

    mode = "colocate"
    seeded = True
    """Each row takes its own seed (prompts are prefilled whole)."""

    def __init__(self, trainer: Any, model_path: str, tokenizer_path: str, dtype: str, size: EngineSize,
                 gpu_memory_utilization: float, trust_remote_code: bool = False):
        from grpo_code.generation.vllm import in_process_engine
        from grpo_code.training.engine_worker import free_port

        accelerator = trainer.accelerator
        # What vLLM's external launcher reads, as TRL sets it for its colocated engine.
        os.environ["RANK"] = str(accelerator.process_index)
        os.environ["LOCAL_RANK"] = str(accelerator.local_process_index)
        os.environ["WORLD_SIZE"] = str(accelerator.num_processes)
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(free_port()))
        self.trainer = trainer
        self.size = size
        self.llm = in_process_engine(model_path, tokenizer_path, dtype, max_model_len=size.max_model_len,
                                     kv_bytes=size.kv_bytes, seed=accelerator.process_index,
                                     gpu_memory_utilization=gpu_memory_utilization,
                                     trust_remote_code=trust_remote_code)

    def sync_weights(self) -> None:
        """The trainer's policy (a LoRA adapter merged into it) into the engine; the time it
        took goes to the next rollout's metrics (``timing/weight_sync_s``)."""
        from grpo_code.generation.vllm import load_engine_weights
        from grpo_code.training.worker_link import checkpoint_weights

        started = time.monotonic()
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        with checkpoint_weights(model) as weights:
            load_engine_weights(self.llm, iter(weights.items()))
        self.trainer.weight_sync_s = time.monotonic() - started


def longest_prompt(tokenizer: Any, rows: Sequence[dict[str, Any]]) -> int:
    """The longest training prompt in tokens, rendered as the rollout renders it."""
    from grpo_code.generation.base import prompt_ids
    from grpo_code.training.rollouts import trl_prompt

    return max(len(prompt_ids(tokenizer, trl_prompt(r["prompt"]))) for r in rows)


def engine_dtype(cfg: Any) -> str:
    """The engine's dtype (``generation.vllm_dtype``, :func:`grpo_code.generation.vllm.engine_dtype`)."""
    from grpo_code.generation.vllm import engine_dtype as dtype_of

    return dtype_of(cfg.generation.vllm_dtype, cfg.model.dtype)


def start_colocated(cfg: Any, resolved: Any, model: Any, tokenizer: Any, rows: Sequence[dict[str, Any]],
                    trainer: Any, log: Any) -> ColocatedEngine:
    """The colocated engine of a CPU-build run, in ``trainer``'s ``vllm_generation`` slot."""
    dtype = engine_dtype(cfg)
    size = engine_size(model, longest_prompt(tokenizer, rows), trainer.args, dtype,
                       multi_turn=cfg.train.multi_turn.turns > 1)
    engine = ColocatedEngine(trainer, resolved.path, resolved.tokenizer_path, dtype, size,
                             cfg.generation.vllm_gpu_memory_utilization, cfg.model.trust_remote_code)
    trainer.use_engine(engine)
    given = os.environ.get("VLLM_CPU_KVCACHE_SPACE")
    kv = f"{given} GiB (VLLM_CPU_KVCACHE_SPACE)" if given else f"{size.kv_bytes / 2**20:.0f} MiB"
    log(f"vLLM colocated (CPU build): context {size.max_model_len} tokens, KV cache {kv}")
    return engine
