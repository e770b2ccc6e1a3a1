"""vLLM's CPU build colocated with the trainer: an engine of ours in the training process,
standing where TRL expects its own (:meth:`~grpo_code.training.trl_seam.SeamTrainer.use_engine`),
one of training's rollout engines (:mod:`.engines`).

Why not TRL's: TRL starts its colocated engine with no way to size its KV cache, and the
CPU build then takes what ``VLLM_CPU_KVCACHE_SPACE`` says in whole GiB (30% of RAM
unset): 1 GiB held for the whole run where the demo's batch needs under 0.2. Ours is sized
for the batch (:func:`engine_size`). TRL also loads the trained weights tensor by tensor
through each layer's ``weight_loader``, which the CPU build no longer has after repacking
its linear layers; ours loads them all at once in checkpoint format (:meth:`sync_weights`).
And ours prefills prompts whole, so each row takes its own seed (the rollout's
``CallSeeds``): a run repeats with the same seed, resumed or not.

TRL calls :meth:`ColocatedEngine.sync_weights` before each generation call when the step
moved on; the rollout steps the engine through :meth:`ColocatedEngine.generate`. On GPUs
TRL's engine is used as TRL builds it (:class:`~grpo_code.training.engines.TrlVllmEngine`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from grpo_code.generation.base import Sampling
from grpo_code.generation.stream import Sample, Watch
from grpo_code.training.engines import EngineKind, EngineParts, _OnDemand


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


class ColocatedEngine(_OnDemand):
    """The CPU build's engine in the training process, in TRL's ``vllm_generation`` slot."""

    kind = EngineKind.COLOCATED
    mode = "colocate"

    def __init__(self, llm: Any, size: EngineSize | None, sampling: Sampling):
        super().__init__(sampling)
        self.llm = llm
        """vLLM's ``LLM`` (:func:`colocated_llm`)."""
        self.size = size
        self._sync_s: float | None = None

    def sync_weights(self) -> None:
        """The trainer's policy (a LoRA adapter merged into it) into the engine; the time it
        took is the next :meth:`take_metrics`' ``timing/weight_sync_s``."""
        from grpo_code.generation.vllm import load_engine_weights
        from grpo_code.training.worker_link import checkpoint_weights

        started = time.monotonic()
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        with checkpoint_weights(model) as weights:
            load_engine_weights(self.llm, iter(weights.items()))
        self._sync_s = time.monotonic() - started

    def take_metrics(self) -> dict[str, float]:
        from grpo_code import metric_names as M

        synced, self._sync_s = self._sync_s, None
        return {} if synced is None else {M.WEIGHT_SYNC_S: synced}

    def _sample(self, trainer: Any, prompt_ids: list[list[int]], seed: int, watch: Watch | None,
                sampling: Sampling) -> list[Sample]:
        from grpo_code.generation.vllm import stream_engine

        # Prompts prefilled whole: each row takes its own seed.
        return stream_engine(self.llm, prompt_ids, sampling, seed, watch)


def colocated_llm(model_path: str, tokenizer_path: str, dtype: str, size: EngineSize, gpu_memory_utilization: float,
                  trust_remote_code: bool = False) -> Any:
    """vLLM's in-process engine for this training process, as TRL starts its colocated one."""
    from grpo_code.generation.vllm import in_process_engine
    from grpo_code.training.engine_worker import free_port

    # What vLLM's external launcher reads, as TRL sets it for its colocated engine: this
    # process's place among those ``accelerate launch`` started (one process: 0 of 1). Set
    # while the engine starts only: a process started later (a sandbox, a subprocess) does
    # not inherit a port this one holds.
    rank = int(os.environ.get("RANK", "0"))
    launcher = {"RANK": str(rank), "LOCAL_RANK": os.environ.get("LOCAL_RANK", "0"),
                "WORLD_SIZE": os.environ.get("WORLD_SIZE", "1"),
                "MASTER_ADDR": os.environ.get("MASTER_ADDR", "127.0.0.1"),
                "MASTER_PORT": os.environ.get("MASTER_PORT") or str(free_port())}
    before = {key: os.environ.get(key) for key in launcher}
    os.environ.update(launcher)
    try:
        return in_process_engine(model_path, tokenizer_path, dtype, max_model_len=size.max_model_len,
                                 kv_bytes=size.kv_bytes, seed=rank,
                                 gpu_memory_utilization=gpu_memory_utilization, trust_remote_code=trust_remote_code)
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def longest_prompt(tokenizer: Any, rows: Sequence[dict[str, Any]]) -> int:
    """The longest training prompt in tokens, rendered as the rollout renders it."""
    from grpo_code.generation.base import prompt_ids
    from grpo_code.training.rollouts import trl_prompt

    return max(len(prompt_ids(tokenizer, trl_prompt(r["prompt"]))) for r in rows)


def engine_dtype(cfg: Any) -> str:
    """The engine's dtype (``generation.vllm_dtype``, :func:`grpo_code.generation.vllm.engine_dtype`)."""
    from grpo_code.generation.vllm import engine_dtype as dtype_of

    return dtype_of(cfg.generation.vllm_dtype, cfg.model.dtype)


def start_colocated(parts: EngineParts, sampling: Sampling) -> ColocatedEngine:
    """The colocated engine of a CPU-build run (the trainer takes it with ``use_engine``)."""
    cfg = parts.cfg
    dtype = engine_dtype(cfg)
    size = engine_size(parts.model, longest_prompt(parts.tokenizer, parts.rows), parts.args, dtype,
                       multi_turn=cfg.train.multi_turn.turns > 1)
    llm = colocated_llm(parts.resolved.path, parts.resolved.tokenizer_path, dtype, size,
                        cfg.generation.vllm_gpu_memory_utilization, cfg.model.trust_remote_code)
    engine = ColocatedEngine(llm, size, sampling)
    given = os.environ.get("VLLM_CPU_KVCACHE_SPACE")
    kv = f"{given} GiB (VLLM_CPU_KVCACHE_SPACE)" if given else f"{size.kv_bytes / 2**20:.0f} MiB"
    parts.log(f"vLLM colocated (CPU build): context {size.max_model_len} tokens, KV cache {kv}")
    return engine
