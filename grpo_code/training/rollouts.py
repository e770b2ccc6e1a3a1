"""Training's rollouts: TRL's public ``rollout_func`` on the project's own generation code.

TRL calls ``rollout_func(prompts, trainer)`` once per generation batch, each prompt already
repeated ``num_generations`` times, after syncing a colocated vLLM engine's weights. The
rollout generates through the same streaming interface eval uses
(:mod:`grpo_code.generation.stream`):

- ``hf``: the decode loop of :mod:`grpo_code.generation.hf_decode` on the policy, unwrapped
  as TRL unwraps it for generation (ZeRO-3 parameters gathered);
- ``vllm`` colocated: on the CPU build our engine in TRL's place
  (:mod:`grpo_code.training.colocated`), each row seeded; on GPUs the engine TRL made and
  syncs (its prompts prefilled in chunks, so rows take the engine's random state); both
  stepped here (:func:`~grpo_code.generation.vllm.stream_engine`);
- ``vllm`` server, or an engine TRL must drive itself (tensor parallel, sleep mode): TRL's
  own ``VLLMGeneration.generate``, whole completions only.

Each sample becomes a :class:`Rollout` record. A row that ends while the others generate
has its program started at once (``rewards.overlap``); one whose program is whole stops
there (``train.stop_after_code``) and frees its place. The records reach the reward
function through TRL's ``extra_fields`` (the ``rollout`` column), with the batch's
:class:`RolloutBatch`; nothing is matched back by text.

Which task a prompt belongs to: TRL hands the rollout the prompts, not their dataset
rows, so :class:`PromptIndex` maps a prompt back to its task. Tasks that render the same
prompt cannot be told apart there: their rollouts carry no task (no early start; the
reward function scores them by the row's own ``task_id``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from grpo_code import metric_names as M
from grpo_code.errors import ConfigError
from grpo_code.generation.base import Sampling, prompt_ids
from grpo_code.generation.stream import END, LENGTH, WHOLE, Sample, TokenKinds, Watch, derive_seed
from grpo_code.tasks.prompts import Prompt
from grpo_code.verify.early import EarlyJobs
from grpo_code.verify.verifier import Handle, Verifier


@dataclass
class Rollout:
    """One sampled completion of a training batch, as generation knew it."""

    task_id: str | None
    """``None``: its prompt is shared by several tasks (:class:`PromptIndex`)."""
    prompt_ids: list[int]
    completion_ids: list[int]
    text: str
    ended: str
    """Why it ended (:mod:`grpo_code.generation.stream`): end, length, whole, stop."""
    logprobs: list[float] | None
    """The behaviour policy's log-prob of each completion token (vLLM; ``None`` on hf)."""
    version: int
    """The policy's version it was sampled with: the trainer's global step."""
    seconds: float
    """From the start of its batch's generation to its end."""
    handle: Handle | None = None
    """Its verdict, started when it ended (``rewards.overlap``); ``None``: not started yet."""

    @property
    def cut(self) -> bool:
        return self.ended == LENGTH


@dataclass
class RolloutBatch:
    """What one ``rollout_func`` call measured (the reward function logs it)."""

    generate_s: float
    rows: int
    stopped: int
    """Rows stopped after their program (``train.stop_after_code``)."""
    early: int
    """Rows whose scoring started while others still generated."""
    speculated: int = 0
    speculation_wasted: int = 0
    metrics: dict[str, float] = field(default_factory=dict)


def prompt_key(prompt: Any) -> str:
    """A prompt as TRL hands it over (a message list or a string), as a dictionary key."""
    return prompt if isinstance(prompt, str) else json.dumps(
        [{"role": m.get("role"), "content": m.get("content")} for m in prompt], sort_keys=True)


class PromptIndex:
    """The task of each training prompt. A prompt several tasks share maps to ``None``."""

    def __init__(self, rows: Sequence[dict[str, Any]]):
        self._tasks: dict[str, str | None] = {}
        for row in rows:
            key = prompt_key(row["prompt"])
            self._tasks[key] = row["task_id"] if self._tasks.get(key, row["task_id"]) == row["task_id"] else None
        self.shared = sorted(k for k, v in self._tasks.items() if v is None)

    def task_id(self, prompt: Any) -> str | None:
        key = prompt_key(prompt)
        if key not in self._tasks:
            raise KeyError("a prompt the rollout was given is not in the training set")
        return self._tasks[key]


