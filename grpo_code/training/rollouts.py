"""Training's rollouts: TRL's public ``rollout_func`` on the project's own generation code.

TRL calls ``rollout_func(prompts, trainer)`` once per generation batch, each prompt already
repeated ``num_generations`` times, after syncing the engine's weights. The rollout
generates on the run's engine (:mod:`.engines`: the policy itself, TRL's vLLM engine, our
colocated engine), through the same streaming interface eval uses
(:mod:`grpo_code.generation.stream`).

Each sample becomes a :class:`Rollout` record. A row that ends while the others generate
has its program started at once (``rewards.overlap``); one whose program is whole stops
there (``train.stop_after_code``) and frees its place. The records reach the reward
function through TRL's ``extra_fields`` (the ``rollout`` column), with the batch's
:class:`RolloutBatch`; nothing is matched back by text. :func:`trl_result` is the one
place that writes TRL's result dict.

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

from grpo_code.errors import ConfigError
from grpo_code.generation.base import Sampling, prompt_ids
from grpo_code.generation.stream import LENGTH, WHOLE, Sample, TokenKinds, Watch, derive_seed
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
    """What the step's producers measured (the engine's weight sync, staleness ...), by metric name."""


def trl_result(prompt_ids: list[list[int]], records: Sequence[Rollout], batch: RolloutBatch,
               importance_sampled: bool, **extra: Any) -> dict[str, Any]:
    """TRL's ``rollout_func`` result: the only code that knows its keys. The behaviour
    log-probs go to TRL's importance-sampling correction when the engine is not the policy
    itself and every row has them. ``extra``: more columns (multi-turn's ``env_mask``, and
    for the reward function, TRL's ``extra_fields``)."""
    ids = [r.completion_ids for r in records]
    logprobs = [r.logprobs for r in records]
    keep = importance_sampled and bool(records) and all(lp is not None for lp in logprobs)
    return {"prompt_ids": prompt_ids, "completion_ids": ids, "logprobs": logprobs if keep else None,
            **extra, "rollout": list(records), "rollout_batch": batch}


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
    """The single-turn ``rollout_func``, on ``engine``.

    ``verifier`` starts programs early (``early``: :class:`~grpo_code.verify.early.EarlyJobs`,
    or ``None`` for no overlap) and tells whether a partial completion's program is whole
    (``stop_after_code``)."""

    def __init__(self, index: PromptIndex, verifier: Verifier, style: str, engine: Any,
                 early: EarlyJobs | None = None, stop_after_code: bool = False, held_out: Any = None):
        self.index = index
        self.verifier = verifier
        self.style = style
        self.engine = engine
        self.early = early
        self.stop_after_code = stop_after_code
        self.held_out = held_out
        """:class:`~grpo_code.training.held_out.HeldOut` (``train.eval_every``): its rows ride
        along when a call samples with a version that is due."""
        self._kinds: TokenKinds | None = None
        self.seeds = CallSeeds()

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

        version = int(trainer.state.global_step)
        held = self.held_out.rows(version) if self.held_out is not None and self.held_out.due(version) else None
        watch = self.watch(tokenizer, task_ids, on_end, held)
        generated = self.engine.generate(trainer, ids + (held.prompt_ids if held else []), self.seeds(trainer), watch)
        samples = generated.samples[:len(ids)]
        if held is not None:
            held.done(generated.samples[len(ids):], generated.generate_s)
        records = []
        for row, (task_id, p_ids, s) in enumerate(zip(task_ids, ids, samples, strict=True)):
            records.append(Rollout(task_id, p_ids, s.ids, tokenizer.decode(s.ids, skip_special_tokens=True), s.ended,
                                   s.logprobs, generated.version, ended_at.get(row, generated.generate_s),
                                   handles.get(row)))
        batch = RolloutBatch(generated.generate_s, len(records), sum(s.ended == WHOLE for s in samples),
                             len(handles), metrics=self.engine.take_metrics())
        if self.early is not None:
            # Every row has its handle: a speculation none took was wasted.
            batch.speculated, batch.speculation_wasted = self.early.discard()
        return trl_result(ids, records, batch, self.engine.importance_sampled)

    def watch(self, tokenizer: Any, task_ids: Sequence[str | None], on_end: Any, held: Any = None) -> Watch:
        """What the rollout hears while a batch generates: each row's end (``on_end``), with
        ``stop_after_code`` a row stopped once its program is whole, with overlap a program
        started as its code block closes. Rows past ``task_ids`` are ``held``'s held-out rows
        (:mod:`.held_out`): judged as they end, on their own verifier."""
        if self._kinds is None:
            self._kinds = TokenKinds(tokenizer)
        train_rows = len(task_ids)

        def is_whole(row: int, so_far: list[int]) -> bool:
            if row >= train_rows:
                return held.whole(row - train_rows, so_far)
            task_id = task_ids[row]
            return task_id is not None and self.verifier.whole(
                self.verifier.task(task_id), tokenizer.decode(so_far, skip_special_tokens=True), self.style)

        def on_fence(row: int, so_far: list[int]) -> None:
            if row < train_rows and task_ids[row] is not None:
                self.early.speculate(task_ids[row], tokenizer.decode(so_far, skip_special_tokens=True))

        def ended(row: int, sample: Sample) -> None:
            if row >= train_rows:
                held.end(row - train_rows, sample)
            else:
                on_end(row, sample)

        return Watch(self._kinds, is_whole=is_whole if self.stop_after_code else None, on_end=ended,
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
