"""The learning check (opt in: ``pytest -m slow``): GRPO on the demo must make SmolLM2 better.

Runs ``scripts/learning_check.py``: pass@1 on the demo train tasks (and the held-out ones)
before and after GRPO on CPU, and the reward curve's last quarter against its first (the
same tasks); docs/training.md gives its settings, docs/benchmarks.md its times. The check's statistics are tested fast.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_code.evaluate.summary import EvalSummary, TaskCount

REPO = Path(__file__).resolve().parent.parent


def _check_module():
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import learning_check
    finally:
        sys.path.pop(0)
    return learning_check


def _write_run(run: Path, plan: list[list[tuple[str, float]]]) -> list[float]:
    """A run directory whose step ``i`` trained on the (task, reward) rows of ``plan[i]``."""
    run.mkdir(parents=True, exist_ok=True)
    with (run / "completions.jsonl").open("w") as fh:
        for step, rows in enumerate(plan):
            for task, reward in rows:
                fh.write(json.dumps({"step": step, "task_id": task, "reward": reward}) + "\n")
    return [sum(r for _, r in rows) / len(rows) for rows in plan]


def test_the_reward_test_pairs_tasks_when_both_parts_trained_on_them(tmp_path: Path) -> None:
    """Tasks of very different difficulty, each gaining 0.1: per step the task draw looks
    like noise, paired by task it cancels. With other tasks in the last part the per-step
    error decides."""
    lc = _check_module()
    hard, easy = [(f"h{i}", 0.1) for i in range(4)], [(f"e{i}", 0.8) for i in range(4)]
    epoch = [[hard[0], hard[1]], [easy[0], easy[1]], [hard[2], easy[2]], [hard[3], easy[3]]]
    later = [[(t, r + 0.1) for t, r in rows] for rows in reversed(epoch)]  # another order, a bit better
    rewards = _write_run(tmp_path / "a", [*epoch, *epoch, *epoch, *later])
    paired = lc.first_last_test(rewards, tmp_path / "a")
    assert paired["noise"] == "tasks" and paired["tasks"] == {"first": 8, "last": 8, "both": 8}
    assert abs(paired["diff"] - 0.1) < 1e-9 and paired["se_tasks"] < 1e-6 < paired["se_steps"]
    assert paired["beyond_noise"] and not paired["diff"] > 2 * paired["se_steps"]

    other = [[(t.replace("h", "x").replace("e", "y"), r + 0.1) for t, r in rows] for rows in epoch]
    rewards = _write_run(tmp_path / "b", [*epoch, *epoch, *epoch, *other])
    unpaired = lc.first_last_test(rewards, tmp_path / "b")
    assert unpaired["noise"] == "steps" and unpaired["se_tasks"] is None
    assert unpaired["tasks"]["both"] == 0 and not unpaired["beyond_noise"]

    # Two epochs, the check's default: the parts are the first and the last epoch.
    rewards = _write_run(tmp_path / "c", [*epoch, *later])
    two = lc.first_last_test(rewards, tmp_path / "c", part=len(epoch))
    assert two["steps_per_part"] == 4 and two["noise"] == "tasks" and two["tasks"]["both"] == 8
    assert abs(two["diff"] - 0.1) < 1e-9 and two["beyond_noise"]
    assert lc.first_last_test(rewards, tmp_path / "c")["steps_per_part"] == 2  # a quarter: other tasks


def _summary(correct: dict[str, int], n: int = 4) -> EvalSummary:
    """An eval summary of ``n`` samples per task with ``correct[task]`` passing."""
    return EvalSummary(model="m", suite="s", suite_hash="h", pass_at_k={}, ci95={},
                       per_task={t: TaskCount(n, c) for t, c in correct.items()}, verdicts={},
                       tasks_in_suite=len(correct))


def test_the_pass_at_1_change_is_paired_by_task() -> None:
    """Task difficulty cancels out of the change: tasks of very different pass rates, each up
    by 0.25, give a change of 0.25 with no spread over the tasks. The evals' sampling noise
    (the verdict's) is each share's binomial variance, p(1 - p)/(n - 1), summed over both
    evals and the tasks."""
    lc = _check_module()
    before = _summary({"a": 0, "b": 3, "c": 1})
    after = _summary({"a": 1, "b": 4, "c": 2})
    change = lc.paired_change(before, after, {"a", "b", "c"})
    assert change["tasks"] == 3 and change["change"] == 0.25 and change["se_tasks"] == 0.0
    # a: 0 + 1/16, b: 1/16 + 0, c: 1/16 + 1/12 (each p(1 - p)/3)
    assert change["se"] == round(math.sqrt(3 / 16 + 1 / 12) / 3, 4)
    mixed = lc.paired_change(before, _summary({"a": 0, "b": 4, "c": 2}), {"a", "b"})
    assert mixed["tasks"] == 2 and mixed["change"] == 0.125 and mixed["se_tasks"] == 0.125
    assert mixed["se"] == round(math.sqrt(1 / 16) / 2, 4)
    # A task every sample of both evals passed (or failed) adds no sampling noise.
    same = lc.paired_change(_summary({"a": 0, "b": 4}), _summary({"a": 0, "b": 4}), {"a", "b"})
    assert same == {"tasks": 2, "change": 0.0, "se": 0.0, "se_tasks": 0.0}


def test_split_pass_is_pass_at_1_over_the_split_s_tasks_with_its_standard_error() -> None:
    """One eval of every task serves both splits: each split's pass@1 is the mean share of
    correct samples over its own tasks."""
    lc = _check_module()
    summary = _summary({"a": 2, "b": 4, "c": 0, "d": 1})
    train = lc.split_pass(summary, {"a", "b"})
    assert train == {"tasks": 2, "pass_at_1": 0.75, "se": 0.25}
    held_out = lc.split_pass(summary, {"c", "d", "not-evaluated"})
    assert held_out["tasks"] == 2 and held_out["pass_at_1"] == 0.125 and held_out["se"] == 0.125


@pytest.mark.slow
@pytest.mark.docker
def test_grpo_on_the_demo_raises_reward_and_pass_at_1(tmp_path: Path, docker_ready: None, demo_model_dir: Path):
    proc = subprocess.run([sys.executable, "scripts/learning_check.py", "--json", "--out", str(tmp_path / "check")],
                          cwd=REPO, capture_output=True, text=True, timeout=60 * 60)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["pass_at_1_gain"] >= 0.05 and report["pass_at_1_gain"] > 2 * report["se_gain"], (
        f"pass@1 {report['pass_at_1_before']:.3f} -> {report['pass_at_1_after']:.3f} (se {report['se_gain']})")
    assert proc.returncode == 0
