"""Throughput of the sandbox per language: a suite's reference solutions, each a full job
(build + every test in a fresh process), through a warm pool.

    .venv/bin/python scripts/bench_languages.py --suite demo-cpp --workers 2 --rounds 8
    .venv/bin/python scripts/bench_languages.py --suite demo-js --workers 2 --rounds 4 --json
    .venv/bin/python scripts/bench_languages.py --humaneval-x DIR --workers 2 [--limit 40]

With ``--humaneval-x DIR`` (a folder holding HumanEval-X's ``humaneval_{python,cpp,go,java,
js,rust}.jsonl.gz``), every language's canonical solutions are judged twice in one run: by
the sandbox (``tasks convert humaneval`` + a warm pool) and by the language's own toolchain,
a fresh process per program with no isolation, on the program and test file HumanEval-X's
own harness writes (scripts/humaneval_x_native.py), in a container of the same image with
the same number of programs at once. The table gives programs per second for each and
their ratio (above 1: the sandbox judges faster than the bare toolchain).

Every reference must pass (a wrong verdict is counted and reported). The pool is started
and warmed with one job per worker before timing, as it is in training. Reported: samples
(jobs) per second, tests per second, the median and 90th percentile job latency and, for
the docker backend, the CPU time the containers used per sample (from their cgroups):
unlike the rates, that does not depend on what else the machine is doing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from grpo_code.config import SandboxConfig
from grpo_code.sandbox import Sandbox, Status
from grpo_code.tasks import load_suite


def container_cpu_s(names: list[str]) -> float | None:
    """CPU seconds used so far by these containers (cgroup v1 or v2), or None if unreadable."""
    total = 0.0
    for name in names:
        out = subprocess.run(["docker", "inspect", "-f", "{{.Id}}", name], capture_output=True, text=True)
        cid = out.stdout.strip()
        v1 = Path(f"/sys/fs/cgroup/cpuacct/docker/{cid}/cpuacct.usage")
        v2 = [Path(f"/sys/fs/cgroup/system.slice/docker-{cid}.scope/cpu.stat"), Path(f"/sys/fs/cgroup/docker/{cid}/cpu.stat")]
        if cid and v1.is_file():
            total += int(v1.read_text()) / 1e9
            continue
        stat = next((p for p in v2 if cid and p.is_file()), None)
        if stat is None:
            return None
        fields = dict(line.split() for line in stat.read_text().splitlines())
        total += int(fields["usage_usec"]) / 1e6
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--humaneval-x", type=Path, metavar="DIR",
                        help="HumanEval-X's six files: judge each language's references, and with its own toolchain")
    parser.add_argument("--languages", default="python,cpp,go,java,javascript,rust",
                        help="with --humaneval-x: which of its languages (default all six)")
    parser.add_argument("--limit", type=int, default=None, help="with --humaneval-x: the first N tasks of each file")
    parser.add_argument("--suite", default="demo-cpp", help="suite whose references are run (default demo-cpp)")
    parser.add_argument("--workers", type=int, default=2, help="concurrent jobs (default 2)")
    parser.add_argument("--rounds", type=int, default=8, help="times every reference is run (default 8)")
    parser.add_argument("--backend", default="docker", help="docker (default) or local")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.humaneval_x is not None:
        from humaneval_x_native import compare

        return compare(args.humaneval_x, args.languages.split(","), args.workers, args.limit, args.json)

    suite = load_suite(args.suite)
    jobs = [task.job(task.reference) for task in suite.tasks if task.reference] * args.rounds
    config = SandboxConfig(backend=args.backend, workers=args.workers)
    with Sandbox(config, quiet=True) as sandbox:
        sandbox.start(suite.language)
        sandbox.run(jobs[: args.workers])  # warm: first build and first fork of each worker
        names = sandbox.worker_names() if args.backend == "docker" else []
        cpu_before = container_cpu_s(names) if names else None
        start = time.perf_counter()
        futures = [sandbox.submit(job) for job in jobs]
        results = [f.result() for f in futures]
        elapsed = time.perf_counter() - start
        cpu_after = container_cpu_s(names) if cpu_before is not None else None
    latencies = sorted(r.duration_ms for r in results)
    tests = sum(r.total for r in results)
    wrong = sum(1 for r in results if r.status is not Status.PASS)
    report = {
        "suite": suite.name,
        "language": suite.language,
        "backend": args.backend,
        "workers": args.workers,
        "samples": len(jobs),
        "tests": tests,
        "seconds": round(elapsed, 2),
        "samples_per_s": round(len(jobs) / elapsed, 2),
        "tests_per_s": round(tests / elapsed, 1),
        "job_ms_median": round(statistics.median(latencies), 1),
        "job_ms_p90": round(latencies[int(0.9 * (len(latencies) - 1))], 1),
        "cpu_s_per_sample": round((cpu_after - cpu_before) / len(jobs), 3) if cpu_after is not None else None,
        "wrong_verdicts": wrong,
    }
    if args.json:
        print(json.dumps(report))
    else:
        for key, value in report.items():
            print(f"{key:16} {value}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
