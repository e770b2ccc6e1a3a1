"""Rollouts that run ahead of the update (``train.max_staleness`` > 0).

A rollout worker (:mod:`.engine_worker`), in its own process with its own vLLM engine,
generates the training batches up to ``max_staleness`` policy versions ahead of the
trainer; each row is scored the moment the worker reports its end (the verifier runs in
the trainer's process, as in synchronous training), while the trainer updates on an
earlier batch.

- **Which prompts.** The trainer's prompt sampler is wrapped in a :class:`LookaheadSampler`
  that keeps every index it drew, so the prompts of batch ``b + k`` are known while batch
  ``b`` trains; the batch the trainer receives is checked against them.
- **Which weights.** TRL syncs its engine's weights before each generation call; here that
  sync (:meth:`AheadEngine.sync_weights`) writes the policy to a safetensors file in ``/dev/shm`` and
  tells the worker, which loads the newest file between batches. Batch ``b`` is started once
  the worker holds a version at least ``step(b) - max_staleness``; so a whole batch (each
  group's ``G`` samples among them) comes from one version, recorded on every rollout.
- **Nothing is dropped.** Batches are consumed in order, each exactly once: staleness is
  bounded by making the worker wait, never by discarding a late batch, so slow tasks
  (long programs, slow tests) reach the update as on-policy training would.
- **Correction.** The worker's log-probs are the behaviour policy's (temperature applied,
  as the trainer's); TRL's importance-sampling correction weighs each token by
  ``pi_trainer / pi_behaviour`` (``train.trl.vllm_importance_sampling_mode``, here
  ``token_truncate`` unless set: a sequence-level ratio of a 100-token program drifts past
  any cap after one update and masks the whole sample, which starves long programs).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

from torch.utils.data import Sampler

from grpo_code import metric_names as M
from grpo_code.generation.base import Sampling, prompt_ids
from grpo_code.generation.stream import WHOLE
from grpo_code.training.engine_worker import WorkerSpec
from grpo_code.training.engines import EngineKind, EngineParts
from grpo_code.training.rollouts import (
    PromptIndex,
    Rollout,
    RolloutBatch,
    batch_seed,
    prompt_key,
    trl_prompt,
    trl_result,
)
from grpo_code.training.worker_link import EngineWorker, RolloutWorkerError, probe_ids, probe_logps


class LookaheadSampler(Sampler):
    """A prompt sampler that can be read ahead: every index its base sampler yields is kept,
    so :meth:`at` tells which indices a later batch will hold before the trainer draws them.
    Across epochs the base sampler is iterated again, as the trainer would."""

    def __init__(self, base: Any):
        super().__init__()
        self.base = base
        self._drawn: list[int] = []
        self._it: Iterator[int] | None = None
        self._next = 0

    def __len__(self) -> int:
        return len(self.base)

    def __iter__(self) -> Iterator[int]:
        for _ in range(len(self.base)):
            self._fill(self._next + 1)
            self._next += 1
            yield self._drawn[self._next - 1]

    @property
    def drawn(self) -> int:
        """How many indices the trainer has drawn."""
        return self._next

    def at(self, start: int, count: int) -> list[int]:
        """The indices at positions ``[start, start + count)`` of everything drawn since the run began."""
        self._fill(start + count)
        return self._drawn[start:start + count]

    def _fill(self, upto: int) -> None:
        empty_epochs = 0
        while len(self._drawn) < upto:
            if self._it is None:
                self._it = iter(self.base)
            try:
                self._drawn.append(next(self._it))
                empty_epochs = 0
            except StopIteration:
                self._it = None
                empty_epochs += 1
                if empty_epochs > 1:
                    raise RuntimeError("the prompt sampler yields nothing") from None

    # The prompt filter's sampler has state for checkpoints; pass it through.
    def state_dict(self) -> dict[str, Any]:
        return self.base.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.base.load_state_dict(state)


class AheadEngine:
    """The rollout worker as training's engine (:mod:`.engines`): TRL's weight sync pushes
    the policy to it (:meth:`sync_weights`), the trainer's prompt sampler is wrapped so its
    batches can be read ahead (:meth:`wrap_sampler`), and :class:`AheadRollouts` asks it for
    numbered batches."""

    kind = EngineKind.AHEAD
    importance_sampled = True

    def __init__(self, worker: EngineWorker, probe_ids: list[int], temperature: float = 1.0):
        self.worker = worker
        self.probe_ids = probe_ids
        self.temperature = temperature
        self.pushed = worker.version
        self._evals: dict[int, Any] = {}
        """Held-out rows out on the worker, by their batch number (-1, -2, ...)."""
        self.lookahead: LookaheadSampler | None = None
        self.trainer: Any = None
        self._push_s: float | None = None
        self._extra = 0
        """Batches asked for outside the training sequence (held-out rows)."""

    def attach(self, trainer: Any) -> None:
        self.trainer = trainer

    def wrap_sampler(self, sampler: Any) -> LookaheadSampler:
        """The trainer's prompt sampler, read ahead of the trainer."""
        self.lookahead = LookaheadSampler(sampler)
        return self.lookahead

    def sync_weights(self) -> None:
        """Push the policy of the trainer's step to the worker (TRL calls it once per step)."""
        version = int(self.trainer.state.global_step)
        if version <= self.pushed:
            return
        started = time.perf_counter()
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        probe = probe_logps(model, self.probe_ids, self.temperature)
        self.worker.push(version, model, probe)
        self.pushed = version
        self._push_s = time.perf_counter() - started

    def take_metrics(self) -> dict[str, float]:
        """The last push's time, the worker's loads since the last call and how far its engine's
        log-probs of the probe text were from the trainer's."""
        out = {}
        pushed, self._push_s = self._push_s, None
        if pushed is not None:
            out[M.WEIGHT_PUSH_S] = pushed
        loads = self.worker.take_loads()
        if loads:
            out[M.WEIGHT_LOAD_S] = loads[-1].load_s
            gaps = [load.probe_gap for load in loads if load.probe_gap == load.probe_gap]
            if gaps:
                out[M.PROBE_GAP] = max(gaps)
        return out

    def start_eval(self, rows: Any, seed: int, stop_after_code: bool = False) -> None:
        """Held-out rows (:class:`~grpo_code.training.held_out.Rows`) on the worker, between
        its training batches: queued behind those already asked for, sampled once it holds
        the version the rows were asked for (or a newer one, which they record); judged
        when :meth:`collect` finds them back, or when the held-out eval waits. The worker
        stops them after their code as it stops training rows (``train.stop_after_code``)."""
        self._extra += 1
        batch_no = -self._extra
        self.worker.request(batch_no, rows.prompt_ids, list(rows.task_ids), seed, min_version=rows.version,
                            score=False)
        self._evals[batch_no] = rows
        rows.held.expect(lambda: self.collect(block=True))

    def collect(self, block: bool = False) -> None:
        """Hand the held-out rows that are back to their eval; ``block``: wait for all of them."""
        for batch_no in [b for b in self._evals if block or self.worker.is_done(b)]:
            rows = self._evals.pop(batch_no)
            batch = self.worker.take(batch_no)
            samples = [batch.rows[r][0] for r in range(len(batch.rows))]
            rows.done(samples, batch.done.generate_s, version=batch.done.version)

    def wait_ready(self) -> None:
        self.worker.wait_ready()

    def close(self) -> None:
        self.worker.close()