def trl_prompt(prompt: Any) -> Prompt:
    """A prompt as TRL hands it over, as the :class:`~grpo_code.tasks.prompts.Prompt` eval renders."""
    if isinstance(prompt, str):
        return Prompt("raw", text=prompt)
    return Prompt("chat", messages=tuple({"role": m["role"], "content": m["content"]} for m in prompt))


def training_sampling(args: Any, row_seeds: bool = True) -> Sampling:
    """The sampling settings of ``train.trl`` (what TRL's own generation would use); settings
    the rollouts do not implement are refused rather than ignored."""
    unsupported = []
    if getattr(args, "repetition_penalty", 1.0) not in (None, 1.0):
        unsupported.append(f"repetition_penalty={args.repetition_penalty}")
    if getattr(args, "min_p", None):
        unsupported.append(f"min_p={args.min_p}")
    if getattr(args, "generation_kwargs", None):
        unsupported.append(f"generation_kwargs={args.generation_kwargs}")
    if unsupported:
        raise ConfigError([f"train.trl.{u}: grpo-code's rollouts sample with temperature, top_p and top_k only; "
                           "remove it" for u in unsupported])
    return Sampling(n=1, temperature=args.temperature, top_p=args.top_p, top_k=args.top_k or 0,
                    max_new_tokens=args.max_completion_length, row_seeds=row_seeds)


def batch_seed(seed: int, step: int, process: int, call: int) -> int:
    """The seed of one generation call of training: run seed, step, process, call of the step."""
    return derive_seed(seed, step, process, call)


class Rollouts:
    """The single-turn ``rollout_func``.

    ``verifier`` starts programs early (``early``: :class:`~grpo_code.verify.early.EarlyJobs`,
    or ``None`` for no overlap) and tells whether a partial completion's program is whole
    (``stop_after_code``)."""

    def __init__(self, index: PromptIndex, verifier: Verifier, style: str, early: EarlyJobs | None = None,
                 stop_after_code: bool = False):
        self.index = index
        self.verifier = verifier
        self.style = style
        self.early = early
        self.stop_after_code = stop_after_code
        self._kinds: TokenKinds | None = None
        self.seeds = CallSeeds()
        self._speculation_seen = (0, 0)

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        tokenizer = trainer.processing_class
        task_ids = [self.index.task_id(p) for p in prompts]
        ids = [prompt_ids(tokenizer, trl_prompt(p)) for p in prompts]
        started = time.perf_counter()
        ended_at: dict[int, float] = {}
        handles: dict[int, Handle] = {}

        def on_end(row: int, sample: Sample) -> None:
            ended_at[row] = time.perf_counter() - started
            if self.early is not None and task_ids[row] is not None:
                text = tokenizer.decode(sample.ids, skip_special_tokens=True)
                handles[row] = self.early.submit(task_ids[row], text, sample.cut)

        watch = self.watch(tokenizer, task_ids, on_end)
        samples = sample_rows(trainer, ids, self.seeds(trainer), watch)
        seconds = time.perf_counter() - started
        version = int(trainer.state.global_step)
        records = []
        for row, (task_id, p_ids, s) in enumerate(zip(task_ids, ids, samples, strict=True)):
            handle = handles.get(row)
            if handle is None and self.early is not None and task_id is not None:
                # The backend did not report it while generating (TRL's own vLLM generation).
                handle = self.early.submit(task_id, tokenizer.decode(s.ids, skip_special_tokens=True), s.cut)
            records.append(Rollout(task_id, p_ids, s.ids, tokenizer.decode(s.ids, skip_special_tokens=True), s.ended,
                                   s.logprobs, version, ended_at.get(row, seconds), handle))
        batch = RolloutBatch(seconds, len(records), sum(s.ended == WHOLE for s in samples), len(handles))
        if self.early is not None:
            self.early.discard()  # every row has its handle: a speculation none took was wasted
            before = self._speculation_seen
            self._speculation_seen = (self.early.speculated, self.early.speculation_wasted)
            batch.speculated = self.early.speculated - before[0]
            batch.speculation_wasted = self.early.speculation_wasted - before[1]
        synced = getattr(trainer, "weight_sync_s", None)
        if synced is not None:
            batch.metrics[M.WEIGHT_SYNC_S] = synced
            trainer.weight_sync_s = None
        vllm = bool(getattr(trainer, "use_vllm", False))
        return {
            "prompt_ids": ids,
            "completion_ids": [r.completion_ids for r in records],
            # TRL's importance-sampling correction reads them with vLLM only.
            "logprobs": [r.logprobs for r in records] if vllm and all(r.logprobs is not None for r in records) else None,
            "rollout": records,
            "rollout_batch": batch,
        }

    def watch(self, tokenizer: Any, task_ids: Sequence[str | None], on_end: Any) -> Watch:
        """What the rollout hears while a batch generates: each row's end (``on_end``), with
        ``stop_after_code`` a row stopped once its program is whole, with overlap a program
        started as its code block closes."""
        if self._kinds is None:
            self._kinds = TokenKinds(tokenizer)

        def is_whole(row: int, so_far: list[int]) -> bool:
            task_id = task_ids[row]
            return task_id is not None and self.verifier.whole(
                self.verifier.task(task_id), tokenizer.decode(so_far, skip_special_tokens=True), self.style)

        def on_fence(row: int, so_far: list[int]) -> None:
            if task_ids[row] is not None:
                self.early.speculate(task_ids[row], tokenizer.decode(so_far, skip_special_tokens=True))

        return Watch(self._kinds, is_whole=is_whole if self.stop_after_code else None, on_end=on_end,
                     on_fence=on_fence if self.early is not None else None)

