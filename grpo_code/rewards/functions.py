"""TRL reward functions built from the run config.

``build_reward_funcs(config.rewards, verifier)`` returns the list handed to
``trl.GRPOTrainer(reward_funcs=...)``. Each is an async callable with TRL's signature
``(prompts, completions, completion_ids=None, **kwargs) -> list[float | None]``; TRL runs
async reward functions concurrently on its own event loop. Dataset columns arrive as
keyword lists: the ``task_id`` column names each completion's task. Completions are
strings, or message lists for conversational prompts (extraction style ``chat``;
plain-text prompts use ``raw`` unless ``style`` is given).

:class:`CodeReward` awaits the verifier's verdicts (:mod:`grpo_code.verify`; claiming
the handles its rollout records carry) while, when a reward model is
configured, the model scores the same completions on a worker thread; the two are then
blended (:mod:`.blend`); a generative judge (:mod:`.judge`), when configured, moves the
result as ``rewards.judge.blend`` says. ``None`` marks an infrastructure error: TRL masks it. A batch
with too many masked rewards raises :class:`~grpo_code.errors.RewardError`. Metrics go
to TRL's ``log_metric`` (:mod:`.metrics`), per-completion outcomes to ``log_extra``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from grpo_code import metric_names as M
from grpo_code.config import RewardsConfig
from grpo_code.errors import RewardError
from grpo_code.rewards.blend import blend
from grpo_code.rewards.judge import JudgeScoring
from grpo_code.rewards.metrics import batch_metrics
from grpo_code.rewards.model.reward_model import RewardModel, load_reward_model, text_for
from grpo_code.rewards.verifiable import check_masked, score_result, weights_for
from grpo_code.verify.runs import Source
from grpo_code.verify.store import RewardCache
from grpo_code.verify.verifier import Judged, Verifier, masked_errors


def reward_of(judged: Judged, task: Any, config: RewardsConfig) -> float | None:
    """The verifiable reward of one verdict (``None``: masked)."""
    if judged.source is Source.UNFINISHED:
        return config.tests.truncated
    return score_result(judged.result, config.tests, weights_for(task, config.tests))


def _outcome(s: Scored) -> str:
    if not s.source.ran:
        return s.source.value
    if s.reward is None:
        return "masked"
    return s.result.status.value if s.result is not None else "unknown"


@dataclass(frozen=True)
class Scored:
    """One completion's verdict and the reward it gave."""

    verdict: Judged
    reward: float | None

    @property
    def result(self) -> Any:
        return self.verdict.result

    @property
    def source(self) -> Source:
        return self.verdict.source

    @property
    def program(self) -> str | None:
        return self.verdict.program


