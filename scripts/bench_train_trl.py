"""A training step of grpo-code against a plain TRL script with a subprocess code reward.

What a user would otherwise write: ``trl.GRPOTrainer`` on the same model, prompts and
settings, generating with transformers ``generate``, and a reward function that runs each
completion's last Python block with the task's tests in a ``python3`` subprocess (two at a
time, no isolation) and returns the share of tests passed. Then ``grpo-code train`` on the
same model, prompts and settings (the demo config; ``--backend`` picks hf or vllm for ours).
Both run ``--steps`` steps one after the other, each in a process of its own; the first
step is left out (warm-up). Printed per run: median step time, median generation time per
step, mean completion length (tokens), the process's peak RSS (``VmHWM``: the model, the
optimizer, generation and, with vLLM colocated, its engine; sandbox containers and the
plain script's test processes are not in it), and the ratios TRL / ours.

    .venv/bin/python scripts/bench_train_trl.py [--steps 8] [--backend hf|vllm] [--json] [overrides...]

Design target (docs/training.md): our step at least 1.2x TRL's on the same backend, and our
generation per step no slower than TRL's plain ``generate`` on the same batch.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from grpo_code.config import load_config
from grpo_code.train import run_training

FENCE = re.compile(r"```(?:python|py)?\n(.*?)```", re.S)


def subprocess_reward(tests_by_task: dict[str, list[str]], timeout_s: float):  # noqa: ANN201
    """The code reward of a plain TRL script: each completion's last code block and the
    task's asserts in one ``python3`` process; the share of asserts that held."""

    def one(completion: Any, task_id: str) -> float:
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        blocks = FENCE.findall(text)
        if not blocks:
            return 0.0
        tests = tests_by_task[task_id]
        checks = "".join(f"try:\n    {t}\n    passed += 1\nexcept BaseException:\n    pass\n" for t in tests)
        program = f"{blocks[-1]}\npassed = 0\n{checks}print('PASSED', passed)\n"
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
            fh.write(program)
        try:
            out = subprocess.run([sys.executable, fh.name], capture_output=True, text=True, timeout=timeout_s)
            found = re.findall(r"PASSED (\d+)", out.stdout)
            return int(found[-1]) / len(tests) if found else 0.0
        except subprocess.TimeoutExpired:
            return 0.0
        finally:
            os.unlink(fh.name)

    def reward(prompts: list, completions: list, task_id: list[str], **kwargs: Any) -> list[float]:
        with ThreadPoolExecutor(max_workers=2) as pool:
            return list(pool.map(one, completions, task_id))

    return reward


def asserts(task: Any) -> list[str]:
    """The task's call tests as plain ``assert`` lines (what a user's script would hold)."""
    out = []
    for t in task.tests:
        if t.kind == "call":
            args = ", ".join(repr(a) for a in t.args)
            out.append(f"assert {t.fn}({args}) == {t.expected!r}")
        elif t.kind == "script":
            out.append(f"exec({t.code!r})")
    return out or ["assert False"]


