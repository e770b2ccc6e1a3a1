"""HumanEval+ and MBPP+ samples through `grpo-code eval --samples` and through evalplus's
own `evaluate`, in one run on this machine: wall times, their ratio, and pass/fail sample
by sample.

    .venv/bin/python scripts/bench_evalplus.py                         # both datasets, 5 samples a task
    .venv/bin/python scripts/bench_evalplus.py --dataset humaneval --per-task 3 --json

What it does:

1. A scratch venv (``~/.cache/grpo-code/evalplus-check/venv``) with ``evalplus==0.3.1``
   (``--no-deps``, and only what its ``evaluate`` imports), pointed at the shared release
   files (``HUMANEVAL_OVERRIDE_PATH``/``MBPP_OVERRIDE_PATH``: nothing is downloaded).
2. A samples file per dataset, made here from the release itself: each task's canonical
   solution (right) and up to ``--per-task - 1`` mutants of it (a comparison flipped, a
   constant moved by one, an arithmetic operator swapped, a return dropped: mostly wrong,
   some only on the plus inputs, a few still right). The same file goes to both tools.
3. Warm-up, not timed: ``grpo-code tasks check SUITE --solutions reference`` (the reference
   oracle's expected values, cached) and evalplus on the canonical solutions (its
   ground-truth cache).
4. Timed, one after the other, nothing else running: ``grpo-code eval --samples`` (docker
   backend, ``sandbox.workers`` = cores) and ``evalplus.evaluate`` with ``parallel`` =
   cores (its default is half).
5. Per sample: grpo-code's status against evalplus's ``base_status == plus_status ==
   "pass"``. Every sample where they differ is printed with both tools' reasons.

Exit status 1 when a sample's verdicts differ. Never imported by the package.
"""

from __future__ import annotations

import argparse
import ast
import copy
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "benchmarks" / "evalplus"
RELEASES = {"humaneval": SHARED / "HumanEvalPlus.jsonl.gz", "mbpp": SHARED / "MbppPlus.jsonl.gz"}
CACHE = Path(os.environ.get("GRPO_CODE_CACHE", Path.home() / ".cache" / "grpo-code"))
VENV = CACHE / "evalplus-check" / "venv"
GRPO = [sys.executable, "-c", "from grpo_code.cli import main; main()"]
EVALPLUS_DEPS = ["numpy>=1.19.5", "termcolor>=2.0.0", "tqdm>=4.56.0", "fire>=0.6.0", "psutil>=5.9.0",
                 "appdirs>=1.4.4", "tempdir>=0.7.1", "wget>=3.2", "rich>=12.3.0", "tree-sitter>=0.22.0",
                 "tree-sitter-python>=0.21.0", "datasets>=2.21.0"]

RUN_EVALPLUS = r'''
import os, sys
from evalplus.evaluate import evaluate
evaluate(dataset=sys.argv[1], samples=sys.argv[2], parallel=int(sys.argv[3]))
sys.stdout.flush(); sys.stderr.flush()
os._exit(0)  # its stuck-checker thread sleeps 20 s before the process may exit
'''


def evalplus_python() -> Path:
    python = VENV / "bin" / "python"
    if not python.exists():
        print(f"creating {VENV} (evalplus 0.3.1)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        pip = [str(VENV / "bin" / "pip"), "install", "-q", "--disable-pip-version-check"]
        subprocess.run(pip + ["--no-deps", "evalplus==0.3.1"], check=True)
        subprocess.run(pip + EVALPLUS_DEPS, check=True)
    return python


# --------------------------------------------------------------------------- samples


class _Mutator(ast.NodeTransformer):
    """Changes the ``target``-th node of one kind, counting in source order."""

    FLIP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In}
    SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult, ast.Mod: ast.FloorDiv}

    def __init__(self, kind: str, target: int):
        self.kind, self.target, self.seen = kind, target, -1

    def _hit(self) -> bool:
        self.seen += 1
        return self.seen == self.target

    def visit_Compare(self, node):
        self.generic_visit(node)
        if self.kind == "compare" and type(node.ops[0]) in self.FLIP and self._hit():
            node.ops[0] = self.FLIP[type(node.ops[0])]()
        return node

    def visit_Constant(self, node):
        if self.kind == "constant" and type(node.value) is int and self._hit():
            return ast.Constant(node.value + 1)
        return node

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if self.kind == "binop" and type(node.op) in self.SWAP and self._hit():
            node.op = self.SWAP[type(node.op)]()
        return node

    def visit_Return(self, node):
        self.generic_visit(node)
        if self.kind == "return" and node.value is not None and self._hit():
            return ast.Return(ast.Constant(None))
        return node


