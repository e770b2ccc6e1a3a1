"""Time blocked on rewards per GRPO step, with scoring overlapped with generation and without.

Runs a few training steps of the demo config twice (``rewards.overlap`` true, then false;
same seed; each run starts with an empty in-memory reward cache, which overlap needs for
its speculative starts) and prints, per mode,
the mean per-step generation time, time blocked on rewards after generation, summed
sandbox job time, and their ratio. The first step is left out (warm-up).

    .venv/bin/python scripts/bench_train_overlap.py [--steps 5] [--json] [overrides...]

Design target: reward wait <= 10% of sandbox busy time with overlap on.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from grpo_code.config import load_config
from grpo_code.train import run_training

KEYS = ("timing/generate_s", "timing/reward_wait_s", "timing/sandbox_busy_s", "timing/step_s")


def run(overlap: bool, steps: int, overrides: list[str], root: Path) -> dict[str, float]:
    out = root / ("overlap" if overlap else "no-overlap")
    cfg = load_config(None, [f"train.trl.max_steps={steps}", "train.trl.save_steps=100000",
                             "rewards.cache=true", "rewards.cache_path=null",
                             f"rewards.overlap={str(overlap).lower()}", f"output.dir={out}", *overrides])
    run_training(cfg, log=lambda m: print(m, file=sys.stderr))
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "timing/reward_wait_s" in r][1:] or rows[-1:]
    means = {k.split("/")[1]: sum(r[k] for r in rows) / len(rows) for k in KEYS}
    means["wait_over_busy"] = means["reward_wait_s"] / means["sandbox_busy_s"] if means["sandbox_busy_s"] else 0.0
    means["steps_measured"] = len(rows)
    return means


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. generation.max_new_tokens=128")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="grpo-code-bench-") as tmp:
        on = run(True, args.steps, args.overrides, Path(tmp))
        off = run(False, args.steps, args.overrides, Path(tmp))
    report = {"overlap": on, "no_overlap": off,
              "wait_reduction": off["reward_wait_s"] / on["reward_wait_s"] if on["reward_wait_s"] else None}
    if args.json:
        print(json.dumps(report))
        return
    print(f"{'per step (mean)':<22}{'overlap':>12}{'no overlap':>12}")
    for key in ("generate_s", "reward_wait_s", "sandbox_busy_s", "step_s", "wait_over_busy"):
        print(f"{key:<22}{on[key]:>12.3f}{off[key]:>12.3f}")
    if report["wait_reduction"]:
        print(f"reward wait reduced {report['wait_reduction']:.1f}x by overlapping")


if __name__ == "__main__":
    main()
