"""Synchronous training against rollouts ahead of the update (``train.max_staleness``), on
the demo: same prompts, seed and steps.

Runs the demo config with vLLM three times, each in its own process: synchronous (the
colocated engine and the update take turns on every core), then ``max_staleness`` 1 and 2
(the rollout worker's engine on the upper half of the cores, the trainer on the rest).
Prints per run, over the steps after the first (warm-up): completions per second, the
median step, how long the trainer waited for its batch and the engine for work, and each
phase's time. Then a projection, labelled as one, of the same ratio where the engine and
the trainer each have their own accelerator: from this run's phases, and from veRL's
published synchronous split.

    .venv/bin/python scripts/bench_async.py [--steps 8] [--json] [overrides...]

Say which CPU a number came from (``lscpu``): on 2 cores both phases are compute-bound,
and the asynchronous runs give each phase half the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROWS = "train.trl.per_device_train_batch_size"


def train(out: Path, steps: int, staleness: int, overrides: list[str]) -> list[dict]:
    args = ["train", "generation.backend=vllm", f"train.trl.max_steps={steps}", "train.trl.save_steps=100000",
            f"train.max_staleness={staleness}", f"output.dir={out}", *overrides]
    code = "import sys; from grpo_code.cli import main; sys.argv[0] = 'grpo-code'; main()"
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"bench_async: the run with max_staleness={staleness} failed:\n{result.stderr[-3000:]}")
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def summarize(rows: list[dict], staleness: int, batch: int) -> dict[str, float]:
    steps = [r for r in rows if "timing/step_s" in r]
    measured = steps[1:] or steps
    step_s = [r["timing/step_s"] for r in measured]
    wait = [r.get("timing/reward_wait_s", 0.0) for r in measured]
    if staleness == 0:
        trainer_idle = [r["timing/generate_s"] + w for r, w in zip(measured, wait)]
        engine_idle = [r["timing/step_s"] - r["timing/generate_s"] for r in measured]
    else:
        trainer_idle = [r["async/trainer_idle_s"] + w for r, w in zip(measured, wait)]
        engine_idle = [r["async/engine_idle_s"] for r in measured]
    update = [s - t for s, t in zip(step_s, trainer_idle)]
    return {
        "max_staleness": staleness,
        "steps_measured": len(measured),
        "completions_per_s": batch * len(measured) / sum(step_s),
        "median_step_s": statistics.median(step_s),
        "trainer_idle_s": statistics.mean(trainer_idle),
        "engine_idle_s": statistics.mean(engine_idle),
        "generate_s": statistics.mean(r["timing/generate_s"] for r in measured),
        "update_s": statistics.mean(update),
        "staleness_mean": statistics.mean(r.get("async/staleness", 0.0) for r in measured),
        "weight_push_s": statistics.mean(r.get("async/weight_push_s", 0.0) for r in measured),
        "reward": statistics.mean(r["reward"] for r in steps),
    }


def projection(generate_s: float, update_s: float) -> dict[str, float]:
    """Engine and trainer on accelerators of their own, each phase at its synchronous speed:
    the synchronous step is their sum, one ahead of the update overlaps them."""
    sync = generate_s + update_s
    ahead = max(generate_s, update_s)
    return {"sync_step_s": sync, "ahead_step_s": ahead, "speedup": sync / ahead}


VERL_SPLIT = {"generate_s": 357.0, "old_logprobs_s": 108.0, "update_s": 270.0, "step_s": 790.0}
"""veRL's published synchronous step at 32 GPUs (seconds): generation, old log-probs, update, whole step."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. generation.max_new_tokens=96")
    args = parser.parse_args()
    from grpo_code.config import load_config

    batch = int(load_config(None, args.overrides).train.trl.get(ROWS.split(".")[-1], 8))
    runs = []
    with tempfile.TemporaryDirectory(prefix="grpo-code-bench-async-") as tmp:
        for staleness in (0, 1, 2):
            print(f"bench_async: max_staleness={staleness}, {args.steps} steps ...", file=sys.stderr, flush=True)
            rows = train(Path(tmp) / f"s{staleness}", args.steps, staleness, args.overrides)
            runs.append(summarize(rows, staleness, batch))
    sync = runs[0]
    for run in runs:
        run["throughput_vs_sync"] = run["completions_per_s"] / sync["completions_per_s"]
    measured = projection(sync["generate_s"], sync["update_s"])
    verl = projection(VERL_SPLIT["generate_s"], VERL_SPLIT["old_logprobs_s"] + VERL_SPLIT["update_s"])
    report = {"cores": len(os.sched_getaffinity(0)), "runs": runs,
              "projection_from_this_run": measured, "projection_from_verl_split": verl}
    if args.json:
        print(json.dumps(report))
        return
    print(f"demo on {report['cores']} CPU cores, vLLM, steps after the first")
    keys = ("completions_per_s", "throughput_vs_sync", "median_step_s", "trainer_idle_s", "engine_idle_s",
            "generate_s", "update_s", "staleness_mean", "weight_push_s", "reward")
    print(f"{'max_staleness':<20}" + "".join(f"{r['max_staleness']:>10}" for r in runs))
    for key in keys:
        print(f"{key:<20}" + "".join(f"{r[key]:>10.3f}" for r in runs))
    print("PROJECTION (not measured): engine and trainer each on an accelerator of its own")
    print(f"  from this run's synchronous phases: {measured['sync_step_s']:.1f} s a step -> "
          f"{measured['ahead_step_s']:.1f} s ahead of the update ({measured['speedup']:.2f}x)")
    print(f"  from veRL's published split (357 s generation, 108 s old log-probs, 270 s update): "
          f"{verl['sync_step_s']:.0f} s -> {verl['ahead_step_s']:.0f} s ({verl['speedup']:.2f}x)")


if __name__ == "__main__":
    main()