def mutants(source: str, limit: int) -> list[str]:
    """Up to ``limit`` distinct programs one edit away from ``source`` (deterministic)."""
    tree = ast.parse(source)
    out: list[str] = []
    seen = {ast.unparse(tree)}
    for target in range(6):
        for kind in ("compare", "constant", "binop", "return"):
            if len(out) >= limit:
                return out
            mutator = _Mutator(kind, target)
            changed = ast.unparse(mutator.visit(copy.deepcopy(tree)))
            if mutator.seen >= target and changed not in seen:
                seen.add(changed)
                out.append(changed + "\n")
    return out


def make_samples(dataset: str, per_task: int) -> list[dict]:
    samples = []
    with gzip.open(RELEASES[dataset], "rt") as f:
        for line in f:
            r = json.loads(line)
            right = r["prompt"] + r["canonical_solution"] if dataset == "humaneval" else r["canonical_solution"]
            samples.append({"task_id": r["task_id"], "solution": right})
            samples += [{"task_id": r["task_id"], "solution": m} for m in mutants(right, per_task - 1)]
    return samples


# --------------------------------------------------------------------------- the two tools


def timed(cmd: list[str], env: dict | None = None, cwd: Path | None = None) -> float:
    start = time.monotonic()
    done = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd[:6]))} ... failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.monotonic() - start


def evalplus_env(scratch: Path) -> dict:
    return {**os.environ, "HUMANEVAL_OVERRIDE_PATH": str(RELEASES["humaneval"]),
            "MBPP_OVERRIDE_PATH": str(RELEASES["mbpp"]), "XDG_CACHE_HOME": str(CACHE / "evalplus-check" / "xdg"),
            "TMPDIR": str(scratch)}


def run_evalplus(python: Path, dataset: str, samples: Path, workers: int, scratch: Path) -> tuple[float, dict]:
    results = Path(str(samples).replace(".jsonl", "_eval_results.json"))
    results.unlink(missing_ok=True)
    wall = timed([str(python), "-c", RUN_EVALPLUS, dataset, str(samples), str(workers)], evalplus_env(scratch))
    return wall, json.loads(results.read_text())["eval"]