class CallSeeds:
    """The seed of each generation call of a run: :func:`batch_seed` of the run's seed, the
    step, the process and how many calls this step made before (a resumed run draws the
    same seeds from the step it resumes at)."""

    def __init__(self) -> None:
        self._calls: tuple[int, int] = (-1, 0)  # (step, calls made at that step)

    def __call__(self, trainer: Any) -> int:
        step = int(trainer.state.global_step)
        calls = self._calls[1] + 1 if self._calls[0] == step else 0
        self._calls = (step, calls)
        return batch_seed(int(trainer.args.seed), step, int(trainer.accelerator.process_index), calls)


def sample_rows(trainer: Any, prompt_ids: list[list[int]], seed: int, watch: Watch | None,
             sampling: Sampling | None = None) -> list[Sample]:
    """One completion per row of ``prompt_ids`` from the trainer's policy, streamed through
    ``watch`` where the backend can (module docs)."""
    sampling = sampling or training_sampling(trainer.args, getattr(trainer, "row_seeds", True))
    tokenizer = trainer.processing_class
    ends = end_ids(trainer)
    generation = getattr(trainer, "vllm_generation", None) if getattr(trainer, "use_vllm", False) else None
    if generation is None:
        from trl.models import unwrap_model_for_generation

        from grpo_code.generation.hf_decode import decode

        # Under the trainer's autocast (bf16 with train.trl.bf16): the rows are sampled from
        # the policy as the update computes its log-probs, and faster on a bf16 CPU or GPU.
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                         gather_deepspeed3_params=trainer.args.ds3_gather_for_generation) as model, \
                trainer.accelerator.autocast():
            return decode(model, prompt_ids, sampling, seed, ends, tokenizer.pad_token_id, watch, tokenizer,
                          logprobs=False)
    seeded = getattr(generation, "seeded", False)  # our colocated engine; TRL's prefills in chunks and cannot
    if seeded or streams(trainer):
        from grpo_code.generation.vllm import stream_engine

        return stream_engine(generation.llm, prompt_ids, sampling, seed if seeded else None, watch)
    _, completion_ids, logprobs, _ = generation.generate(prompt_ids, None, 1)
    out = []
    for ids, lps in zip(completion_ids, logprobs or [None] * len(completion_ids), strict=True):
        ids = list(ids)
        # Whole completions only: an end token tells an ended one from one cut at the limit.
        ended = END if ids and ids[-1] in ends else LENGTH if len(ids) >= sampling.max_new_tokens else END
        sample = Sample(ids, ended, None if lps is None else [float("nan") if x[0] is None else x[0] for x in lps])
        out.append(sample)
    if watch is not None:
        for row, sample in enumerate(out):
            watch.finish(row, sample)
    return out


def streams(trainer: Any) -> bool:
    """Whether the rollout steps TRL's vLLM engine itself (colocated, one process per
    engine, awake): else TRL's ``VLLMGeneration.generate`` runs it."""
    args = trainer.args
    return (args.vllm_mode == "colocate" and int(getattr(args, "vllm_tensor_parallel_size", 1)) == 1
            and not getattr(args, "vllm_enable_sleep_mode", False))


def end_ids(trainer: Any) -> list[int]:
    """The token ids that end a completion, as the trainer takes them."""
    return list(trainer.eos_token_ids)