class CodeReward:
    """The verifiable reward (optionally blended with a reward model) as a TRL reward function.

    In training each row comes with its :class:`~grpo_code.training.rollouts.Rollout` record
    (the ``rollout`` column of TRL's ``extra_fields``): its verdict handle when scoring
    started while the batch generated, and whether it was cut at the length limit. Without
    records (scripts, eval's callers) completions are submitted here and none counts as
    cut. ``turn_cost``: subtracted per answer after the first of a multi-turn rollout.
    ``judge``: the generative judge blended in. ``log``: a
    :class:`~grpo_code.training.rollout_log.RolloutLog` told of every scored batch."""

    def __init__(self, config: RewardsConfig, verifier: Verifier, model: RewardModel | None = None,
                 style: str | None = None, task_column: str = "task_id", name: str = "code_reward",
                 turn_cost: float = 0.0, judge: JudgeScoring | None = None, log: Any = None):
        self.config = config
        self.judge = judge
        self.verifier = verifier
        self.model = model
        self.style = style
        self.task_column = task_column
        self.__name__ = name  # TRL names the reward's metrics after this
        self.turn_cost = turn_cost
        self.log = log
        self.last: list[Scored] = []
        """The scored items of the latest batch, for synchronous callers (``score_batch``)."""

    async def __call__(self, prompts: Sequence[Any], completions: Sequence[Any],
                       completion_ids: Sequence[Any] | None = None, **kwargs: Any) -> list[float | None]:
        started = time.perf_counter()
        tasks = self._tasks(kwargs.get(self.task_column))
        style = self.style or ("chat" if completions and not isinstance(completions[0], str) else "raw")
        if kwargs.get("final_answer") is not None:  # a multi-turn rollout: its last answer is scored
            completions = list(kwargs["final_answer"])
        handles = self._handles(tasks, completions, kwargs.get("rollout"), style)
        model_scores = self._model_scores(prompts, completions)
        verdicts = await self.verifier.gather(handles)
        tests = [reward_of(v, t, self.config) for v, t in zip(verdicts, tasks)]
        self.last = scored = [Scored(v, r) for v, r in zip(verdicts, tests)]
        rewards, metrics = await self._blend(tests, verdicts, tasks, model_scores, kwargs)
        check_masked(tests, self.config.tests.max_masked_frac, masked_errors(verdicts))
        rewards = self._less_turn_cost(rewards, kwargs.get("turns"))
        metrics.update(self._step_metrics(scored, completions, rewards, kwargs))
        metrics[M.REWARD_WAIT_S] = time.perf_counter() - started
        _log(kwargs, metrics, scored, tests)
        return rewards

    def _tasks(self, ids: Sequence[str] | None) -> list[Any]:
        if ids is None:
            raise RewardError(f"the training dataset has no {self.task_column!r} column",
                              "each prompt row must carry the id of its task")
        return [self.verifier.task(t) for t in ids]

    def _handles(self, tasks: list[Any], completions: Sequence[Any], records: Sequence[Any] | None,
                 style: str) -> list[Any]:
        """Each row's verdict handle: the one its rollout record carries (scoring started
        while the batch generated), else a submission now, cut as its record says."""
        records = records or [None] * len(tasks)
        return [r.handle if r is not None and r.handle is not None and r.task_id == t.id
                else self.verifier.submit(t, c, style, r is not None and r.cut)
                for t, c, r in zip(tasks, completions, records, strict=True)]

    def _model_scores(self, prompts: Sequence[Any], completions: Sequence[Any]) -> Any:
        """The reward model's scores, computed on a worker thread while the sandbox runs."""
        if self.model is None:
            return None
        tokenizer = getattr(self.model, "tokenizer", None)
        texts = [text_for(p, c, tokenizer) for p, c in zip(prompts, completions)]
        return asyncio.ensure_future(asyncio.to_thread(self.model.score, texts))

    async def _blend(self, tests: list[float | None], verdicts: list[Judged], tasks: list[Any], model_scores: Any,
                     kwargs: dict[str, Any]) -> tuple[list[float | None], dict[str, float]]:
        """The test rewards blended with the reward model and the judge, and the batch's metrics."""
        ids = [t.id for t in tasks]
        rewards: list[float | None] = tests
        metrics = batch_metrics([Scored(v, r) for v, r in zip(verdicts, tests)])
        if model_scores is not None:
            raw = await model_scores
            mc = self.config.model
            rewards = blend(tests, raw, ids, mc.weight, mc.blend, mc.normalize)
            present = [x for x in raw if x is not None]
            metrics[M.MODEL_SCORE_MEAN] = sum(present) / len(present) if present else 0.0
            metrics[M.MODEL_FAILED] = (len(raw) - len(present)) / max(1, len(raw))
        if self.judge is not None:
            passed = [v.passed for v in verdicts]
            step = getattr(kwargs.get("trainer_state"), "global_step", 0)
            judged, judge_metrics = await self.judge.scores(tasks, [v.program for v in verdicts], tests, passed, ids,
                                                            int(step or 0))
            rewards = self.judge.blend(rewards, tests, judged, passed, ids)
            metrics.update(judge_metrics)
        return rewards, metrics

    def _less_turn_cost(self, rewards: list[float | None], turns: Sequence[int] | None) -> list[float | None]:
        if turns is None or not self.turn_cost:
            return rewards
        return [None if r is None else r - self.turn_cost * (int(t) - 1) for r, t in zip(rewards, turns, strict=True)]

    def _step_metrics(self, scored: list[Scored], completions: Sequence[Any], rewards: list[float | None],
                      kwargs: dict[str, Any]) -> dict[str, float]:
        """The step's sandbox time, its generation's metrics (from the rollout batch) and
        what the rollout log reports."""
        metrics = {M.SANDBOX_BUSY_S: sum(s.result.duration_ms for s in scored
                                         if s.source is Source.EXECUTED and s.result is not None) / 1000}
        metrics.update(rollout_metrics(kwargs.get("rollout_batch")))
        if self.log is not None:
            metrics.update(self.log.scored(kwargs, completions, scored, rewards))
        return metrics


def rollout_metrics(batch: Any) -> dict[str, float]:
    """The metrics of a batch's generation (a :class:`~grpo_code.training.rollouts.RolloutBatch`;
    TRL hands the same one to every row)."""
    if isinstance(batch, list):
        batch = batch[0] if batch else None
    if batch is None:
        return {}
    out = {M.GENERATE_S: batch.generate_s, M.EARLY_JOBS: float(batch.early),
           M.STOPPED_AFTER_CODE: batch.stopped / max(1, batch.rows),
           M.SPECULATIVE_JOBS: float(batch.speculated), M.SPECULATIVE_WASTED: float(batch.speculation_wasted)}
    out.update(batch.metrics)
    return out


def _log(kwargs: dict[str, Any], metrics: dict[str, float], scored: list[Scored],
         tests: list[float | None]) -> None:
    log_metric = kwargs.get("log_metric")
    if callable(log_metric):
        for name, value in metrics.items():
            log_metric(name, float(value))
    log_extra = kwargs.get("log_extra")
    if callable(log_extra):
        log_extra("tests_outcome", [_outcome(s) for s in scored])
        log_extra("tests_reward", tests)


def reward_verifier(config: RewardsConfig, sandbox: Any, tasks: Any, extract: str = "last",
                    image_id: str | None = None) -> Verifier:
    """The verifier of a training run: its store is ``rewards.cache`` (memory, and the sqlite
    file of ``rewards.cache_path``), or none when the cache is off. Jobs stop at their first
    failing test where the reward needs only pass/fail (``all_or_nothing``) or the config asks."""
    cache = RewardCache(config.cache_size, config.cache_path, config.cache_mb << 20) if config.cache else None
    stop = config.tests.stop_at_first_failure or config.tests.mode == "all_or_nothing"
    return Verifier(tasks, sandbox, extract=extract, cache=cache, image_id=image_id, stop_on_failure=stop,
                    trust_unattested=config.tests.trust_unattested)


def build_reward_funcs(config: RewardsConfig, verifier: Verifier, style: str | None = None,
                       model: RewardModel | None = None, turn_cost: float = 0.0,
                       judge: JudgeScoring | None = None, log: Any = None) -> list[CodeReward]:
    """The reward functions for ``trl.GRPOTrainer`` (one: tests, blended with the model and
    the judge if enabled)."""
    if model is None:
        model = load_reward_model(config.model)
    return [CodeReward(config, verifier, model=model, style=style, turn_cost=turn_cost, judge=judge, log=log)]
