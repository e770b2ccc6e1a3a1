"""Training forward and backward pass: the padded batch (TRL) against ours, cut by length.

Builds GRPO batches of the demo model on the demo suite's train prompts, rendered as
``grpo-code train`` renders them, G completions per prompt. Completions come from a
run's ``completions.jsonl`` (``--completions``, one batch per logged step, tokenized with
the model's tokenizer) or, without it, are random tokens with the lengths of the learning
check's first steps: most rows stop after their code at 20-60 tokens, ``--long`` rows a
batch run to the length limit. Each batch goes through the forward pass and the backward pass of a
summed log-prob loss, once padded and once with ``train.trim_padding``, and the script
prints the time of each, the tokens each computed, their ratio, and the largest
log-prob difference between the two.

    .venv/bin/python scripts/bench_trim_padding.py [--batches 3] [--rows 24] [--json]
    .venv/bin/python scripts/bench_trim_padding.py --completions runs/<run>/completions.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


def batches_from_run(path: Path, tokenizer, rows: int, limit: int, count: int) -> list[list[tuple[str, list[int]]]]:
    """(task id, completion token ids) per row, for the first ``count`` logged steps of a run."""
    steps: dict[int, list[tuple[str, list[int]]]] = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        tokens = tokenizer(rec["completion"], add_special_tokens=False)["input_ids"][:limit]
        steps.setdefault(rec["step"], []).append((rec["task_id"], tokens or [tokenizer.eos_token_id]))
    found = [b[:rows] for _, b in sorted(steps.items()) if len(b) >= rows]
    if not found:
        sys.exit(f"error: no step in {path} has {rows} completions; pass --rows to match the run")
    return found[:count]


def drawn_batches(task_ids: list[str], rows: int, group: int, limit: int, long: int, count: int,
                  seed: int, vocab: int) -> list[list[tuple[str, list[int]]]]:
    """Rows of random tokens with the lengths of the learning check's first steps."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        tasks = rng.sample(task_ids, rows // group)
        lengths = [rng.randint(20, 60) for _ in range(rows)]
        for row in rng.sample(range(rows), min(long, rows)):
            lengths[row] = limit
        out.append([(tasks[i // group], [rng.randrange(100, vocab) for _ in range(lengths[i])]) for i in range(rows)])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="configs/demo.yaml", help="training config (model, suite, length limit)")
    ap.add_argument("--batches", type=int, default=3, help="batches timed (each padded and trimmed)")
    ap.add_argument("--rows", type=int, default=24, help="completions a batch (the learning check's 6 prompts x 4)")
    ap.add_argument("--long", type=int, default=2, help="rows a drawn batch that run to the length limit")
    ap.add_argument("--completions", type=Path, help="take completion lengths from this run's completions.jsonl")
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast, as train.trl.bf16=true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT))
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.trainer import add_fused_lm_head

    from grpo_code.config import load_config
    from grpo_code.generation.base import prompt_text, resolve
    from grpo_code.tasks import load_suite
    from grpo_code.tasks.prompts import render
    from grpo_code.training.packing import length_chunks
    from grpo_code.training.trainer import GrpoCodeTrainer

    cfg = load_config(args.config, [])
    resolved = resolve(cfg.model.name)
    tokenizer = AutoTokenizer.from_pretrained(resolved.tokenizer_path)
    model = AutoModelForCausalLM.from_pretrained(resolved.path, dtype=torch.float32)
    temperature = cfg.generation.temperature
    add_fused_lm_head(model, temperature=temperature, outputs=("log_probs", "entropy"))
    model.train()
    suite = load_suite(cfg.tasks.suite, cfg.tasks.paths)
    system_prompt = cfg.tasks.system_prompt if cfg.tasks.system_prompt is not None else suite.system_prompt
    tasks = {t.id: t for t in suite.split(cfg.tasks.train_split).tasks}
    limit = cfg.generation.max_new_tokens
    group = cfg.train.trl.get("num_generations", 8)
    if args.completions:
        batches = batches_from_run(args.completions, tokenizer, args.rows, limit, args.batches)
    else:
        batches = drawn_batches(sorted(tasks), args.rows, group, limit, args.long, args.batches, args.seed,
                                tokenizer.vocab_size)

    trainer = object.__new__(GrpoCodeTrainer)  # only its forward pass is used
    trainer.accelerator = Accelerator(cpu=not torch.cuda.is_available(), mixed_precision="bf16" if args.bf16 else "no")
    model.to(trainer.accelerator.device)
    totals = {"padded": [0.0, 0], "trimmed": [0.0, 0]}
    worst = 0.0
    for batch in batches:
        prompts = [tokenizer(prompt_text(tokenizer, render(tasks[t], "chat", system_prompt,
                                                           suite.prompt_template)),
                             add_special_tokens=False)["input_ids"] for t, _ in batch]
        width_p, width_c = max(map(len, prompts)), max(len(c) for _, c in batch)
        ids = torch.full((len(batch), width_p + width_c), tokenizer.pad_token_id or 0, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, (p, (_, c)) in enumerate(zip(prompts, batch)):
            ids[i, width_p - len(p):width_p] = torch.tensor(p)
            ids[i, width_p:width_p + len(c)] = torch.tensor(c)
            mask[i, width_p - len(p):width_p + len(c)] = 1
        ids, mask = ids.to(model.device), mask.to(model.device)
        completion_mask = mask[:, width_p:].float()
        groups = length_chunks([len(p) for p in prompts], [len(c) for _, c in batch])
        computed = sum(len(g) * (max(len(prompts[r]) for r in g) + max(len(batch[r][1]) for r in g)) for g in groups)
        logps = {}
        for name, trim in (("padded", False), ("trimmed", True)):
            trainer.trim_padding = trim
            model.zero_grad(set_to_none=True)
            started = time.perf_counter()
            out, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, mask, width_c, compute_entropy=True)
            (out * completion_mask).sum().backward()
            totals[name][0] += time.perf_counter() - started
            totals[name][1] += computed if trim else ids.numel()
            logps[name] = (out * completion_mask).detach()
        worst = max(worst, float((logps["padded"] - logps["trimmed"]).abs().max()))

    result = {
        "batches": len(batches), "rows": args.rows, "source": str(args.completions or "drawn"),
        "padded_s": round(totals["padded"][0], 2), "trimmed_s": round(totals["trimmed"][0], 2),
        "speedup": round(totals["padded"][0] / totals["trimmed"][0], 2),
        "padded_tokens": totals["padded"][1], "trimmed_tokens": totals["trimmed"][1],
        "max_logp_diff": worst,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"{len(batches)} batches of {args.rows} rows ({result['source']}), forward + backward:")
    print(f"  padded  {result['padded_s']:7.2f} s   {result['padded_tokens']} tokens")
    print(f"  trimmed {result['trimmed_s']:7.2f} s   {result['trimmed_tokens']} tokens (groups cut to their widest row)")
    print(f"  speedup {result['speedup']:.2f}x   largest log-prob difference {worst:.2e}")


if __name__ == "__main__":
    main()