def plain_trl(steps: int, cfg: Any, root: Path) -> dict[str, float]:
    """The plain TRL script; returns its per-step medians."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from grpo_code.generation.base import resolve
    from grpo_code.tasks import load_suite, render
    from grpo_code.train import grpo_args

    suite = load_suite(cfg.tasks.suite, cfg.tasks.paths)
    tasks = suite.split(cfg.tasks.train_split).tasks
    path = resolve(cfg.model.name).path
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    data = Dataset.from_list([{"prompt": render(t, "chat", suite.system_prompt, suite.prompt_template).for_trl(),
                               "task_id": t.id} for t in tasks])
    ours = grpo_args(cfg, root / "trl")  # the same TRL settings grpo-code passes
    settings = {k: getattr(ours, k) for k in ("learning_rate", "lr_scheduler_type", "num_generations",
                                              "per_device_train_batch_size", "gradient_accumulation_steps", "beta",
                                              "temperature", "top_p", "top_k", "max_completion_length", "seed",
                                              "use_cpu", "bf16")}
    args = GRPOConfig(output_dir=str(root / "trl"), max_steps=steps, logging_steps=1, save_strategy="no",
                      report_to="none", disable_tqdm=True, remove_unused_columns=False, **settings)
    generated: list[float] = []
    generate = model.generate

    def timed(*a: Any, **k: Any) -> Any:  # the measurement: how long TRL's generate call takes
        started = time.perf_counter()
        try:
            return generate(*a, **k)
        finally:
            generated.append(time.perf_counter() - started)

    model.generate = timed
    steps_s: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, *a: Any, **k: Any) -> None:
            self.t = time.perf_counter()

        def on_step_end(self, *a: Any, **k: Any) -> None:
            steps_s.append(time.perf_counter() - self.t)

    reward = subprocess_reward({t.id: asserts(t) for t in tasks}, cfg.sandbox.timeout_s)
    reward.__name__ = "subprocess_reward"
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=data,
                          processing_class=tokenizer, callbacks=[Timer()])
    trainer.train()
    lengths = [h["completions/mean_length"] for h in trainer.state.log_history if "completions/mean_length" in h]
    return {"step_s": statistics.median(steps_s[1:] or steps_s), "generate_s": statistics.median(generated[1:] or generated),
            "mean_length": statistics.mean(lengths[1:] or lengths), "steps": len(steps_s)}


def ours(steps: int, overrides: list[str], root: Path) -> dict[str, float]:
    out = root / "ours"
    cfg = load_config(None, [f"train.trl.max_steps={steps}", "train.trl.save_steps=100000",
                             f"output.dir={out}", *overrides])
    run_training(cfg, log=lambda m: print(m, file=sys.stderr))
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "timing/step_s" in r]
    measured = rows[1:] or rows
    return {"step_s": statistics.median(r["timing/step_s"] for r in measured),
            "generate_s": statistics.median(r["timing/generate_s"] for r in measured),
            "mean_length": statistics.mean(r["completions/mean_length"] for r in measured),
            "reward_wait_s": statistics.median(r["timing/reward_wait_s"] for r in measured),
            "sandbox_busy_s": statistics.median(r["timing/sandbox_busy_s"] for r in measured),
            "steps": len(rows)}


def peak_rss_gib() -> float:
    """This process's peak resident memory so far (the kernel's ``VmHWM``), GiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 2**20
    return float("nan")


def one_run(which: str, steps: int, backend: str, overrides: list[str]) -> dict[str, float]:
    """One of the two runs, in this process."""
    with tempfile.TemporaryDirectory(prefix="grpo-code-bench-") as tmp:
        root = Path(tmp)
        if which == "trl":
            out = plain_trl(steps, load_config(None, ["generation.backend=hf", *overrides]), root)
        else:
            out = ours(steps, [f"generation.backend={backend}", *overrides], root)
    return {**out, "peak_rss_gib": peak_rss_gib()}


def in_own_process(which: str, args: argparse.Namespace) -> dict[str, float]:
    command = [sys.executable, __file__, "--only", which, "--steps", str(args.steps), "--backend", args.backend,
               *args.overrides]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"error: the {which} run failed (exit {done.returncode}); its output is above")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--backend", choices=("hf", "vllm"), default="hf", help="our generation backend")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", choices=("trl", "ours"), help=argparse.SUPPRESS)  # one run, JSON on stdout
    parser.add_argument("overrides", nargs="*", help="config overrides for both runs, e.g. generation.max_new_tokens=128")
    args = parser.parse_args()
    if args.only:
        print(json.dumps(one_run(args.only, args.steps, args.backend, args.overrides)))
        return
    trl = in_own_process("trl", args)
    mine = in_own_process("ours", args)
    report = {"trl_hf": trl, f"ours_{args.backend}": mine,
              "step_speedup": trl["step_s"] / mine["step_s"], "generate_speedup": trl["generate_s"] / mine["generate_s"],
              "peak_rss_ratio": trl["peak_rss_gib"] / mine["peak_rss_gib"]}
    if args.json:
        print(json.dumps(report))
        return
    print(f"{'per step':<22}{'TRL (hf)':>12}{'ours (' + args.backend + ')':>14}")
    for key in ("step_s", "generate_s", "mean_length", "peak_rss_gib"):
        print(f"{key:<22}{trl[key]:>12.2f}{mine[key]:>14.2f}")
    print(f"step: ours {report['step_speedup']:.2f}x TRL's; generation {report['generate_speedup']:.2f}x; "
          f"peak memory: TRL's {report['peak_rss_ratio']:.2f}x ours")


if __name__ == "__main__":
    main()
