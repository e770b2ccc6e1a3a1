"""Training's rollout engines: one object per way of generating a training batch, chosen
once from the config (:func:`engine_kind`) and built by one function
(:func:`grpo_code.training.parts.build_engine`).

| kind | what generates | where it lives |
|---|---|---|
| ``transformers`` | the decode loop on the policy itself (``generation.backend: hf``) | :class:`TransformersEngine`, here |
| ``trl-vllm`` | TRL's own vLLM engine: stepped here when colocated, whole completions from ``VLLMGeneration.generate`` on a server (or tensor parallel, sleep mode) | :class:`TrlVllmEngine`, here |
| ``colocated`` | our vLLM engine in the training process (the CPU build) | :class:`~grpo_code.training.colocated.ColocatedEngine` |
| ``ahead`` | a worker process with its own engine, ahead of the update (``train.max_staleness``) | :class:`~grpo_code.training.ahead.AheadEngine` |

Every engine has the same members (:class:`RolloutEngine`): its ``kind``, whether TRL
weighs its log-probs (``importance_sampled``), ``attach`` (the trainer it generates for,
once built), ``sync_weights`` (the policy into the engine; TRL calls it before a
generation call when the step moved on), ``take_metrics`` (what it measured since it was
last asked, ``timing/weight_sync_s`` among them: returned, never left on another
object), ``start_eval`` (held-out rows, :mod:`.held_out`) and ``close``. The on-demand engines also ``generate`` a batch of rows; the ``ahead`` engine
is asked for numbered batches before the trainer needs them (:mod:`.ahead`). A rollout
(:mod:`.rollouts`, :mod:`.multiturn`, :mod:`.ahead`) holds its engine and never asks the
trainer what generates.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from grpo_code.generation.base import Sampling
from grpo_code.generation.stream import END, LENGTH, Sample, Watch


class EngineKind(str, enum.Enum):
    TRANSFORMERS = "transformers"
    TRL_VLLM = "trl-vllm"
    COLOCATED = "colocated"
    AHEAD = "ahead"


@dataclass(frozen=True)
class Generated:
    """A batch an engine generated: one sample per row, the policy version it sampled with,
    and how long it took."""

    samples: list[Sample]
    version: int
    generate_s: float


class RolloutEngine(Protocol):
    kind: EngineKind
    importance_sampled: bool
    """Whether TRL weighs its log-probs against the trainer's (it is not the policy itself)."""

    def attach(self, trainer: Any) -> None:
        """The trainer this engine generates for (called once, by ``SeamTrainer.use_engine``)."""

    def sync_weights(self) -> None:
        """The trainer's policy into the engine (TRL calls it when the step moved on)."""

    def take_metrics(self) -> dict[str, float]:
        """What the engine measured since the last call (then forgotten)."""

    def start_eval(self, rows: Any, seed: int, stop_after_code: bool = False) -> None:
        """Held-out rows of one policy version (:class:`~grpo_code.training.held_out.Rows`):
        sampled now, or queued where the engine samples ahead; their verdicts reach the
        held-out eval either way."""

    def close(self) -> None: ...


def engine_kind(cfg: Any) -> EngineKind:
    """The one decision of which engine a run generates on."""
    if cfg.train.max_staleness > 0:
        return EngineKind.AHEAD
    if cfg.generation.backend != "vllm":
        return EngineKind.TRANSFORMERS
    if cfg.generation.vllm_mode == "colocate":
        from grpo_code.generation.vllm import cpu_build

        if cpu_build():
            return EngineKind.COLOCATED
    return EngineKind.TRL_VLLM


@dataclass(frozen=True)
class EngineParts:
    """What an engine may be built from (each engine takes what it needs)."""

    cfg: Any
    args: Any
    """``trl.GRPOConfig``."""
    resolved: Any
    """The resolved model (:func:`grpo_code.generation.base.resolve`)."""
    model: Any
    tokenizer: Any
    rows: list[dict[str, Any]]
    """The training rows (their prompts size an engine's context)."""
    log: Any
    tasks: Any = None
    """The scored task set (the ``ahead`` worker stops rows whose program is whole)."""
    verifier: Any = None
    style: str = "chat"
    early: Any = None
    """:class:`~grpo_code.verify.early.EarlyJobs` (the ``ahead`` worker's rows are scored as they arrive)."""
    resumed: bool = False
    held_tasks: dict[str, Any] = field(default_factory=dict)
    """The held-out tasks by id (``train.eval_every``: the worker stops their rows after their code too)."""


