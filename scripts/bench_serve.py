"""The cost of HTTP: the same programs through `grpo-code sandbox serve`'s `/run_code` (as
veRL's client sends them) and through the in-process pool, in one run.

    .venv/bin/python scripts/bench_serve.py                       # docker pool, concurrency 1, 8, 64
    .venv/bin/python scripts/bench_serve.py --backend local --limit 40 --json

Programs: the HumanEval reference solutions as scripts (prompt + solution + the task's
test + `check(entry_point)`), which exit 0 when every assert holds, from the `shared/`
folder next to the repository; and a stdin/stdout set (each reference of a small
sum-of-a-line problem with its input). Every program is right, so a wrong verdict is any
answer but `Success` with the expected output.

For each concurrency: requests/s, p50 and p99 latency and wrong verdicts over HTTP (a
loopback client of that many threads against a server in this process), and the same jobs
through `Sandbox.submit` with as many in flight (the in-process baseline); the ratio is
HTTP's requests/s over in-process. Never imported by the package.
"""

from __future__ import annotations

import argparse
import gzip
import json
import socket
import statistics
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from grpo_code.config import SandboxConfig  # noqa: E402
from grpo_code.sandbox import Sandbox  # noqa: E402
from grpo_code.serve import fusion  # noqa: E402
from grpo_code.serve.app import ServeSettings, Service  # noqa: E402

HUMANEVAL = REPO.parent / "shared" / "benchmarks" / "humaneval" / "HumanEval.jsonl.gz"
SUM_LINE = "print(sum(int(x) for x in input().split()))\n"


def programs(limit: int | None) -> list[tuple[dict, str]]:
    """(request body, expected stdout) pairs."""
    out = []
    with gzip.open(HUMANEVAL, "rt") as f:
        for line in f:
            t = json.loads(line)
            code = t["prompt"] + t["canonical_solution"] + "\n" + t["test"] + f"\ncheck({t['entry_point']})\n"
            out.append(({"code": code, "language": "python", "run_timeout": 10}, ""))
    io = [({"code": SUM_LINE, "language": "python", "stdin": " ".join(map(str, range(i))) + "\n"},
           f"{sum(range(i))}\n") for i in range(1, 41)]
    both = out[:limit] + io[:limit] if limit else out + io
    return both


def right(answer: dict, expected: str) -> bool:
    run = answer.get("run_result") or {}
    return answer.get("status") == "Success" and run.get("stdout", "") == expected


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(call, items: list[tuple[dict, str]], concurrency: int) -> dict:
    latencies: list[float] = []
    wrong = 0
    lock = threading.Lock()

    def one(item: tuple[dict, str]) -> None:
        nonlocal wrong
        started = time.perf_counter()
        answer = call(item[0])
        took = time.perf_counter() - started
        with lock:
            latencies.append(took)
            wrong += not right(answer, item[1])

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(one, items))
    wall = time.perf_counter() - started
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
    return {"requests": len(items), "rps": round(len(items) / wall, 2), "p50_ms": round(q[49] * 1000, 1),
            "p99_ms": round(q[98] * 1000, 1), "wrong": wrong}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="docker", choices=["docker", "local", "ray"])
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--concurrency", default="1,8,64")
    parser.add_argument("--limit", type=int, default=None, help="first N HumanEval and N stdin programs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not HUMANEVAL.is_file():
        print(f"error: {HUMANEVAL} not found (the shared benchmarks folder)", file=sys.stderr)
        return 2
    import uvicorn

    items = programs(args.limit)
    report: dict = {"backend": args.backend, "programs": len(items), "runs": []}
    with Sandbox(SandboxConfig(backend=args.backend, workers=args.workers)) as sandbox:
        sandbox.start("python")
        port = free_port()
        service = Service(sandbox, ServeSettings(queue=10_000, log=lambda line: None))
        server = uvicorn.Server(uvicorn.Config(service.app(), host="127.0.0.1", port=port, log_level="warning",
                                               lifespan="off", access_log=False))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/run_code"

        def over_http(body: dict) -> dict:
            request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=300) as r:
                return json.loads(r.read())

        def in_process(body: dict) -> dict:
            run = fusion.parse(body)
            return fusion.response(run, sandbox.submit(run.job()).result())

        measure(in_process, items[:8], 4)  # warm both paths
        measure(over_http, items[:8], 4)
        for c in [int(x) for x in args.concurrency.split(",")]:
            local = measure(in_process, items, c)
            http = measure(over_http, items, c)
            report["runs"].append({"concurrency": c, "http": http, "in_process": local,
                                   "http_vs_in_process": round(http["rps"] / local["rps"], 3)})
            if not args.json:
                print(f"concurrency {c:>3}: http {http['rps']:>7} req/s p50 {http['p50_ms']} ms p99 "
                      f"{http['p99_ms']} ms wrong {http['wrong']} | in-process {local['rps']:>7} req/s p50 "
                      f"{local['p50_ms']} ms p99 {local['p99_ms']} ms wrong {local['wrong']} | ratio "
                      f"{report['runs'][-1]['http_vs_in_process']}", flush=True)
        server.should_exit = True
        thread.join(30)
    if args.json:
        print(json.dumps(report, indent=2))
    return 1 if any(r["http"]["wrong"] or r["in_process"]["wrong"] for r in report["runs"]) else 0


if __name__ == "__main__":
    sys.exit(main())
