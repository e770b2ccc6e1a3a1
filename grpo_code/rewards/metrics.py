"""Per-batch reward metrics, named as they appear in TRL's logs.

``batch_metrics`` summarises one scored batch: ``tests/pass_rate`` (completions that
passed every test, among those scored), the verdict mix (share of executed tests per
verdict, pass and not_run included, plus the share of completions with no code, with an
unfinished program cut at the length limit, and of masked ones), ``tests/unattested`` (executed tests judged inside
the program's process, whose passes the verifier counts as fails by default),
``sandbox/latency_p50_ms`` / ``p95`` over the jobs that actually ran, and
``sandbox/cache_hit_rate`` (completions with code served without a new execution:
cache hits and in-flight duplicates). Reward functions hand these to TRL's
``log_metric``, which averages them over each logging step.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from grpo_code import metric_names as M
from grpo_code.sandbox.types import Result, Status, Verdict
from grpo_code.verify.runs import Source

VERDICT_KEYS = [v.value for v in Verdict]


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (``q`` in [0, 100]) of a non-empty sequence."""
    data = sorted(values)
    pos = (len(data) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def batch_metrics(scored: Sequence[Any]) -> dict[str, float]:
    """Metrics of one batch of :class:`~grpo_code.rewards.functions.Scored` items."""
    n = len(scored)
    if not n:
        return {}
    no_code = [s for s in scored if s.source is Source.NO_CODE]
    unfinished = sum(s.source is Source.UNFINISHED for s in scored)
    with_code = [s for s in scored if s.source.ran]
    results: list[Result] = [s.result for s in with_code if s.result is not None]
    masked = sum(s.reward is None for s in scored)
    judged = [r for r in results if r.status is not Status.INFRA_ERROR]
    verdicts = Counter(t.verdict.value for r in judged for t in r.tests)
    n_tests = sum(verdicts.values())
    out = {
        M.PASS_RATE: sum(r.status is Status.PASS for r in judged) / max(1, n - masked),
        M.NO_CODE: len(no_code) / n,
        M.UNFINISHED: unfinished / n,
        M.MASKED: masked / n,
    }
    out[M.UNATTESTED] = sum(not t.attested for r in judged for t in r.tests) / n_tests if n_tests else 0.0
    for key in VERDICT_KEYS:
        out[M.verdict_share(key)] = verdicts.get(key, 0) / n_tests if n_tests else 0.0
    executed = [s.result.duration_ms for s in with_code if s.source is Source.EXECUTED and s.result is not None]
    out[M.EXECUTED] = float(len(executed))
    if executed:
        out[M.LATENCY_P50_MS] = percentile(executed, 50)
        out[M.LATENCY_P95_MS] = percentile(executed, 95)
    if with_code:
        out[M.CACHE_HIT_RATE] = sum(s.source.reused for s in with_code) / len(with_code)
    return out
