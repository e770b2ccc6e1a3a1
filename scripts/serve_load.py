"""Load and faults against `grpo-code sandbox serve` (docker backend, loopback only).

    .venv/bin/python scripts/serve_load.py                  # 64 clients x 60 s, a docker kill at 20 s, then SIGTERM
    .venv/bin/python scripts/serve_load.py --clients 16 --seconds 20

Phase 1: ``--clients`` threads send `/run_code` requests for ``--seconds``: HumanEval
references (must be `Success`) and wrong programs (must be `Failed`), from the `shared/`
folder next to the repository. At a third of the time one of the server's containers is
killed with `docker kill`. Counted: answers by HTTP status, wrong verdicts (a right
program not `Success` or a wrong one `Success`, `SandboxError` aside), `SandboxError`
answers (allowed only for requests in flight on the killed container), and requests
without an answer. Phase 2: the same load for 10 s with SIGTERM sent to the server after
4 s: every request the server accepted must get its answer; refused connections after the
stop are counted apart. Exit status 1 on a wrong verdict, a 5xx, an accepted request
without an answer or more SandboxErrors than the pool has workers. Never imported by the package.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from grpo_code.sandbox import docker_backend  # noqa: E402

HUMANEVAL = REPO.parent / "shared" / "benchmarks" / "humaneval" / "HumanEval.jsonl.gz"
GRPO = [sys.executable, "-c", "from grpo_code.cli import main; main()"]


def programs() -> list[tuple[str, bool]]:
    out = []
    with gzip.open(HUMANEVAL, "rt") as f:
        for line in f:
            t = json.loads(line)
            test = "\n" + t["test"] + f"\ncheck({t['entry_point']})\n"
            out.append((t["prompt"] + t["canonical_solution"] + test, True))
            out.append((t["prompt"] + "    return None\n" + test, False))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load(port: int, clients: int, seconds: float, items: list[tuple[str, bool]], during=None) -> dict:
    counts: Counter = Counter()
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(k: int) -> None:
        i = k
        while time.monotonic() < stop:
            code, right = items[i % len(items)]
            i += clients
            body = json.dumps({"code": code, "language": "python", "run_timeout": 10})
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            try:
                conn.connect()
            except OSError:
                with lock:
                    counts["refused"] += 1
                time.sleep(0.05)
                continue
            try:
                conn.request("POST", "/run_code", body, {"Content-Type": "application/json"})
                response = conn.getresponse()
                payload = response.read()
            except (OSError, http.client.HTTPException):
                with lock:
                    counts["accepted_without_answer"] += 1
                continue
            finally:
                conn.close()
            with lock:
                counts[f"http_{response.status}"] += 1
                if response.status != 200:
                    continue
                status = json.loads(payload)["status"]
                if status == "SandboxError":
                    counts["sandbox_error"] += 1
                elif (status == "Success") != right:
                    counts["wrong_verdict"] += 1
                else:
                    counts["right_verdict"] += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    if during is not None:
        during()
    for t in threads:
        t.join()
    return dict(counts)


def start_server(port: int, workers: int | None) -> subprocess.Popen:
    extra = [f"sandbox.workers={workers}"] if workers else []
    server = subprocess.Popen([*GRPO, "sandbox", "serve", "--port", str(port), "--backend", "docker",
                               "--queue", "100000", *extra], cwd=REPO, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = server.stderr.readline()
        if "listening on" in line:
            threading.Thread(target=lambda: server.stderr.read(), daemon=True).start()  # keep the pipe drained
            return server
        if not line and server.poll() is not None:
            break
    raise SystemExit("the server did not start")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    items = programs()
    port = free_port()
    server = start_server(port, args.workers)
    killed: list[str] = []

    def kill_one() -> None:
        time.sleep(args.seconds / 3)
        mine = [name for name, owner in docker_backend.list_containers()
                if owner == docker_backend.owner_tag(server.pid)]
        if mine:
            subprocess.run(["docker", "kill", mine[0]], capture_output=True)
            killed.append(mine[0])

    started = time.monotonic()
    first = load(port, args.clients, args.seconds, items, kill_one)
    first_s = time.monotonic() - started
    answered = sum(v for k, v in first.items() if k.startswith("http_"))
    print(f"phase 1: {args.clients} clients, {first_s:.0f} s, {answered} answers ({answered / first_s:.1f}/s); "
          f"killed {killed or 'nothing'}: {first}", flush=True)

    def terminate() -> None:
        time.sleep(4)
        server.send_signal(signal.SIGTERM)

    second = load(port, args.clients, 10, items, terminate)
    code = server.wait(180)
    print(f"phase 2 (SIGTERM after 4 s): {second}; server exit status {code}", flush=True)
    workers = args.workers or len(__import__("os").sched_getaffinity(0))
    bad = (first.get("wrong_verdict", 0) + second.get("wrong_verdict", 0)
           + sum(v for k, v in {**first, **second}.items() if k.startswith("http_5"))
           + first.get("accepted_without_answer", 0) + second.get("accepted_without_answer", 0)
           + (first.get("sandbox_error", 0) > workers) + second.get("sandbox_error", 0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