def warm_ours(suite: Path) -> list[str]:
    """The reference oracle's expected values, computed and cached; the tasks it leaves out
    (their reference fails its own inputs: MBPP+'s Mbpp/255 runs out of memory)."""
    done = subprocess.run(GRPO + ["tasks", "check", str(suite), "--solutions", "reference", "--backend", "docker",
                                  "--json"], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        sys.exit(f"grpo-code tasks check failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return list(json.loads(done.stdout)["reference"]["failed"])


def run_ours(suite: Path, samples: Path, out: Path, workers: int) -> float:
    shutil.rmtree(out, ignore_errors=True)
    return timed(GRPO + ["eval", "--samples", str(samples), "--tasks", str(suite), "--split", "all", "--out",
                         str(out), "--sandbox", "docker", "--k", "1", f"sandbox.workers={workers}"])


def our_verdicts(out: Path) -> dict[tuple[str, int], dict]:
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    return {(r["task_id"], int(r["index"])): r for r in records}


KNOWN = {
    "HumanEval/32": "evalplus 0.3.1 fails every sample of find_zero: its special oracle `continue`s before it "
                    "records the input as passed, so the sample has fewer results than inputs",
}
"""Differences whose cause is known, with the reason (the other tool is wrong there)."""


def compare(samples: list[dict], ours: dict, theirs: dict, left_out: list[str]) -> tuple[int, list[dict]]:
    seen: dict[str, int] = {}
    agree, differ = 0, []
    for sample in samples:
        task_id = sample["task_id"]
        index = seen[task_id] = seen.get(task_id, -1) + 1
        if task_id in left_out:
            continue
        mine = ours[(task_id, index)]
        other = theirs[task_id][index]
        their_pass = other["base_status"] == "pass" and other["plus_status"] == "pass"
        if (mine["status"] == "pass") == their_pass:
            agree += 1
        else:
            differ.append({"task_id": task_id, "index": index, "grpo_code": mine["status"],
                           "known": KNOWN.get(task_id),
                           "why": str(mine.get("failure") or mine.get("error") or "")[:300],
                           "evalplus": [other["base_status"], other["plus_status"]],
                           "evalplus_failing_input": str((other.get("base_fail_tests") or [])[:1]
                                                         or (other.get("plus_fail_tests") or [])[:1])[:200]})
    return agree, differ


def bench(dataset: str, per_task: int, workers: int, scratch: Path, python: Path) -> dict:
    suite = scratch / f"{dataset}-plus"
    subprocess.run(GRPO + ["tasks", "convert", "evalplus", str(RELEASES[dataset]), str(suite)], check=True,
                   stdout=subprocess.DEVNULL)
    samples = make_samples(dataset, per_task)
    path = scratch / f"{dataset}_samples.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    # Warm-up: our oracle (cached), evalplus's ground truth (cached) on the canonical solutions.
    print(f"{dataset}: warming up (reference oracle, evalplus ground truth)", file=sys.stderr)
    left_out = warm_ours(suite)
    ours_path = scratch / f"{dataset}_samples_ours.jsonl"  # without the tasks the oracle left out
    ours_path.write_text("".join(json.dumps(s) + "\n" for s in samples if s["task_id"] not in left_out))
    canon = scratch / f"{dataset}_canonical.jsonl"
    firsts: dict[str, dict] = {}
    for s in samples:
        firsts.setdefault(s["task_id"], s)
    canon.write_text("".join(json.dumps(s) + "\n" for s in firsts.values()))
    run_evalplus(python, dataset, canon, workers, scratch)
    print(f"{dataset}: timing {len(samples)} samples, grpo-code then evalplus", file=sys.stderr)
    ours_s = run_ours(suite, ours_path, scratch / f"{dataset}-eval", workers)
    theirs_s, theirs = run_evalplus(python, dataset, path, workers, scratch)
    agree, differ = compare(samples, our_verdicts(scratch / f"{dataset}-eval"), theirs, left_out)
    passing = sum(1 for r in our_verdicts(scratch / f"{dataset}-eval").values() if r["status"] == "pass")
    return {"dataset": dataset, "samples": len(samples), "compared": agree + len(differ), "left_out": left_out,
            "passing": passing, "grpo_code_s": round(ours_s, 1), "evalplus_s": round(theirs_s, 1),
            "speedup": round(theirs_s / ours_s, 2), "agree": agree, "differ": differ}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=["humaneval", "mbpp", "both"], default="both")
    parser.add_argument("--per-task", type=int, default=5, help="samples per task: the canonical one and mutants")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="grpo-code sandbox.workers and evalplus --parallel (default: cores)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args()
    python = evalplus_python()
    datasets = ["humaneval", "mbpp"] if args.dataset == "both" else [args.dataset]
    reports = []
    with tempfile.TemporaryDirectory(prefix="bench-evalplus-") as tmp:
        for dataset in datasets:
            reports.append(bench(dataset, args.per_task, args.workers, Path(tmp), python))
    if args.json:
        print(json.dumps(reports, indent=2))
    else:
        for r in reports:
            print(f"{r['dataset']}+: {r['samples']} samples ({r['passing']} pass), workers {args.workers}: "
                  f"grpo-code {r['grpo_code_s']} s, evalplus {r['evalplus_s']} s, evalplus/grpo-code "
                  f"{r['speedup']}x; same pass/fail on {r['agree']}/{r['compared']}"
                  + (f" (left out, reference fails its own inputs: {', '.join(r['left_out'])})" if r["left_out"] else ""))
            for d in r["differ"]:
                print(f"  differ: {d['task_id']} #{d['index']}: grpo-code {d['grpo_code']} ({d['why']!r}), "
                      f"evalplus base/plus {d['evalplus']} (first failing input {d['evalplus_failing_input']})"
                      + (f"; known: {d['known']}" if d["known"] else ""))
    return 1 if any(not d["known"] for r in reports for d in r["differ"]) else 0


if __name__ == "__main__":
    sys.exit(main())
