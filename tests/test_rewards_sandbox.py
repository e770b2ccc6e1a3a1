"""A GRPO-shaped batch of the demo suite scored through the real Docker sandbox."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from grpo_code.config import RewardsConfig, RewardTestsConfig, SandboxConfig
from grpo_code.rewards import build_reward_funcs, reward_verifier
from grpo_code.sandbox import Limits, Sandbox, Status, Verdict
from grpo_code.tasks import load_suite, render

pytestmark = pytest.mark.docker

G = 4


class CountingSandbox:
    """The real sandbox, counting the jobs that reach it."""

    def __init__(self, sandbox: Sandbox):
        self.inner = sandbox
        self.jobs = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def submit(self, job):
        self.jobs += 1
        return self.inner.submit(job)


def fenced(code: str, prose: str = "Here is my solution.") -> list[dict[str, str]]:
    return [{"role": "assistant", "content": f"{prose}\n\n```python\n{code}```\n"}]


def batch():
    """(task id, completion, expected reward, expected verdict or None) x G per prompt."""
    suite = load_suite("demo")
    add, square, even, last = (suite.get(i) for i in
                               ("demo/001-add", "demo/002-square", "demo/003-is-even", "demo/004-last-element"))
    # the infinite loop times out per test: keep its limit short so the test stays quick
    even = dataclasses.replace(even, limits=Limits(timeout_s=1.0))
    rows = [
        (add, fenced(add.reference), 1.0, Verdict.PASS),
        (add, fenced(add.reference, "Sure! This adds two numbers."), 1.0, Verdict.PASS),  # duplicate program
        (add, fenced("def add(a, b):\n    return a * b\n"), 1 / 5, Verdict.FAIL),
        (add, fenced("def add(a, b)\n    return a + b\n"), -0.1, Verdict.COMPILE_ERROR),  # broken
        (square, fenced("def square(n):\n    return n * 2\n"), 1 / 4, Verdict.FAIL),
        (square, fenced("def square(n):\n    return n * 2\n", "Doubling works."), 1 / 4, Verdict.FAIL),
        (square, fenced(square.reference), 1.0, Verdict.PASS),
        (square, [{"role": "assistant", "content": "I cannot write code today."}], -0.2, None),  # no code
        (even, fenced("def is_even(n):\n    return True\n"), 3 / 5, Verdict.FAIL),
        (even, fenced(even.reference), 1.0, Verdict.PASS),
        (even, fenced("def is_even(n):\n    while True:\n        pass\n"), 0.0, Verdict.TIMEOUT),
        (even, fenced(even.reference, "Same again."), 1.0, Verdict.PASS),
        (last, fenced("def last_element(items):\n    return items[-1]\n"), 3 / 4, Verdict.RUNTIME_ERROR),
        (last, fenced(last.reference), 1.0, Verdict.PASS),
        (last, fenced("def last_element(items):\n    raise ValueError(items)\n"), 0.0, Verdict.RUNTIME_ERROR),
        (last, fenced("def last_element(items):\n    return items[-1]\n", "Short."), 3 / 4, Verdict.RUNTIME_ERROR),
    ]
    assert len(rows) == 4 * G
    return [add, square, even, last], rows


def call(func, tasks, rows, metrics):
    prompts = [render(t).for_trl() for t, *_ in rows]
    return asyncio.run(func(prompts=prompts, completions=[c for _, c, *_ in rows], completion_ids=None,
                            task_id=[t.id for t, *_ in rows], trainer_state=None,
                            log_metric=lambda n, v: metrics.__setitem__(n, v), log_extra=lambda c, v: None))


def test_grpo_batch_through_docker(docker_ready, tmp_path: Path):
    tasks, rows = batch()
    cfg = RewardsConfig(tests=RewardTestsConfig(no_code=-0.2, compile_error=-0.1),
                        cache_path=str(tmp_path / "rewards.sqlite"))
    with Sandbox(SandboxConfig(backend="docker", workers=2, timeout_s=5)) as real:
        sandbox = CountingSandbox(real)
        [func] = build_reward_funcs(cfg, reward_verifier(cfg, sandbox, tasks))
        metrics: dict[str, float] = {}
        rewards = call(func, tasks, rows, metrics)

        assert rewards == pytest.approx([r[2] for r in rows])
        for (task, _, _expected, verdict), scored in zip(rows, func.last):
            if verdict is None:
                assert scored.source == "no_code" and scored.result is None
                continue
            res = scored.result
            assert res.status is not Status.INFRA_ERROR, res.error
            assert verdict in {t.verdict for t in res.tests}, (task.id, res.to_dict())
            if verdict is not Verdict.COMPILE_ERROR:
                assert scored.reward == pytest.approx(res.passed / res.total)
        # 15 completions with code, 11 distinct programs: duplicates executed once
        assert sandbox.jobs == 11
        assert [s.source for s in func.last].count("inflight") == 4
        assert metrics["sandbox/executed"] == 11
        assert metrics["sandbox/cache_hit_rate"] == pytest.approx(4 / 15)
        assert metrics["tests/no_code"] == pytest.approx(1 / 16)
        assert metrics["tests/timeout"] > 0 and metrics["tests/runtime_error"] > 0
        assert metrics["tests/pass_rate"] == pytest.approx(6 / 16)  # six completions pass every test
        assert metrics["sandbox/latency_p95_ms"] >= metrics["sandbox/latency_p50_ms"] > 0

        # the next step (and a rerun reading the sqlite file) executes nothing
        [rerun] = build_reward_funcs(cfg, reward_verifier(cfg, sandbox, tasks))
        again: dict[str, float] = {}
        assert call(rerun, tasks, rows, again) == pytest.approx(rewards)
        assert sandbox.jobs == 11
        assert again["sandbox/cache_hit_rate"] == 1.0 and again["sandbox/executed"] == 0
