"""TRL reward functions built from the run config.

``build_reward_funcs(config.rewards, sandbox, suite)`` returns the list handed to
``trl.GRPOTrainer(reward_funcs=...)``. Each is an async callable with TRL's signature
``(prompts, completions, completion_ids=None, **kwargs) -> list[float | None]``; TRL runs
async reward functions concurrently on its own event loop. Dataset columns arrive as
keyword lists: the ``task_id`` column names each completion's task. Completions are
strings, or message lists for conversational prompts (extraction style ``chat``;
plain-text prompts use ``raw`` unless ``style`` is given).

:class:`CodeReward` awaits the sandbox results (claiming handles that a trainer
submitted early through ``scorer.submit_early``) while, when a reward model is
configured, the model scores the same completions on a worker thread; the two are then
blended (:mod:`.blend`). ``None`` marks an infrastructure error: TRL masks it. A batch
with too many masked rewards raises :class:`~grpo_code.errors.RewardError`. Metrics go
to TRL's ``log_metric`` (:mod:`.metrics`), per-completion outcomes to ``log_extra``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from grpo_code.config import RewardsConfig
from grpo_code.errors import RewardError
from grpo_code.rewards.blend import blend
from grpo_code.rewards.metrics import batch_metrics
from grpo_code.rewards.model.reward_model import RewardModel, load_reward_model, text_for
from grpo_code.rewards.scorer import RewardScorer, Scored, masked_errors
from grpo_code.rewards.verifiable import check_masked


def task_index(tasks: Any) -> dict[str, Any]:
    """Tasks by id from a Suite, a mapping of id to task, or an iterable of tasks."""
    if isinstance(tasks, Mapping):
        return dict(tasks)
    items: Iterable[Any] = getattr(tasks, "tasks", tasks)
    return {t.id: t for t in items}


def _outcome(s: Scored) -> str:
    if s.source in ("no_code", "unfinished"):
        return s.source
    if s.reward is None:
        return "masked"
    return s.result.status.value if s.result is not None else "unknown"


class CodeReward:
    """The verifiable reward (optionally blended with a reward model) as a TRL reward function."""

    def __init__(self, config: RewardsConfig, scorer: RewardScorer, tasks: Any, model: RewardModel | None = None,
                 style: str | None = None, task_column: str = "task_id", name: str = "code_reward",
                 stop_token_ids: Iterable[int] = ()):
        self.config = config
        self.scorer = scorer
        self.tasks = task_index(tasks)
        self.model = model
        self.style = style
        self.task_column = task_column
        self.__name__ = name  # TRL names the reward's metrics after this
        self.last: list[Scored] = []
        """The scored items of the latest batch (for callers that want verdicts)."""
        self.stop_token_ids = set(stop_token_ids)
        """Token ids that end a completion (EOS); one whose ids end otherwise was cut at the
        length limit. Empty: no completion counts as cut. The trainer fills it in."""
        self.turn_cost = 0.0
        """Subtracted per answer after the first of a multi-turn rollout (``train.multi_turn.turn_cost``)."""

    def truncated(self, completion_ids: Sequence[int] | None) -> bool:
        """Whether a completion's token ids stop without an end token (cut at the length limit)."""
        if not self.stop_token_ids or completion_ids is None:
            return False
        return not len(completion_ids) or int(completion_ids[-1]) not in self.stop_token_ids

    def _task(self, task_id: Any) -> Any:
        task = self.tasks.get(task_id)
        if task is None:
            raise RewardError(f"reward function got task id {task_id!r}, which is not in the task set",
                              "build the reward functions from the same suite as the training dataset")
        return task

    async def __call__(self, prompts: Sequence[Any], completions: Sequence[Any],
                       completion_ids: Sequence[Any] | None = None, **kwargs: Any) -> list[float | None]:
        ids = kwargs.get(self.task_column)
        if ids is None:
            raise RewardError(f"the training dataset has no {self.task_column!r} column",
                              "each prompt row must carry the id of its task")
        tasks = [self._task(t) for t in ids]
        style = self.style or ("chat" if completions and not isinstance(completions[0], str) else "raw")
        if kwargs.get("final_answer") is not None:  # a multi-turn rollout: its last answer is scored
            completions = list(kwargs["final_answer"])
        cut = [self.truncated(ids) for ids in completion_ids] if completion_ids is not None else [False] * len(tasks)
        handles = [self.scorer.claim(t, c, style, tr) for t, c, tr in zip(tasks, completions, cut)]
        model_scores = None
        if self.model is not None:
            tokenizer = getattr(self.model, "tokenizer", None)
            texts = [text_for(p, c, tokenizer) for p, c in zip(prompts, completions)]
            model_scores = asyncio.ensure_future(asyncio.to_thread(self.model.score, texts))
        scored = await self.scorer.gather(handles)
        self.last = scored
        tests = [s.reward for s in scored]
        rewards: list[float | None] = tests
        metrics = batch_metrics(scored)
        if model_scores is not None:
            raw = await model_scores
            mc = self.config.model
            rewards = blend(tests, raw, ids, mc.weight, mc.blend, mc.normalize)
            present = [x for x in raw if x is not None]
            metrics["model/score_mean"] = sum(present) / len(present) if present else 0.0
            metrics["model/failed"] = (len(raw) - len(present)) / max(1, len(raw))
        _log(kwargs, metrics, scored, tests)
        check_masked(tests, self.config.tests.max_masked_frac, masked_errors(scored))
        turns = kwargs.get("turns")
        if turns is not None and self.turn_cost:
            rewards = [None if r is None else r - self.turn_cost * (int(t) - 1) for r, t in zip(rewards, turns, strict=True)]
        return rewards

    def score_batch(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        """The same as calling the function, for synchronous callers (eval, scripts)."""
        return asyncio.run(self(prompts, completions, **kwargs))


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


def build_reward_funcs(config: RewardsConfig, sandbox: Any, tasks: Any, extract: str = "last",
                       style: str | None = None, scorer: RewardScorer | None = None,
                       model: RewardModel | None = None) -> list[CodeReward]:
    """The reward functions for ``trl.GRPOTrainer`` (one: tests, blended with the model if enabled).

    ``scorer`` is created when not given; a trainer that overlaps scoring keeps a reference
    (``funcs[0].scorer``) to ``submit_early`` completions as they are generated.
    """
    scorer = scorer or RewardScorer(config, sandbox, extract=extract)
    if model is None:
        model = load_reward_model(config.model)
    return [CodeReward(config, scorer, tasks, model=model, style=style)]
