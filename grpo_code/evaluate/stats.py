"""pass@k statistics: the unbiased estimator, bootstrap intervals over tasks, the summary record."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

from grpo_code.evaluate.summary import EvalSummary, TaskCount
from grpo_code.tasks.suite import Suite


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task with ``c`` correct of ``n`` samples (Chen et al. 2021)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod((n - c - i) / (n - i) for i in range(k))


def bootstrap_ci(values: Sequence[float], iters: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of the mean, resampling tasks with replacement."""
    if not values:
        return (0.0, 0.0)
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(iters))
    return (means[int(0.025 * iters)], means[min(iters - 1, int(0.975 * iters))])


def summarize(suite: Suite, counts: dict[str, tuple[int, int]], ks: Sequence[int], mix: Counter,
              model: str, missing: Sequence[str] = (), **extra: Any) -> EvalSummary:
    """pass@k and intervals from per-task (n, correct) counts; ``missing`` names the tasks
    that were asked for but have no samples (not counted); ``extra``: the record's
    ``settings`` or ``samples_file``."""
    task_ids = [t.id for t in suite.tasks if t.id in counts]
    pass_k, ci = {}, {}
    for k in ks:
        per_task = [pass_at_k(*counts[t], k) for t in task_ids]
        pass_k[k] = round(sum(per_task) / len(per_task), 6) if per_task else 0.0
        lo, hi = bootstrap_ci(per_task)
        ci[k] = (round(lo, 6), round(hi, 6))
    return EvalSummary(
        model=model, suite=suite.name, suite_hash=suite.content_hash(), pass_at_k=pass_k, ci95=ci,
        per_task={t: TaskCount(*counts[t]) for t in task_ids}, verdicts=dict(sorted(mix.items())),
        tasks_in_suite=len(task_ids) + len(missing), missing_tasks=tuple(missing), **extra)
