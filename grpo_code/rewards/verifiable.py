"""The verifiable reward: one sandbox :class:`~grpo_code.sandbox.types.Result` -> one number.

Modes (``rewards.tests.mode``):

- ``pass_fraction``: passed tests / tests (default; partial credit keeps a gradient).
- ``all_or_nothing``: 1.0 when every test passed, else 0.0.
- ``weighted``: the passed share of per-test weights read from the task's metadata
  (``rewards.tests.weights_key``, default ``test_weights``; a task without it weighs
  every test 1).

Outcomes that are not a test score: no code extracted gives ``rewards.tests.no_code``; a
program that does not compile gives ``rewards.tests.compile_error``; an infrastructure
error gives ``None``, which TRL masks (the completion gets no advantage) instead of
blaming the program. :func:`check_masked` fails a batch in which too many were masked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from grpo_code.config import RewardTestsConfig
from grpo_code.errors import RewardError
from grpo_code.sandbox.types import Result, Status, Verdict


def weights_for(task: Any, config: RewardTestsConfig) -> tuple[float, ...] | None:
    """The per-test weights of ``task`` for ``weighted`` mode (None = uniform)."""
    if config.mode != "weighted":
        return None
    raw = (getattr(task, "metadata", None) or {}).get(config.weights_key)
    if raw is None:
        return None
    ntests = len(task.tests)
    ok = isinstance(raw, (list, tuple)) and len(raw) == ntests and all(
        isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w >= 0 for w in raw
    )
    if not ok or sum(raw) <= 0:
        raise RewardError(
            f"task {task.id!r}: metadata.{config.weights_key} is {raw!r}, expected {ntests} non-negative "
            "numbers with a positive sum (one per test)",
            f"fix the task record, or drop metadata.{config.weights_key} to weigh every test 1",
        )
    return tuple(float(w) for w in raw)


def score_result(
    result: Result | None,
    config: RewardTestsConfig,
    weights: Sequence[float] | None = None,
) -> float | None:
    """The reward for one completion; ``result=None`` means no code was extracted."""
    if result is None:
        return config.no_code
    if result.status is Status.INFRA_ERROR:
        return None
    if any(t.verdict is Verdict.COMPILE_ERROR for t in result.tests):
        return config.compile_error
    if not result.total:
        return None
    if config.mode == "all_or_nothing":
        return 1.0 if result.passed == result.total else 0.0
    if config.mode == "weighted" and weights is not None:
        if len(weights) != len(result.tests):
            raise RewardError(
                f"{len(weights)} test weights for a result with {len(result.tests)} tests",
                "give one weight per test in the task's metadata",
            )
        passed = sum(w for w, t in zip(weights, result.tests) if t.verdict is Verdict.PASS)
        return passed / sum(weights)
    return result.passed / result.total


def check_masked(rewards: Sequence[float | None], max_masked_frac: float, errors: Sequence[str] = ()) -> int:
    """Count masked (None) rewards; raise :class:`RewardError` when more than the allowed share are.

    ``errors`` are the sandbox's messages for the masked ones (the distinct ones are quoted).
    """
    masked = sum(r is None for r in rewards)
    if rewards and masked / len(rewards) > max_masked_frac:
        seen = list(dict.fromkeys(e for e in errors if e))[:3]
        why = f"; sandbox said: {' | '.join(seen)}" if seen else ""
        raise RewardError(
            f"{masked} of {len(rewards)} rewards in this batch are masked by sandbox infrastructure errors "
            f"(more than rewards.tests.max_masked_frac={max_masked_frac}){why}",
            "run `grpo-code sandbox doctor`, lower sandbox.workers or raise sandbox limits; "
            "raise rewards.tests.max_masked_frac only if the errors are expected",
        )
    return masked
