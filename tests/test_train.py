"""Training: prompt filtering, run directories and resume rules, and a real GRPO run on CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grpo_code.cli import app
from grpo_code.config import load_config
from grpo_code.errors import ConfigError
from grpo_code.train import TrainError, config_diff, grpo_args, last_checkpoint, prepare_run
from grpo_code.training.filter import FilteringSampler, PromptFilter

runner = CliRunner()


def test_filter_skips_zero_advantage_tasks_and_reprobes() -> None:
    f = PromptFilter(history=2, skip_prob=1.0)
    f.record("a", [1.0, 1.0, 1.0, 1.0])
    assert f.admit("a")  # one all-pass group is not yet a history of them
    f.record("a", [1.0, 1.0, None, 1.0])
    assert not f.admit("a")
    f.record("a", [0.0, 1.0, 1.0, 1.0])  # the model changed: the task carries gradient again
    assert f.admit("a")
    f.record("b", [0.0, 0.0])
    f.record("b", [0.0, 0.0])
    sometimes = PromptFilter(history=1, skip_prob=0.5, seed=1)
    sometimes.record("b", [0.0, 0.0])
    admitted = sum(sometimes.admit("b") for _ in range(400))
    assert 140 < admitted < 260  # re-probed about half the time
    assert sometimes.take_counts() == (admitted, 400 - admitted) and sometimes.take_counts() == (0, 0)


def test_filtering_sampler_keeps_trl_repeat_pattern_and_avoids_dead_prompts() -> None:
    ids = [f"t{i}" for i in range(6)]
    f = PromptFilter(history=1, skip_prob=1.0)
    for dead in ("t0", "t1"):
        f.record(dead, [1.0, 1.0])
    sampler = FilteringSampler(range(6), ids, f, mini_repeat_count=2, batch_size=3, repeat_count=2, seed=0)
    out = list(sampler)
    assert len(out) == len(sampler) == 6 // 3 * 3 * 2 * 2
    first = out[:12]
    chunk = first[:6]
    assert first[6:] == chunk  # the chunk repeats (steps_per_generation / num_iterations)
    assert all(chunk[i] == chunk[i + 1] for i in range(0, 6, 2))  # each prompt twice in a row
    assert not {0, 1} & set(out)


def test_config_diff_names_keys_but_not_the_run_dir() -> None:
    a = load_config(None).to_dict()
    b = load_config(None, ["sandbox.workers=3", "train.trl.max_steps=5", "output.dir=elsewhere"]).to_dict()
    assert config_diff(a, b) == ["sandbox.workers", "train.trl.max_steps"]


def test_resume_is_refused_for_a_changed_config(tmp_path: Path) -> None:
    cfg = load_config(None, [f"output.dir={tmp_path / 'run'}"])
    cfg, run_dir, ckpt = prepare_run(cfg, None)
    assert (run_dir / "config.yaml").is_file() and ckpt is None
    with pytest.raises(TrainError, match="already holds a run"):
        prepare_run(cfg, None)
    with pytest.raises(TrainError, match="no checkpoint"):
        prepare_run(cfg, run_dir)
    (run_dir / "checkpoint-2").mkdir()
    (run_dir / "checkpoint-10").mkdir()
    assert last_checkpoint(run_dir) == run_dir / "checkpoint-10"
    changed = load_config(None, [f"output.dir={run_dir}", "train.trl.learning_rate=1e-3", "eval.n=9"])
    with pytest.raises(TrainError, match=r"differs from the run in .*: eval.n, train.trl.learning_rate"):
        prepare_run(changed, run_dir)
    with pytest.raises(TrainError, match="not a run directory"):
        prepare_run(cfg, tmp_path)


def test_trl_rejections_become_config_errors(tmp_path: Path) -> None:
    cfg = load_config(None, ["train.trl.no_such_option=1"])
    with pytest.raises(ConfigError, match="train.trl"):
        grpo_args(cfg, tmp_path)
    cfg = load_config(None, ["train.trl.num_generations=3"])  # must divide the generation batch (8)
    with pytest.raises(ConfigError, match="train.trl"):
        grpo_args(cfg, tmp_path)


def test_train_cli_rejects_openai_generation(tmp_path: Path) -> None:
    result = runner.invoke(app, ["train", "generation.backend=openai", "generation.server_url=http://127.0.0.1:1/v1",
                                 f"output.dir={tmp_path / 'r'}"])
    assert result.exit_code == 2 and "cannot generate through the openai backend" in result.stderr


TINY = ["train.trl.max_steps=2", "train.trl.per_device_train_batch_size=4", "train.trl.num_generations=4",
        "train.trl.save_steps=1", "train.trl.learning_rate=1e-4", "generation.max_new_tokens=48",
        "generation.temperature=1.0", "tasks.train_split=1-4", "train.seed=1", "rewards.overlap=true"]


def test_tiny_grpo_run_on_cpu_updates_the_model_and_writes_the_run_dir(demo_model_dir: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    run = tmp_path / "run"
    result = runner.invoke(app, ["train", *TINY, f"output.dir={run}"])
    assert result.exit_code == 0, result.output
    assert "model saved to" in result.stdout and "grpo-code eval" in result.stdout
    assert load_config(run / "config.yaml").train.trl["max_steps"] == 2
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "reward" in m]
    assert len(steps) == 2
    for key in ("timing/generate_s", "timing/reward_wait_s", "timing/sandbox_busy_s", "timing/step_s",
                "tests/pass_rate", "sandbox/cache_hit_rate"):
        assert key in steps[0], key
    completions = [json.loads(line) for line in (run / "completions.jsonl").read_text().splitlines()]
    assert len(completions) == 8 and {c["step"] for c in completions} == {0, 1}
    assert all(set(c) >= {"task_id", "completion", "program", "verdicts", "reward"} for c in completions)
    assert any(m.get("reward_std", 0) > 0 for m in steps), "seeded run should see reward variance"
    before = load_file(demo_model_dir / "model.safetensors")
    after = load_file(run / "final" / "model.safetensors")
    changed = [k for k in after if k in before and not before[k].equal(after[k])]
    assert changed, "GRPO update did not change any parameter"
    # Resuming with the same config continues from the last checkpoint (nothing left to do here).
    again = runner.invoke(app, ["train", "--resume", str(run)])
    assert again.exit_code == 0, again.output
    refused = runner.invoke(app, ["train", *TINY, "train.trl.learning_rate=1e-3", f"output.dir={run}", "--resume", str(run)])
    assert refused.exit_code == 2 and "train.trl.learning_rate" in refused.stderr
