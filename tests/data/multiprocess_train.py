"""One `grpo-code train` run on a tiny model, started by `accelerate launch` in several
processes (tests/test_train_multiprocess.py). Each process writes what its prompt sampler
drew and what its prompt filter recorded to ``<record_dir>/rank<N>.json``.

Usage: multiprocess_train.py MODEL_DIR RUN_DIR RECORD_DIR [OVERRIDE ...]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

from grpo_code.config import load_config
from grpo_code.train import run_training
from grpo_code.training import filter as filtering


def main() -> None:
    model_dir, run_dir, record_dir, *overrides = sys.argv[1:]
    torch.set_num_threads(1)
    drawn: list[int] = []
    recorded: list[list] = []
    sampled = filtering.FilteringSampler.__iter__
    record = filtering.PromptFilter.record

    def iterate(self):  # noqa: ANN001, ANN202
        for index in sampled(self):
            drawn.append(index)
            yield index

    def note(self, task_id, rewards):  # noqa: ANN001, ANN202
        recorded.append([task_id, list(rewards)])
        return record(self, task_id, rewards)

    filtering.FilteringSampler.__iter__ = iterate
    filtering.PromptFilter.record = note
    cfg = load_config(None, [f"model.name={model_dir}", f"output.dir={run_dir}", *overrides])
    summary = run_training(cfg, log=lambda m: print(m, flush=True))
    rank = int(os.environ.get("RANK", "0"))
    Path(record_dir, f"rank{rank}.json").write_text(json.dumps(
        {"drawn": drawn, "recorded": recorded, "steps": summary.steps}))


if __name__ == "__main__":
    main()
