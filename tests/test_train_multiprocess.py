"""Training in two processes (``accelerate launch``, gloo on CPU) draws and records what one
process would: the same prompt stream on every rank, groups never split between prompts,
and a prompt filter that records every process's rewards, as whole groups."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import free_port

HERE = Path(__file__).parent
GENERATIONS = 4
STEPS = 3


def test_two_processes_draw_one_prompt_stream_and_record_whole_groups(tiny_model_dir: Path, tmp_path: Path) -> None:
    import tiny_model

    run, records = tmp_path / "run", tmp_path / "records"
    records.mkdir()
    # 6 rows per process, groups of 4: of each step's 3 prompts, the middle one's group is
    # split between the two processes.
    overrides = ["generation.backend=hf", f"train.trl.max_steps={STEPS}", "train.trl.per_device_train_batch_size=6",
                 f"train.trl.num_generations={GENERATIONS}", "train.trl.save_steps=100",
                 "generation.max_new_tokens=48", "generation.temperature=1.0",
                 f"tasks.train_split={tiny_model.SPLIT}", "train.seed=3", "train.filter.enabled=true",
                 "train.filter.history=1", "train.filter.skip_prob=1.0", "rewards.overlap=true",
                 "train.stop_after_code=true", "sandbox.backend=local", "sandbox.workers=1"]
    env = {**os.environ, "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
              "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
              "--main_process_ip", "127.0.0.1", "--main_process_port", str(free_port())]
    done = subprocess.run([*launch, str(HERE / "data" / "multiprocess_train.py"), str(tiny_model_dir), str(run),
                           str(records), *overrides], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    ranks = [json.loads((records / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["steps"] for r in ranks] == [STEPS, STEPS]

    # Every rank's sampler drew the same stream: TRL hands each its slice of one batch.
    assert ranks[0]["drawn"] and ranks[0]["drawn"] == ranks[1]["drawn"]
    # Both recorded the same whole groups, from the rewards of both processes.
    assert ranks[0]["recorded"] == ranks[1]["recorded"]
    assert len(ranks[0]["recorded"]) == STEPS * 12 // GENERATIONS
    assert all(len(values) == GENERATIONS for _, values in ranks[0]["recorded"])

    # The main process logged both processes' rows; each group of 4 is one prompt's.
    rows = [json.loads(line) for line in (run / "completions.jsonl").read_text().splitlines()]
    assert len(rows) == STEPS * 12
    groups = [rows[i:i + GENERATIONS] for i in range(0, len(rows), GENERATIONS)]
    assert all(len({r["task_id"] for r in g}) == 1 for g in groups)
    assert [[g[0]["task_id"], [r["reward"] for r in g]] for g in groups] == [
        [t, pytest.approx(v)] for t, v in ranks[0]["recorded"]]

    assert any(r["reward"] != groups[0][0]["reward"] for g in groups for r in g), "rewards should vary"