class _OnDemand:
    """What the engines that generate when asked share: no measurements of their own by
    default, nothing to close."""

    importance_sampled = True
    trainer: Any = None

    def __init__(self, sampling: Sampling):
        self.sampling = sampling

    def attach(self, trainer: Any) -> None:
        self.trainer = trainer

    def take_metrics(self) -> dict[str, float]:
        return {}

    def close(self) -> None:
        pass

    def start_eval(self, rows: Any, seed: int, stop_after_code: bool = False) -> None:
        """Sample the held-out rows now, in one call, with the weights the engine holds."""
        from grpo_code.generation.stream import TokenKinds

        trainer = self.trainer
        watch = Watch(TokenKinds(trainer.processing_class), is_whole=rows.whole if stop_after_code else None,
                      on_end=rows.end)
        generated = self.generate(trainer, rows.prompt_ids, seed, watch)
        rows.done(generated.samples, generated.generate_s)

    def generate(self, trainer: Any, prompt_ids: list[list[int]], seed: int, watch: Watch | None,
                 sampling: Sampling | None = None) -> Generated:
        """One completion per row of ``prompt_ids``, streamed through ``watch`` where the engine can."""
        started = time.perf_counter()
        samples = self._sample(trainer, prompt_ids, seed, watch, sampling or self.sampling)
        return Generated(samples, int(trainer.state.global_step), time.perf_counter() - started)

    def _sample(self, trainer: Any, prompt_ids: list[list[int]], seed: int, watch: Watch | None,
                sampling: Sampling) -> list[Sample]:
        raise NotImplementedError


class TransformersEngine(_OnDemand):
    """The policy samples its own rollouts (:mod:`grpo_code.generation.hf_decode`), unwrapped
    as TRL unwraps it for generation (ZeRO-3 parameters gathered)."""

    kind = EngineKind.TRANSFORMERS
    importance_sampled = False

    def sync_weights(self) -> None:
        """Nothing to send: the engine is the policy."""

    def _sample(self, trainer: Any, prompt_ids: list[list[int]], seed: int, watch: Watch | None,
                sampling: Sampling) -> list[Sample]:
        from trl.models import unwrap_model_for_generation

        from grpo_code.generation.hf_decode import decode

        tokenizer = trainer.processing_class
        # Under the trainer's autocast (bf16 with train.trl.bf16): the rows are sampled from
        # the policy as the update computes its log-probs, and faster on a bf16 CPU or GPU.
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                         gather_deepspeed3_params=trainer.args.ds3_gather_for_generation) as model, \
                trainer.accelerator.autocast():
            return decode(model, prompt_ids, sampling, seed, end_ids(trainer), tokenizer.pad_token_id, watch,
                          tokenizer, logprobs=False)


class TrlVllmEngine(_OnDemand):
    """The vLLM engine TRL built and syncs. Colocated (one process per engine, awake) it is
    stepped here, prompts prefilled in chunks so rows take the engine's random state; else
    (a server, tensor parallel, sleep mode) TRL's ``VLLMGeneration.generate`` runs it and
    returns whole completions."""

    kind = EngineKind.TRL_VLLM

    def sync_weights(self) -> None:
        """The policy into TRL's engine. TRL syncs it itself before each of its generation
        calls; this is for a call outside TRL's loop (the final held-out eval)."""
        self.trainer.vllm_generation.sync_weights()

    def _sample(self, trainer: Any, prompt_ids: list[list[int]], seed: int, watch: Watch | None,
                sampling: Sampling) -> list[Sample]:
        generation = trainer.vllm_generation
        if streams(trainer.args):
            from grpo_code.generation.vllm import stream_engine

            return stream_engine(generation.llm, prompt_ids, sampling, None, watch)
        _, completion_ids, logprobs, _ = generation.generate(prompt_ids, None, 1)
        ends = end_ids(trainer)
        out = []
        for ids, lps in zip(completion_ids, logprobs or [None] * len(completion_ids), strict=True):
            ids = list(ids)
            # Whole completions only: an end token tells an ended one from one cut at the limit.
            ended = END if ids and ids[-1] in ends else LENGTH if len(ids) >= sampling.max_new_tokens else END
            out.append(Sample(ids, ended, None if lps is None else [float("nan") if x[0] is None else x[0]
                                                                      for x in lps]))
        if watch is not None:
            for row, sample in enumerate(out):
                watch.finish(row, sample)
        return out


def streams(args: Any) -> bool:
    """Whether the rollout steps TRL's vLLM engine itself (colocated, one process per
    engine, awake): else TRL's ``VLLMGeneration.generate`` runs it."""
    return (args.vllm_mode == "colocate" and int(getattr(args, "vllm_tensor_parallel_size", 1)) == 1
            and not getattr(args, "vllm_enable_sleep_mode", False))


def end_ids(trainer: Any) -> list[int]:
    """The token ids that end a completion, as the trainer takes them."""
    return list(trainer.eos_token_ids)
