"""Does GRPO training make the demo model better? The demo's learning check, on CPU.

Three commands, each the one a user would run:

1. ``grpo-code eval MODEL --split all --n 4``  pass@1 of the untrained model on the demo
   suite's train tasks and, from the same eval, on its held-out test tasks (sampled at the
   training temperature),
2. ``grpo-code train CONFIG``                   GRPO on the train tasks,
3. ``grpo-code eval RUN/final ...``             the same eval of the trained model.

When the training config stops completions after their code (``train.stop_after_code``,
as the demo does), both evals do too (``--stop-after-code``): the model is measured as it
was trained, and the evals skip the prose after the code (``--whole-completions``: not).

It passes when pass@1 on the train tasks rises by at least ``--min-gain`` (default 0.05)
absolute and by more than twice the standard error of the evals' sampling. The train tasks
are fixed (they are the ones trained on), so the noise to beat is which samples each eval
drew: each task's share of correct samples is binomial (both evals sample a task with the
same seeds, so how hard a task is cancels out of the difference). The standard error over
the per-task differences, which also counts how unevenly the tasks improved (the noise on
other tasks like these), is reported beside it, and the held-out change (other tasks) is
reported with that one. The mean reward of the last epoch of training against the first
is reported too, paired by task (both epochs trained on the same tasks; with ``--steps``
not whole epochs, the first and last quarter of steps, over per-step means); the first
epoch already trains, so that difference understates the change and is not part of the
verdict.

    .venv/bin/python scripts/learning_check.py               # prints the curve and a verdict
    .venv/bin/python scripts/learning_check.py --json        # one JSON object on stdout
    .venv/bin/python scripts/learning_check.py --steps 42 train.trl.learning_rate=1e-5
    .venv/bin/python scripts/learning_check.py --config configs/demo-multiturn.yaml --steps 8 --n 4

A multi-turn config (``train.multi_turn.turns`` > 1) is evaluated with as many turns
(``grpo-code eval --turns``), and the report adds pass@1 after each turn, before and after.

``--precision auto`` (the default) trains with bf16 autocast (``train.trl.bf16=true``, fp32
weights) and evaluates in bf16 when the CPU multiplies bf16 natively (AVX512-BF16 or AMX,
as oneDNN reports) or on a GPU with bf16: on such a CPU a training step's forward and
backward pass take about half the time. Elsewhere it stays in fp32.

The run directory, both evals and ``learning_check.json`` land in ``--out`` (default
``runs/learning-check-<timestamp>``). Exit status 0 when the check passes, 1 when not.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from grpo_code.evaluate.summary import EvalSummary

ROOT = Path(__file__).resolve().parent.parent

# The demo config (constant learning rate, G=4, stop after the code) with 6 prompts a step
# instead of 2: 42 train tasks make 7 steps an epoch, and the reward test compares the
# first epoch with the last, so both see the same tasks and the comparison is not decided
# by which tasks the sampler drew. Three epochs at twice the demo's learning rate.
# The reward is the one pass@1 counts: 1 when every test passes, else 0
# (``all_or_nothing``; the demo gives the share of tests passed). With the share, hf
# training raised the reward by passing more of a task's tests, not all of them (one task
# 0 -> 0.8 of its tests, 0 -> 0 passing): pass@1 gained +0.024 to +0.036 in six of seven
# runs (+0.101 in one).
# An answer without a program and one cut at the length limit inside its program score
# -0.5, below a finished wrong one. With the cut alone penalised, the policy learnt to
# answer without code (0, the same as failing, and never cut: 27 of 240 answers after
# three epochs, none before); with neither penalised, it drifted to long answers that
# never closed their code (seed 1: mean length 64 -> 124 tokens, pass@1 -0.042), which a
# length penalty prevents in DAPO (docs/benchmarks.md).
# Later overrides win.
LEARNING = ["train.trl.per_device_train_batch_size=24", "train.trl.save_steps=1000", "train.trl.learning_rate=4e-5",
            "rewards.tests.mode=all_or_nothing", "rewards.tests.truncated=-0.5", "rewards.tests.no_code=-0.5"]
EPOCHS = 3


def run(cmd: list[str], log: Path, quiet: bool) -> float:
    """Run a grpo-code command, teeing its output to ``log``; returns its wall time."""
    started = time.monotonic()
    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
        assert proc.stdout is not None
        for line in proc.stdout:
            fh.write(line)
            if not quiet:
                sys.stderr.write(line)
        if proc.wait() != 0:
            sys.exit(f"error: {' '.join(cmd[2:5])}... exited {proc.returncode}; its output is in {log}")
    return time.monotonic() - started


def eval_summary(out: Path) -> EvalSummary:
    found = list(out.glob("*/summary.json"))
    if len(found) != 1:
        sys.exit(f"error: expected one summary.json under {out}, found {len(found)}")
    from grpo_code.evaluate.summary import EvalSummary, SummaryFormatError

    try:
        return EvalSummary.from_json(json.loads(found[0].read_text()))
    except (json.JSONDecodeError, SummaryFormatError) as exc:
        sys.exit(f"error: {found[0]}: {exc}")


def split_pass(summary: EvalSummary, ids: set[str]) -> dict:
    """pass@1 over the tasks ``ids`` of an eval's summary (the mean over tasks of each
    task's share of correct samples, as pass@1 from n samples is), with its standard error
    over those tasks."""
    got = [share for t, share in summary.shares().items() if t in ids]
    se = statistics.stdev(got) / math.sqrt(len(got)) if len(got) > 1 else 0.0
    return {"tasks": len(got), "pass_at_1": round(statistics.mean(got), 4) if got else 0.0, "se": round(se, 4)}


def reward_curve(run_dir: Path) -> list[float]:
    rewards = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if "reward" in rec and "step" in rec:
            rewards.append(float(rec["reward"]))
    return rewards


def paired_change(before: EvalSummary, after: EvalSummary, ids: set[str]) -> dict:
    """pass@1 after minus before over the tasks ``ids`` that both evals scored, with two
    standard errors.

    ``se``, the evals' sampling (the verdict uses it): the train tasks are fixed, they are
    the ones trained on, so what could move the change without the model changing is which
    samples each eval drew. A task's share of correct samples out of ``n`` has variance
    p(1 - p)/n, estimated without bias by p(1 - p)/(n - 1); the change's variance is the sum
    of both evals' terms over the tasks, over the number of tasks squared. Both evals draw
    a task's samples with the same seeds, which makes its two shares agree more than
    independent draws would, so this overstates the noise, never understates it.

    ``se_tasks``, over the per-task differences: it also counts how unevenly the tasks
    improved, the noise of the change on other tasks like these. The held-out change is
    measured with it."""
    first, last = before.shares(), after.shares()
    tasks = sorted(ids & first.keys() & last.keys())
    diffs = [last[t] - first[t] for t in tasks]

    def share_var(summary: EvalSummary, share: float, task: str) -> float:
        return share * (1 - share) / max(1, summary.per_task[task].n - 1)

    var = sum(share_var(before, first[t], t) + share_var(after, last[t], t) for t in tasks)
    se_tasks = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else 0.0
    return {"tasks": len(diffs), "change": round(statistics.mean(diffs), 4) if diffs else 0.0,
            "se": round(math.sqrt(var) / len(tasks) if tasks else 0.0, 4), "se_tasks": round(se_tasks, 4)}


def first_last_test(rewards: list[float], run_dir: Path, part: int | None = None) -> dict:
    """The last ``part`` steps vs the first ``part`` (default: a quarter of the steps each):
    the difference of their mean rewards and its noise.

    When both parts trained on the same tasks, once each (the default: each part is one
    epoch, the first and the last), the difference is the mean over tasks of (reward in the
    last part - reward in the first), and its standard error is taken over those per-task
    differences: how hard a task is cancels out of the difference, so it is left out of the
    noise too. Otherwise the per-step mean rewards are the samples, and which tasks each
    step drew counts as noise. Both errors are reported; ``noise`` says which one decided."""
    steps = len(rewards)
    q = max(1, min(part or steps // 4, steps // 2))
    first, last = rewards[:q], rewards[-q:]
    var = lambda xs: statistics.variance(xs) if len(xs) > 1 else 0.0  # noqa: E731
    se_steps = math.sqrt(var(first) / len(first) + var(last) / len(last))
    diff = statistics.mean(last) - statistics.mean(first)
    early: dict[str, list[float]] = defaultdict(list)  # task -> its rewards in the first part
    late: dict[str, list[float]] = defaultdict(list)
    seen: dict[str, set[int]] = defaultdict(set)  # task -> the steps (of both parts) that drew it
    for line in (run_dir / "completions.jsonl").read_text().splitlines():
        rec = json.loads(line)  # "step" counts from 0 here
        side = early if rec["step"] < q else late if rec["step"] >= steps - q else None
        if side is not None:
            rewards_of = side[rec["task_id"]]
            seen[rec["task_id"]].add(rec["step"])
            if rec["reward"] is not None:
                rewards_of.append(float(rec["reward"]))
    both = set(early) & set(late)
    paired = (both == set(early) == set(late) and len(both) > 1 and all(len(v) == 2 for v in seen.values())
              and all(early[t] and late[t] for t in both))
    se_tasks = None
    if paired:
        diffs = [statistics.mean(late[t]) - statistics.mean(early[t]) for t in both]
        se_tasks = statistics.stdev(diffs) / math.sqrt(len(diffs))
    se = se_tasks if se_tasks is not None else se_steps
    return {"first": round(statistics.mean(first), 4), "last": round(statistics.mean(last), 4),
            "diff": round(diff, 4), "se": round(se, 4), "noise": "tasks" if paired else "steps",
            "se_tasks": None if se_tasks is None else round(se_tasks, 4), "se_steps": round(se_steps, 4),
            "steps_per_part": q, "tasks": {"first": len(early), "last": len(late), "both": len(both)},
            "beyond_noise": bool(steps >= 2 * q and q >= 2 and diff > 2 * se)}


def epoch_steps(cfg, suite) -> int | None:
    """Steps in one pass over the train split (None when the prompts a step do not divide it)."""
    trl = cfg.train.trl
    rows = trl.get("per_device_train_batch_size", 8) * trl.get("gradient_accumulation_steps", 1)
    prompts = rows // trl.get("num_generations", 8)
    tasks = len(suite.split(cfg.tasks.train_split).tasks)
    return tasks // prompts if prompts and tasks % prompts == 0 else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("overrides", nargs="*", help="config overrides for training (key=value)")
    ap.add_argument("--config", default="configs/demo.yaml", help="training config (default: the demo)")
    ap.add_argument("--steps", type=int,
                    help=f"training steps (train.trl.max_steps); default: {EPOCHS} epochs")
    ap.add_argument("--n", type=int, default=4, help="samples per task in the evals (pass@1 from n)")
    # 48 rows generate a row in 0.70 s on 2 cores, 16 rows in 0.91 s (bf16, 128 tokens).
    ap.add_argument("--batch-size", type=int, default=48,
                    help="sequences per forward pass in the hf evals (vLLM gets every prompt at once)")
    ap.add_argument("--min-gain", type=float, default=0.05, help="required rise of pass@1, absolute")
    ap.add_argument("--whole-completions", action="store_true",
                    help="evals generate whole completions even when training stops after the code")
    ap.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto",
                    help="bf16: train with bf16 autocast and eval in bf16; auto: bf16 where it is native")
    ap.add_argument("--backend", choices=("auto", "hf", "vllm"), default="auto",
                    help="generation for training and evals; auto: vllm where it is installed, else hf")
    ap.add_argument("--out", type=Path, help="output directory (default: runs/learning-check-<timestamp>)")
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT))
    from grpo_code.config import load_config
    from grpo_code.generation.vllm import native_bf16

    bf16 = args.precision == "bf16" or (args.precision == "auto" and native_bf16())
    precision = ["train.trl.bf16=true"] if bf16 else []
    precision.append(f"generation.backend={args.backend}")  # auto: the config decides, as for the demo
    # What the check reads from the config (suite, sampling, model, prompts a step) does not
    # depend on max_steps, so one load serves both.
    cfg = load_config(args.config, [*LEARNING, *precision, *args.overrides])
    args.backend = cfg.generation.backend
    from grpo_code.tasks import load_suite

    suite = load_suite(cfg.tasks.suite, cfg.tasks.paths)
    epoch = epoch_steps(cfg, suite)
    if args.steps is None:
        if epoch is None:
            sys.exit("error: the prompts a step do not divide the train split; give --steps")
        args.steps = EPOCHS * epoch
    # The reward test compares the first epoch with the last when the steps are whole
    # epochs (two or more), else the first quarter of steps with the last.
    part = epoch if epoch and args.steps % epoch == 0 and args.steps >= 2 * epoch else None
    overrides = [*LEARNING, *precision, f"train.trl.max_steps={args.steps}", *args.overrides]
    out = (args.out or ROOT / "runs" / time.strftime("learning-check-%Y%m%d-%H%M%S")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    grpo = [sys.executable, "-m", "grpo_code"]
    say = (lambda m: print(m, file=sys.stderr)) if args.json else print
    env_note = f"{os.cpu_count()} cores, {'bf16' if bf16 else 'fp32'}, {args.backend} generation"

    # Evals end a completion where training does: once its program is whole.
    stop = cfg.train.stop_after_code and not args.whole_completions
    eval_stop = ["--stop-after-code"] if stop else []
    # A multi-turn config is measured with as many turns as it trains (pass@1 after each).
    turns = cfg.train.multi_turn.turns
    eval_stop += ["--turns", str(turns)] if turns > 1 else []

    held_out = cfg.tasks.eval_split
    split_ids = {name: {t.id for t in suite.split(name).tasks} for name in (cfg.tasks.train_split, held_out)}
    # vLLM gets every prompt of an eval at once (its scheduler batches them); hf generates
    # --batch-size sequences a forward pass.
    batch = args.batch_size if args.backend == "hf" else len(suite.tasks) * args.n

    def evaluate(model: str, dest: Path) -> tuple[EvalSummary, dict, dict, float]:
        """One eval of ``model`` on the train and the held-out tasks together (one model
        load, one vLLM start): its summary, pass@1 of each split, and the wall time."""
        secs = run([*grpo, "eval", model, "--config", args.config, "--tasks", cfg.tasks.suite, "--backend",
                    args.backend, "--split", "all", "--n", str(args.n), "--k", "1",
                    "--temperature", str(cfg.generation.temperature),
                    "--max-new-tokens", str(cfg.generation.max_new_tokens),
                    "--batch-size", str(batch), "--seed", "1234", "--out", str(dest),
                    f"model.dtype={'bfloat16' if bf16 else 'float32'}",
                    # Each sample its own generator whatever the config: before and after then
                    # draw the same noise for a sample (common random numbers for the pairing).
                    "generation.row_seeds=true", *eval_stop],
                   dest.with_suffix(".log"), args.json)
        summary = eval_summary(dest)
        return summary, split_pass(summary, split_ids[cfg.tasks.train_split]), split_pass(summary, split_ids[held_out]), secs

    started = time.monotonic()
    say(f"learning check in {out} ({env_note})")
    whole_before, before, before_test, before_s = evaluate(cfg.model.name, out / "eval-before")
    say(f"before: pass@1 {before['pass_at_1']:.3f}, held out ({held_out}) {before_test['pass_at_1']:.3f} "
        f"({before_s / 60:.1f} min)")
    run_dir = out / "run"
    train_s = run([*grpo, "train", args.config, *overrides, f"output.dir={run_dir}"], out / "train.log", args.json)
    rewards = reward_curve(run_dir)
    say(f"trained {len(rewards)} steps ({train_s / 60:.1f} min)")
    whole_after, after, after_test, after_s = evaluate(str(run_dir / "final"), out / "eval-after")
    say(f"after:  pass@1 {after['pass_at_1']:.3f}, held out {after_test['pass_at_1']:.3f} ({after_s / 60:.1f} min)")

    parts = first_last_test(rewards, run_dir, part)
    train_change = paired_change(whole_before, whole_after, split_ids[cfg.tasks.train_split])
    held_change = paired_change(whole_before, whole_after, split_ids[held_out])
    gain = train_change["change"]
    ci95 = lambda x: [round(max(0.0, x["pass_at_1"] - 1.96 * x["se"]), 4),  # noqa: E731
                      round(min(1.0, x["pass_at_1"] + 1.96 * x["se"]), 4)]
    report = {
        "steps": len(rewards),
        "reward_curve": [round(r, 4) for r in rewards],
        "reward": parts,
        "pass_at_1_before": before["pass_at_1"], "ci95_before": ci95(before),
        "pass_at_1_after": after["pass_at_1"], "ci95_after": ci95(after),
        "pass_at_1_gain": round(gain, 4), "se_gain": train_change["se"], "se_gain_tasks": train_change["se_tasks"],
        "se_before": before["se"], "se_after": after["se"],
        "held_out": {"split": held_out, "tasks": before_test["tasks"],
                     "pass_at_1_before": before_test["pass_at_1"], "se_before": before_test["se"],
                     "pass_at_1_after": after_test["pass_at_1"], "se_after": after_test["se"],
                     "change": held_change["change"], "se_change": held_change["se_tasks"]},
        # A multi-turn config: pass@1 after each turn, over the train and held-out tasks together.
        "pass_at_1_by_turn_before": list(whole_before.turns.pass_at_1) if whole_before.turns else None,
        "pass_at_1_by_turn_after": list(whole_after.turns.pass_at_1) if whole_after.turns else None,
        "turns_mean_before": whole_before.turns.mean_turns if whole_before.turns else None,
        "turns_mean_after": whole_after.turns.mean_turns if whole_after.turns else None,
        "backend": args.backend,
        "n": args.n, "tasks": before["tasks"], "precision": "bf16" if bf16 else "fp32",
        "evals_stop_after_code": stop,
        "minutes": {"eval_before": round(before_s / 60, 1), "train": round(train_s / 60, 1),
                    "eval_after": round(after_s / 60, 1),
                    "total": round((time.monotonic() - started) / 60, 1)},
        "passed": bool(gain >= args.min_gain and gain > 2 * train_change["se"]),
        "out": str(out),
    }
    (out / "learning_check.json").write_text(json.dumps(report, indent=2) + "\n")
    if args.json:
        print(json.dumps(report))
    else:
        print()
        print("reward per step:", " ".join(f"{r:.2f}" for r in rewards))
        noise = ("over the tasks both parts trained on" if parts["noise"] == "tasks"
                 else "over steps (the parts' tasks differ)")
        print(f"reward: first {parts['steps_per_part']} steps {parts['first']:.3f} -> last "
              f"{parts['steps_per_part']} {parts['last']:.3f} "
              f"(diff {parts['diff']:+.3f}, 2 x se {2 * parts['se']:.3f} {noise}; over steps "
              f"{2 * parts['se_steps']:.3f}; tasks in both parts: {parts['tasks']['both']} of "
              f"{parts['tasks']['first']})")
        print(f"pass@1 on {before['tasks']} train tasks (n={args.n}): {report['pass_at_1_before']:.3f} "
              f"(se {report['se_before']:.3f}) -> {report['pass_at_1_after']:.3f} (se {report['se_after']:.3f}) "
              f"({gain:+.3f} +- {train_change['se']:.3f} from the evals' sampling, +- {train_change['se_tasks']:.3f} "
              f"over the tasks' differences; need +{args.min_gain:.2f} and more than 2 x {train_change['se']:.3f})")
        h = report["held_out"]
        print(f"pass@1 on {h['tasks']} held-out {h['split']} tasks: {h['pass_at_1_before']:.3f} (se {h['se_before']:.3f})"
              f" -> {h['pass_at_1_after']:.3f} (se {h['se_after']:.3f}): change {h['change']:+.3f} +- {h['se_change']:.3f} "
              f"(paired over tasks)")
        if turns > 1:
            by_turn = [" -> ".join(f"{r:.3f}" for r in report[f"pass_at_1_by_turn_{when}"]) for when in ("before", "after")]
            print(f"pass@1 by turn (train and held-out tasks): before {by_turn[0]} (mean turns {report['turns_mean_before']}); "
                  f"after {by_turn[1]} (mean turns {report['turns_mean_after']})")
        print(f"minutes: {report['minutes']}")
        print("PASSED" if report["passed"] else "FAILED")
    sys.exit(0 if report["passed"] else 1)


if __name__ == "__main__":
    main()
