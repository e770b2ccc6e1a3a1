"""The generative judge's cost per GRPO step: judging overlapped with generation vs after the
batch, and K = 1, 3, 5 votes, measured in one run.

Serves the judge model (default: the demo model, SmolLM2-135M-Instruct) with ``vllm serve``
on loopback, then runs a few training steps of the demo config (policy on the ``hf``
backend, so completions end one by one and their judgments can start while the rest of the
batch generates; same seed every run) with ``rewards.judge`` on (``blend: sum``, so every
answer is judged):

- ``off``: no judge (the step time without one);
- ``after``: ``rewards.judge.overlap=false``: every judgment starts once the batch's test
  verdicts are in;
- ``overlap``: judgments start as completions finish; with K = 1, 3 and 5 votes.

Per run, the means over the measured steps (the first is left out, warm-up) of the step
time, the time the step waited on the judge after its verdicts (``timing/judge_wait_s``),
the judge's busy time (summed request-to-verdict time of the step's judgments,
``timing/judge_busy_s``), requests, tokens, p50 latency and masked judgments; and
``wait_over_busy`` = wait / busy. Design target: at most 0.25 with overlap.

    .venv/bin/python scripts/bench_judge.py [--steps 4] [--votes 1,3,5] [--json] [--judge-model DIR] [overrides...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from pathlib import Path

from grpo_code import metric_names as M
from grpo_code.config import load_config
from grpo_code.generation.served import vllm_server
from grpo_code.models import resolve_model
from grpo_code.train import run_training

KEYS = {"step_s": M.STEP_S, "generate_s": M.GENERATE_S, "judge_wait_s": M.JUDGE_WAIT_S,
        "judge_busy_s": M.JUDGE_BUSY_S, "judge_calls": M.JUDGE_CALLS, "judge_tokens": M.JUDGE_TOKENS,
        "judge_latency_p50_s": M.JUDGE_LATENCY_P50_S, "masked_unparseable": M.judge_masked("unparseable"),
        "masked_timeout": M.judge_masked("timeout")}


def run(name: str, judge: list[str], steps: int, overrides: list[str], root: Path) -> dict[str, float]:
    out = root / name
    cfg = load_config(None, ["generation.backend=hf", f"train.trl.max_steps={steps}", "train.trl.save_steps=100000",
                             f"output.dir={out}", *judge, *overrides])
    with contextlib.redirect_stdout(sys.stderr):  # the progress lines; stdout is the report
        run_training(cfg, log=lambda m: print(m, file=sys.stderr))
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if M.REWARD in r][1:] or [r for r in rows if M.REWARD in r][-1:]
    means = {k: sum(r.get(m, 0.0) for r in rows) / len(rows) for k, m in KEYS.items()}
    means["wait_over_busy"] = means["judge_wait_s"] / means["judge_busy_s"] if means["judge_busy_s"] else 0.0
    means["steps_measured"] = len(rows)
    return means


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--votes", default="1,3,5", help="vote counts to time with overlap (comma-separated)")
    parser.add_argument("--judge-model", default=None, help="model directory to serve as the judge (default: the demo model)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. rewards.judge.max_tokens=128")
    args = parser.parse_args()
    model = args.judge_model or resolve_model("smollm2-135m-instruct")
    report: dict[str, dict[str, float]] = {}
    with vllm_server(model, "judge") as url, tempfile.TemporaryDirectory(prefix="grpo-code-bench-") as tmp:
        judge = ["rewards.judge.weight=0.2", f"rewards.judge.url={url}", "rewards.judge.model=judge",
                 "rewards.judge.blend=sum"]
        report["off"] = run("off", [], args.steps, args.overrides, Path(tmp))
        report["after"] = run("after", [*judge, "rewards.judge.overlap=false"], args.steps, args.overrides, Path(tmp))
        for k in (int(v) for v in args.votes.split(",")):
            report[f"overlap_k{k}"] = run(f"k{k}", [*judge, f"rewards.judge.votes={k}"], args.steps, args.overrides,
                                          Path(tmp))
    if args.json:
        print(json.dumps(report))
        return
    columns = list(report)
    print(f"{'per step (mean)':<22}" + "".join(f"{c:>14}" for c in columns))
    for key in [*KEYS, "wait_over_busy"]:
        print(f"{key:<22}" + "".join(f"{report[c][key]:>14.3f}" for c in columns))
    one = report.get("overlap_k1")
    if one:
        print(f"judge wait / judge busy with overlap (K=1): {one['wait_over_busy']:.3f} (target <= 0.25); "
              f"after the batch: {report['after']['wait_over_busy']:.3f}")


if __name__ == "__main__":
    main()
