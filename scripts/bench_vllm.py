"""vLLM vs transformers ``generate`` on the demo, in one run: generation speed and step time.

1. Generation: the same prompts (the demo suite's train tasks, rendered as training renders
   them), ``--samples`` completions each, sampled at the demo's temperature up to
   ``--max-new-tokens``, through ``HFGenerator`` (batched ``generate``; torch threads =
   the machine's cores) and ``VLLMGenerator`` (vLLM's CPU build on a CPU: its own thread
   binding), each in the dtype given. Prints generated tokens/s of each and the ratio.
2. Training: ``--steps`` steps of the demo config with ``generation.backend=hf`` and with
   ``vllm`` (colocated), same seed; per mode the mean step time, generation time, time
   blocked on rewards and summed sandbox time (the first step, warm-up, left out).

    .venv/bin/python scripts/bench_vllm.py [--samples 8] [--max-new-tokens 256] [--steps 4] [--json]

Run it on an otherwise idle machine: the numbers are CPU time shared with nothing else.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from grpo_code.config import load_config
from grpo_code.generation import load_generator
from grpo_code.generation.base import Sampling
from grpo_code.tasks import load_suite, render

STEP_KEYS = ("timing/step_s", "timing/generate_s", "timing/reward_wait_s", "timing/sandbox_busy_s")


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                flags = Path("/proc/cpuinfo").read_text()
                bf16 = "native bf16 (avx512_bf16)" if "avx512_bf16" in flags or "amx_bf16" in flags else "no native bf16"
                return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores, {bf16}"
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def generation(backend: str, dtype: str, prompts: list, sampling: Sampling) -> dict[str, float]:
    started = time.perf_counter()
    gen = load_generator(backend, "smollm2-135m-instruct", dtype=dtype, batch_size=len(prompts) * sampling.n)
    ready = time.perf_counter()
    texts = gen.generate(prompts, sampling)
    seconds = time.perf_counter() - ready
    tokens = sum(len(gen.tokenizer(t, add_special_tokens=False)["input_ids"]) for row in texts for t in row)
    close = getattr(gen, "close", None)
    if close is not None:
        close()  # vLLM's engine process goes with it
    del gen
    gc.collect()
    return {"tokens": tokens, "seconds": round(seconds, 2), "tokens_per_s": round(tokens / seconds, 1),
            "startup_s": round(ready - started, 1)}


def training(backend: str, steps: int, root: Path) -> dict[str, float]:
    from grpo_code.train import run_training

    out = root / backend
    cfg = load_config(None, [f"generation.backend={backend}", f"train.trl.max_steps={steps}",
                             "train.trl.save_steps=100000", f"output.dir={out}"])
    run_training(cfg, log=lambda m: print(m, file=sys.stderr))
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "timing/reward_wait_s" in r][1:] or rows[-1:]
    means = {k.split("/")[1]: round(sum(r[k] for r in rows) / len(rows), 3) for k in STEP_KEYS}
    busy = means["sandbox_busy_s"]
    means["wait_over_busy"] = round(means["reward_wait_s"] / busy, 4) if busy else 0.0
    means["steps_measured"] = len(rows)
    return means


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=8, help="completions per prompt")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--hf-dtype", default="float32", help="the demo trains in fp32")
    parser.add_argument("--vllm-dtype", default="bfloat16")
    parser.add_argument("--steps", type=int, default=4, help="training steps per backend (0: skip)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    cfg = load_config(None)
    tasks = load_suite(cfg.tasks.suite, cfg.tasks.paths).split(cfg.tasks.train_split).tasks[:8]
    prompts = [render(t, "chat", cfg.tasks.system_prompt) for t in tasks]
    sampling = Sampling(n=args.samples, temperature=cfg.generation.temperature, max_new_tokens=args.max_new_tokens)
    report: dict = {"cpu": cpu_name(), "prompts": len(prompts), "samples": args.samples,
                    "max_new_tokens": args.max_new_tokens}
    report["hf"] = {"dtype": args.hf_dtype, **generation("hf", args.hf_dtype, prompts, sampling)}
    report["vllm"] = {"dtype": args.vllm_dtype, **generation("vllm", args.vllm_dtype, prompts, sampling)}
    report["tokens_per_s_ratio"] = round(report["vllm"]["tokens_per_s"] / report["hf"]["tokens_per_s"], 2)
    if args.steps:
        with tempfile.TemporaryDirectory() as root:
            report["train_hf"] = training("hf", args.steps, Path(root))
            report["train_vllm"] = training("vllm", args.steps, Path(root))
        report["step_time_ratio"] = round(report["train_hf"]["step_s"] / report["train_vllm"]["step_s"], 2)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['cpu']}; {len(prompts)} prompts x {args.samples} samples, up to {args.max_new_tokens} tokens")
    for name in ("hf", "vllm"):
        r = report[name]
        print(f"  {name:5s} {r['dtype']:9s} {r['tokens_per_s']:8.1f} tokens/s ({r['tokens']} tokens in "
              f"{r['seconds']} s; start-up {r['startup_s']} s)")
    print(f"  vllm / hf: {report['tokens_per_s_ratio']}x tokens/s")
    for name in ("train_hf", "train_vllm"):
        if name in report:
            r = report[name]
            print(f"  {name:10s} step {r['step_s']:.1f} s, generate {r['generate_s']:.1f} s, reward wait "
                  f"{r['reward_wait_s']:.3f} s of {r['sandbox_busy_s']:.2f} s sandbox busy "
                  f"({100 * r['wait_over_busy']:.1f}%)")
    if "step_time_ratio" in report:
        print(f"  step time hf / vllm: {report['step_time_ratio']}x")


if __name__ == "__main__":
    main()
