"""``grpo-code tasks audit`` against its anchors: HumanEval's base tests against HumanEval+,
MBPP's against MBPP+, and the time of a HumanEval+ audit.

    python scripts/bench_audit.py                       # HumanEval vs HumanEval+ (docker)
    python scripts/bench_audit.py --pairs all --json out.json
    python scripts/bench_audit.py --pairs mbpp --backend local --mutants 10

For each pair (base, plus) it audits the base suite with the plus suite as ``--stronger``
(a base survivor that plus rejects is a solution the base tests pass and HumanEval+
rejects), then the plus suite alone, timed, each with an empty audit cache (the reference
oracle's expected values come from their own cache, as in any later run). It prints, per
pair: the audits' time and programs run per second; hackable tasks; the mutation score's
distribution on each; the tasks whose base score is lower than their plus score; and the
overlap between the tasks the base audit flags (weak) and those where plus rejects a base
survivor. Data is read by path from ``../shared/benchmarks`` (``--data``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grpo_code.config import SandboxConfig  # noqa: E402
from grpo_code.sandbox import Sandbox  # noqa: E402
from grpo_code.tasks import load_suite  # noqa: E402
from grpo_code.verify import oracle  # noqa: E402
from grpo_code.verify.audit import audit_suite  # noqa: E402
from grpo_code.verify.store import RewardCache  # noqa: E402

PAIRS = {
    "humaneval": ("humaneval:{data}/humaneval/HumanEval.jsonl.gz", "evalplus:{data}/evalplus/HumanEvalPlus.jsonl.gz"),
    "mbpp": ("evalplus:{data}/evalplus/MbppPlus.jsonl.gz@base", "evalplus:{data}/evalplus/MbppPlus.jsonl.gz"),
    # HumanEval+'s own base tests: the same references (so the same mutants) as the plus suite
    "humaneval-base": ("evalplus:{data}/evalplus/HumanEvalPlus.jsonl.gz@base",
                       "evalplus:{data}/evalplus/HumanEvalPlus.jsonl.gz"),
}


def _load(ref: str):
    if ref.endswith("@base"):  # an evalplus file's base tests: the adapter's base group
        from grpo_code.tasks.adapters import convert
        from grpo_code.tasks.suite import suite_from_records

        path = ref.removeprefix("evalplus:").removesuffix("@base")
        return suite_from_records(Path(path).name.split(".")[0] + "-base", convert("evalplus", path, tests="base"),
                                  path)
    return load_suite(ref, [])


def run_pair(name: str, data: Path, sandbox: Sandbox, mutants: int, log) -> dict:
    base_ref, plus_ref = (r.format(data=data) for r in PAIRS[name])
    base, plus = _load(base_ref), _load(plus_ref)
    out: dict = {"pair": name, "tasks": len(base)}
    t0 = time.perf_counter()
    for suite in (base, plus):  # expected values from the references: computed once, then cached
        oracle.resolve(suite, sandbox)
    log(f"{name}: expected values ready in {time.perf_counter() - t0:.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        audited = audit_suite(base, sandbox, mutants=mutants, stronger=plus,
                              cache=RewardCache(path=Path(tmp) / "base.sqlite"))
        out["base_s"] = round(time.perf_counter() - t0, 1)
        log(f"{name} base audit: {audited.line()} ({out['base_s']} s)")
        t0 = time.perf_counter()
        strong = audit_suite(plus, sandbox, mutants=mutants, cache=RewardCache(path=Path(tmp) / "plus.sqlite"))
        out["plus_s"] = round(time.perf_counter() - t0, 1)
        log(f"{name} plus audit: {strong.line()} ({out['plus_s']} s, {strong.programs} programs, "
            f"{strong.programs / out['plus_s']:.1f}/s)")
    base_s, plus_s = audited.summary(), strong.summary()
    scores = {t["task_id"]: t["score"] for t in base_s["per_task"]}
    plus_scores = {t["task_id"]: t["score"] for t in plus_s["per_task"]}
    both = [k for k in scores if scores[k] is not None and plus_scores.get(k) is not None]
    gaps = {t["task_id"] for t in base_s["per_task"]
            if any(v["verdict_in_stronger"] == "rejected" for v in t["survivors"])}
    flagged = set(base_s["weak"])
    out.update({
        "programs_plus": strong.programs, "programs_per_s_plus": round(strong.programs / out["plus_s"], 1),
        "hackable_base": base_s["hackable"], "hackable_plus": plus_s["hackable"],
        "score_base": base_s["mutation_score"], "score_plus": plus_s["mutation_score"],
        "lower_on_base": sum(1 for k in both if scores[k] < plus_scores[k]),
        "higher_on_base": sum(1 for k in both if scores[k] > plus_scores[k]),
        "plus_rejects_a_base_survivor": len(gaps),
        "flagged_by_base_audit": len(flagged),
        "overlap": len(gaps & flagged),
        "gaps_not_flagged": sorted(gaps - flagged)[:20],
    })
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path(os.environ.get(
        "GRPO_CODE_BENCHMARKS", Path(__file__).resolve().parent.parent.parent / "shared" / "benchmarks")))
    parser.add_argument("--backend", default="docker")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--mutants", type=int, default=20)
    parser.add_argument("--pairs", default="humaneval",
                        help="comma-separated: humaneval (HumanEval's own file against HumanEval+), humaneval-base "
                             "(HumanEval+'s base tests against all its tests: the same references), mbpp (MBPP+'s "
                             "base tests against all), or all")
    parser.add_argument("--json", type=Path, default=None, help="write the numbers here")
    args = parser.parse_args()
    pairs = list(PAIRS) if args.pairs == "all" else [p.strip() for p in args.pairs.split(",") if p.strip()]
    unknown = [p for p in pairs if p not in PAIRS]
    if unknown:
        parser.error(f"unknown pair {unknown[0]!r}: choose from {', '.join(PAIRS)} or all")
    results = []
    with Sandbox(SandboxConfig(backend=args.backend, workers=args.workers)) as sandbox:
        print(f"backend {sandbox.backend}, {sandbox.workers} workers, {os.cpu_count()} CPUs, mutants {args.mutants}")
        for name in pairs:
            result = run_pair(name, args.data, sandbox, args.mutants, print)
            results.append(result)
            print(json.dumps({k: v for k, v in result.items() if k not in ("hackable_base", "hackable_plus")}))
            print(f"{name}: the plus audit took {result['plus_s']} s ({result['programs_per_s_plus']} programs/s); "
                  f"hackable: base {len(result['hackable_base'])}, plus {len(result['hackable_plus'])}; "
                  f"base score lower than plus on {result['lower_on_base']} tasks (higher on "
                  f"{result['higher_on_base']}); plus rejects a base survivor on "
                  f"{result['plus_rejects_a_base_survivor']} tasks, {result['overlap']} of them flagged weak by the "
                  f"base audit ({result['flagged_by_base_audit']} flagged in all)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