class AheadRollouts:
    """The ``rollout_func`` of asynchronous training: batch ``c`` from the worker, batches
    ``c + 1 .. c + ahead`` requested before it returns (module docs)."""

    def __init__(self, index: PromptIndex, rows: Sequence[dict[str, Any]], engine: AheadEngine,
                 max_staleness: int, held_out: Any = None):
        self.index = index
        self.held_out = held_out
        """:class:`~grpo_code.training.held_out.HeldOut` (``train.eval_every``): a due version's
        rows go to the worker between its batches (:meth:`AheadEngine.start_eval`)."""
        self.rows = rows
        self.engine = engine
        self.worker = engine.worker
        self.max_staleness = max_staleness
        self._call: int | None = None
        """Generation calls made by this process (``None``: none yet)."""
        self._first = 0
        """Where the first call's batch lies among the sampler's drawn indices."""
        self._first_step = 0
        self.staleness_counts: dict[int, int] = {}

    def _sampler(self, trainer: Any) -> LookaheadSampler:
        sampler = self.engine.lookahead
        if sampler is None:
            raise RuntimeError("rollouts ahead of the update need the trainer's sampler wrapped (AheadEngine.wrap_sampler)")
        return sampler

    def _batch_ids(self, trainer: Any, n: int) -> tuple[list[Any], list[list[int]], list[str | None]]:
        """The prompts of the ``n``-th generation call of this process (0: its first)."""
        size = trainer.args.generation_batch_size
        every = trainer.args.steps_per_generation * trainer.num_iterations
        indices = self._sampler(trainer).at(self._first + n * every * size, size)
        prompts = [self.rows[i]["prompt"] for i in indices]
        ids = [prompt_ids(trainer.processing_class, trl_prompt(p)) for p in prompts]
        return prompts, ids, [self.index.task_id(p) for p in prompts]

    def _locate(self, trainer: Any, prompts: list[Any]) -> int:
        """Where the trainer's first batch of this process lies among the indices drawn: the
        trainer's data loader draws one batch ahead of the batch it hands over (or none, at an
        epoch's end); a resumed run may have drawn and skipped the batches it trained."""
        sampler = self._sampler(trainer)
        size = trainer.args.generation_batch_size
        keys = [prompt_key(p) for p in prompts]
        drawn = sampler.drawn
        for back in (2, 1, *range(3, 2 + drawn // size)):
            start = drawn - back * size
            if start >= 0 and [prompt_key(self.rows[i]["prompt"]) for i in sampler.at(start, size)] == keys:
                return start
        raise RuntimeError("the trainer's first batch is not among the prompts its sampler drew")

    def _step_of(self, trainer: Any, n: int) -> int:
        every = trainer.args.steps_per_generation * trainer.num_iterations
        return self._first_step + n * every // trainer.args.gradient_accumulation_steps

    def _request(self, trainer: Any, n: int) -> None:
        if self.worker.requested(n):
            return
        _, ids, task_ids = self._batch_ids(trainer, n)
        step = self._step_of(trainer, n)
        seed = batch_seed(int(trainer.args.seed), step, 0, 0)
        self.worker.request(n, ids, task_ids, seed, min_version=step - self.max_staleness)

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        step = int(trainer.state.global_step)
        if self._call is None:
            self._first, self._first_step, self._call = self._locate(trainer, prompts), step, 0
        call = self._call
        self._call += 1
        expected, ids, task_ids = self._batch_ids(trainer, call)
        if [prompt_key(p) for p in prompts] != [prompt_key(p) for p in expected]:
            raise RuntimeError(f"the trainer's batch {call} is not the one the rollout worker was asked for")
        for ahead in range(call, call + 1 + self.max_staleness):
            self._request(trainer, ahead)
        if self.held_out is not None and self.held_out.due(step):
            self.engine.start_eval(self.held_out.rows(step), self.held_out.row_seed(step))
        self.engine.collect()
        depth = self.worker.finished()
        waited = time.perf_counter()
        batch = self.worker.take(call)
        waited = time.perf_counter() - waited
        done = batch.done
        assert done is not None  # take() returns a finished batch
        version, generate_s, idle_s = done.version, done.generate_s, done.idle_s
        tokenizer = trainer.processing_class
        records = []
        for row, (task_id, p_ids) in enumerate(zip(task_ids, ids, strict=True)):
            sample, seconds = batch.rows[row]
            records.append(Rollout(task_id, p_ids, sample.ids, tokenizer.decode(sample.ids, skip_special_tokens=True),
                                   sample.ended, sample.logprobs, version, seconds, batch.handles.get(row)))
        staleness = step - version
        if staleness > self.max_staleness:
            raise RuntimeError(f"batch {call} was sampled {staleness} versions behind (bound {self.max_staleness})")
        self.staleness_counts[staleness] = self.staleness_counts.get(staleness, 0) + 1
        out = RolloutBatch(generate_s, len(records), sum(r.ended == WHOLE for r in records), len(batch.handles))
        out.metrics.update({M.STALENESS: float(staleness), M.QUEUE_DEPTH: float(depth),
                            M.TRAINER_IDLE_S: waited, M.ENGINE_IDLE_S: idle_s, **self.engine.take_metrics()})
        return trl_result(ids, records, out, importance_sampled=True)


def staleness_line(counts: dict[int, int]) -> str:
    """The run's batches by staleness, for the train summary."""
    total = sum(counts.values())
    parts = [f"{s}: {n}" for s, n in sorted(counts.items())]
    return f"rollouts ahead: {total} batches by staleness ({', '.join(parts)}); none dropped"



def split_cores(cores: Sequence[int]) -> tuple[list[int], list[int]]:
    """(the trainer's cores, the engine's): the engine gets the upper half, each side at least
    one core; on one core they share it."""
    cores = sorted(cores)
    if len(cores) < 2:
        return list(cores), list(cores)
    half = len(cores) // 2
    return cores[:half], cores[half:]


def start_ahead(parts: EngineParts, sampling: Sampling) -> AheadEngine:
    """Start the rollout worker's process (its engine loads while the trainer is built) and,
    on the CPU build, bind the trainer to its half of the cores."""
    import torch

    from grpo_code.generation.vllm import cpu_build
    cfg, args, tokenizer = parts.cfg, parts.args, parts.tokenizer
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise RolloutWorkerError("train.max_staleness > 0 runs in one training process",
                                 "launch without accelerate's multi-process mode, or set train.max_staleness: 0")
    from grpo_code.training.colocated import engine_dtype, engine_size, longest_prompt

    whole = ((parts.verifier.extractor, {**{t.id: t for t in parts.tasks.tasks}, **parts.held_tasks}, parts.style)
             if cfg.train.stop_after_code else None)
    trainer_cores, engine_cores = [], []
    if cpu_build() and os.environ.get("GRPO_CODE_ASYNC_CORES", "split") == "split":
        trainer_cores, engine_cores = split_cores(os.sched_getaffinity(0))
    gpu = None
    if torch.cuda.is_available() and torch.cuda.device_count() > 1:
        gpu = str(torch.cuda.device_count() - 1)  # the engine on the last GPU, the trainer on the first
    dtype = engine_dtype(cfg)
    size = engine_size(parts.model, longest_prompt(tokenizer, parts.rows), args, dtype)
    spec = WorkerSpec(parts.resolved.path, parts.resolved.tokenizer_path, dtype,
                      sampling,
                      max_model_len=size.max_model_len, kv_bytes=size.kv_bytes, probe_ids=probe_ids(tokenizer),
                      cores=engine_cores, trust_remote_code=cfg.model.trust_remote_code, whole=whole,
                      gpu_memory_utilization=cfg.generation.vllm_gpu_memory_utilization, gpu=gpu)
    worker = EngineWorker(spec, tokenizer, parts.early, initial_version=-1 if parts.resumed else 0)
    if trainer_cores and set(trainer_cores) != set(engine_cores):
        from grpo_code.training.engine_worker import bind_process

        bind_process(trainer_cores)
        torch.set_num_threads(len(trainer_cores))
        parts.log(f"rollouts ahead of the update (train.max_staleness: {cfg.train.max_staleness}): the worker's "
                  f"engine computes on core(s) {engine_cores}, the trainer on {trainer_cores}")
    else:
        parts.log(f"rollouts ahead of the update (train.max_staleness: {cfg.train.max_staleness}): a worker "
                  "process with its own vLLM engine")
    return AheadEngine(worker, probe_ids(tokenizer))
