"""Do sandbox verdicts change with machine load? `grpo-code tasks check` of public
benchmarks, run while CPU-bound containers compete with the sandbox for every core.

    .venv/bin/python scripts/bench_verdict_load.py                  # loaded only, 3 spinners per core
    .venv/bin/python scripts/bench_verdict_load.py --idle           # idle first, then loaded, for comparison
    .venv/bin/python scripts/bench_verdict_load.py --limit 20 --suites humaneval mbpp
    .venv/bin/python scripts/bench_verdict_load.py --idle --json > verdicts.json

What it measures: for each suite (default HumanEval 164, MBPP full 974, MBPP sanitized
427, read from the `shared/` folder next to the repository) and each condition (`idle`,
`loaded`), it runs exactly what a user runs, `grpo-code tasks check FORMAT:FILE --json`
(the project's CLI as a subprocess, docker backend), and reports: references
passed/checked and the failing ids, empty solutions failed/checked and the ids whose
empty solution passes a test ("broken"), flaky ids (only with `--repeat` > 1), sandbox
errors, the slowest slow tasks (at most 5; `tasks check` lists a task as slow when one
test takes over half its time limit) and the wall time. With `--idle`, ids whose
verdict differs between the idle and the loaded run are listed as "changed by load".

Load: `--load-per-core N` x the number of usable CPU cores of containers
(`docker run -d --rm --network none --label grpo-code.bench-load=1 IMAGE python3 -c
'while True: pass'`) spin beside the sandbox for the whole loaded phase. They are removed
at the end, also on Ctrl-C, SIGTERM or an error. The script only removes containers it
started (it labels them with its own run id too).

`--limit N` checks only the first N records of each benchmark file: a truncated copy is
written to a temporary directory (never into the repository) under the same file name,
so suite names and task ids are the same as in a full run.

Exit status: 0 when every reference passes and every empty solution fails under every
condition; 1 when a reference fails, an empty solution passes a test, or a task is flaky;
2 when a check could not be run at all (no engine, no image, the CLI gave no report).
Never imported by the package; standard library only.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOAD_LABEL = "grpo-code.bench-load"
SPIN = "while True: pass"

DEFAULT_SUITES = {
    # short name: (adapter format, path relative to the shared folder)
    "humaneval": ("humaneval", "benchmarks/humaneval/HumanEval.jsonl.gz"),
    "mbpp": ("mbpp", "benchmarks/mbpp/mbpp.jsonl"),
    "mbpp-sanitized": ("mbpp", "benchmarks/mbpp/sanitized-mbpp.json"),
}


class Unavailable(Exception):
    """Something the measurement needs is missing (engine, image, CLI, a benchmark file)."""


class Interrupted(Exception):
    """SIGTERM/SIGHUP turned into an exception so that `finally` blocks run."""


def _on_signal(signum, _frame):
    raise Interrupted(signal.Signals(signum).name)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def engine_ready() -> str:
    """The engine's server version; raises Unavailable with a reason when it does not answer."""
    if shutil.which("docker") is None:
        raise Unavailable("no docker CLI on PATH")
    try:
        out = docker("info", "--format", "{{.ServerVersion}}", timeout=30)
    except subprocess.TimeoutExpired:
        raise Unavailable("the docker engine did not answer `docker info` within 30 s") from None
    if out.returncode != 0 or not out.stdout.strip():
        raise Unavailable(f"the docker engine does not answer: {out.stderr.strip()[:300]}")
    return out.stdout.strip()


def image_ready(image: str) -> None:
    if docker("image", "inspect", image).returncode != 0:
        raise Unavailable(f"image {image} not found (bash scripts/setup.sh builds the sandbox images)")


class Load:
    """N CPU-spinning containers; `stop()` removes every one this object started."""

    def __init__(self, count: int, image: str):
        self.count = count
        self.image = image
        self.run_id = f"{os.getpid()}-{int(time.time())}"
        self.ids: list[str] = []

    def start(self) -> None:
        for _ in range(self.count):
            out = docker("run", "-d", "--rm", "--network", "none",
                         "--label", f"{LOAD_LABEL}=1", "--label", f"{LOAD_LABEL}.run={self.run_id}",
                         self.image, "python3", "-c", SPIN)
            if out.returncode != 0:
                raise RuntimeError(f"docker run of a load container failed: {out.stderr.strip()[:300]}")
            self.ids.append(out.stdout.strip())
        time.sleep(2)  # let the spinners reach full speed
        running = self.running()
        if running < self.count:
            raise RuntimeError(f"only {running} of {self.count} load containers are running")

    def running(self) -> int:
        out = docker("ps", "-q", "--filter", f"label={LOAD_LABEL}.run={self.run_id}")
        return len(out.stdout.split())

    def stop(self) -> None:
        # Ours by id, plus anything with our run label (a container started while a
        # signal arrived, before its id was recorded).
        out = docker("ps", "-aq", "--filter", f"label={LOAD_LABEL}.run={self.run_id}")
        ids = sorted(set(self.ids) | set(out.stdout.split()))
        if ids:
            docker("rm", "-f", *ids, timeout=120)
        self.ids = []


def grpo_code_bin(given: str | None) -> str:
    for cand in (given, str(REPO / ".venv" / "bin" / "grpo-code"), shutil.which("grpo-code")):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return cand
    raise Unavailable("grpo-code not found (run bash scripts/setup.sh, or give --grpo-code PATH)")


def resolve_suites(names: list[str], shared: Path) -> list[tuple[str, str, Path]]:
    """(label, format, file) for short names (humaneval, mbpp, mbpp-sanitized) or FORMAT:PATH."""
    out = []
    for name in names:
        if name in DEFAULT_SUITES:
            fmt, rel = DEFAULT_SUITES[name]
            path = shared / rel
        else:
            fmt, sep, rel = name.partition(":")
            if not sep:
                raise Unavailable(f"suite {name!r}: give one of {', '.join(DEFAULT_SUITES)} or FORMAT:PATH")
            path = Path(rel).expanduser()
            if not path.is_absolute() and not path.exists():
                path = shared / rel
        if not path.is_file():
            raise Unavailable(f"suite {name!r}: {path} not found (--shared DIR sets the shared folder)")
        out.append((name, fmt, path.resolve()))
    return out


def truncated_copy(path: Path, limit: int, tmp: Path) -> Path:
    """The first `limit` records of a .jsonl[.gz] or .json (list) file, same file name, under tmp."""
    gz = path.name.endswith(".gz")
    with (gzip.open if gz else open)(path, "rt", encoding="utf-8") as fh:
        text = fh.read()
    if text.lstrip().startswith("["):
        body = json.dumps(json.loads(text)[:limit])
    else:
        body = "\n".join([line for line in text.splitlines() if line.strip()][:limit]) + "\n"
    dst = tmp / f"{len(list(tmp.iterdir()))}" / path.name
    dst.parent.mkdir()
    with (gzip.open if gz else open)(dst, "wt", encoding="utf-8") as fh:
        fh.write(body)
    return dst


def run_check(cli: str, spec: str, args: argparse.Namespace) -> dict:
    cmd = [cli, "tasks", "check", spec, "--json", "--backend", "docker"]
    if args.workers:
        cmd += ["--workers", str(args.workers)]
    if args.repeat > 1:
        cmd += ["--repeat", str(args.repeat)]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        stdout, stderr = proc.communicate()
    except BaseException:
        # Let the CLI remove its own sandbox containers (it does so on SIGTERM), then go.
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise
    wall = time.perf_counter() - start
    report = None
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                report = json.loads(line)
                break
            except json.JSONDecodeError:
                pass
    return {"cmd": cmd, "rc": proc.returncode, "wall_s": round(wall, 1), "report": report,
            "stderr_tail": stderr.strip()[-1500:] if report is None else ""}


def summarize(label: str, condition: str, fmt: str, path: Path, res: dict, load: dict | None) -> dict:
    r = res["report"]
    row: dict = {"suite": label, "condition": condition, "source": f"{fmt}:{path}", "wall_s": res["wall_s"],
                 "rc": res["rc"], "load": load}
    if r is None:
        row["error"] = f"no report from grpo-code (exit {res['rc']}): {res['stderr_tail']}"
        return row
    ref, emp = r.get("reference", {}), r.get("empty", {})
    slow = sorted(r.get("slow", []), key=lambda x: -x["max_test_ms"])
    row.update({
        "name": r["suite"], "tasks": r["tasks"], "backend": r.get("backend"),
        "reference": {"passed": ref.get("passed"), "checked": ref.get("checked"),
                      "failed": ref.get("failed", []),
                      "missing": ref.get("missing", []), "infra_errors": ref.get("infra_errors", [])},
        "empty": {"failed": emp.get("failed"), "checked": emp.get("checked"), "broken": emp.get("broken", []),
                  "infra_errors": emp.get("infra_errors", [])},
        "flaky": sorted(set(ref.get("flaky", [])) | set(emp.get("flaky", []))),
        "slow_count": len(slow),
        "slowest": slow[:5],
    })
    return row


def bad(row: dict) -> bool:
    if "error" in row:
        return True
    return bool(row["reference"]["failed"] or row["empty"]["broken"] or row["flaky"])


def changes(rows: list[dict]) -> dict[str, dict]:
    """Per suite: ids whose reference failure / empty pass appears in only one condition."""
    out: dict[str, dict] = {}
    by = {(r["suite"], r["condition"]): r for r in rows if "error" not in r}
    for (suite, cond), idle in by.items():
        loaded = by.get((suite, "loaded"))
        if cond != "idle" or loaded is None:
            continue
        out[suite] = {
            "reference": sorted(set(idle["reference"]["failed"]) ^ set(loaded["reference"]["failed"])),
            "empty": sorted(set(idle["empty"]["broken"]) ^ set(loaded["empty"]["broken"])),
        }
    return out


def names(ids: list[str], n: int = 10) -> str:
    return ", ".join(ids[:n]) + (f" (+{len(ids) - n} more)" if len(ids) > n else "")


def print_row(row: dict) -> None:
    head = f"{row['suite']:15} {row['condition']:7}"
    if "error" in row:
        print(f"{head} ERROR {row['error']}")
        return
    ref, emp = row["reference"], row["empty"]
    print(f"{head} references {ref['passed']}/{ref['checked']} pass"
          f"   empties {emp['failed']}/{emp['checked']} fail"
          f"   wall {row['wall_s']:.1f} s")
    if ref["failed"]:
        print(f"{'':24}failed references: {names(ref['failed'])}")
    if emp["broken"]:
        print(f"{'':24}empty passes a test: {names(emp['broken'])}")
    if row["flaky"]:
        print(f"{'':24}flaky: {names(row['flaky'])}")
    infra = sorted(set(ref["infra_errors"]) | set(emp["infra_errors"]))
    if infra:
        print(f"{'':24}sandbox errors: {names(infra)}")
    if row["slowest"]:
        print(f"{'':24}slow ({row['slow_count']} over half the limit): "
              + ", ".join(f"{s['id']} {s['max_test_ms']:.0f} ms" for s in row["slowest"]))
    if row["load"]:
        ld = row["load"]
        print(f"{'':24}load: {ld['running_after']}/{ld['containers']} spinners running after, "
              f"loadavg {ld['loadavg_before']:.1f} -> {ld['loadavg_after']:.1f}")


def git_state() -> dict:
    def git(*a: str) -> str:
        out = subprocess.run(["git", *a], capture_output=True, text=True, cwd=REPO)
        return out.stdout.strip()

    return {"commit": git("rev-parse", "--short", "HEAD"),
            "sandbox_dirty": bool(git("status", "--porcelain", "--", "grpo_code/sandbox", "sandboxes"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("--load-per-core", type=int, default=3, metavar="N",
                        help="CPU-spinning containers per usable core (default 3; 0: no load)")
    parser.add_argument("--suites", nargs="+", default=list(DEFAULT_SUITES), metavar="SUITE",
                        help="humaneval, mbpp, mbpp-sanitized (default: all three) or FORMAT:PATH "
                             "(a relative PATH that does not exist is taken under --shared)")
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared", metavar="DIR",
                        help=f"folder holding benchmarks/ (default {REPO.parent / 'shared'})")
    parser.add_argument("--idle", action="store_true", help="run the same checks without load first")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="concurrent sandbox jobs (default: tasks check's, the CPU count)")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="runs of each solution per check, to find flaky tasks (default 1)")
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help="only the first N tasks of each suite (quick tries)")
    parser.add_argument("--image", default="grpo-code-sandbox-python:latest",
                        help="image of the load containers (default grpo-code-sandbox-python:latest)")
    parser.add_argument("--grpo-code", default=None, metavar="PATH",
                        help="the grpo-code executable (default .venv/bin/grpo-code, else PATH's)")
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    parser.add_argument("--json-out", type=Path, default=None, metavar="FILE",
                        help="also write the JSON object to FILE (with the text output on stdout)")
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be >= 1")
    if args.load_per_core < 0:
        parser.error("--load-per-core must be >= 0")

    try:
        cli = grpo_code_bin(args.grpo_code)
        suites = resolve_suites(args.suites, args.shared)
        server = engine_ready()
        image_ready(args.image)
    except Unavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cores = usable_cores()
    load = Load(args.load_per_core * cores, args.image)
    conditions = (["idle"] if args.idle else []) + ["loaded"]
    version = subprocess.run([cli, "--version"], capture_output=True, text=True).stdout.strip()
    meta = {"grpo_code": version, **git_state(), "docker": server, "cores": cores,
            "load_per_core": args.load_per_core, "load_containers": load.count, "image": args.image,
            "workers": args.workers, "repeat": args.repeat, "limit": args.limit}
    if not args.json:
        dirty = " (sandbox code modified)" if meta["sandbox_dirty"] else ""
        print(f"{version}, commit {meta['commit']}{dirty}, "
              f"docker {server}, {cores} cores, load {load.count} containers ({args.load_per_core}/core)"
              + (f", first {args.limit} tasks per suite" if args.limit else ""), flush=True)

    rows: list[dict] = []
    old = {s: signal.signal(s, _on_signal) for s in (signal.SIGTERM, signal.SIGHUP)}
    total_start = time.perf_counter()
    interrupted = None
    try:
        with tempfile.TemporaryDirectory(prefix="bench-verdict-load-") as tmp:
            files = {label: (fmt, truncated_copy(path, args.limit, Path(tmp)) if args.limit else path, path)
                     for label, fmt, path in suites}
            for condition in conditions:
                if condition == "loaded" and load.count:
                    load.start()
                for label, (fmt, path, orig) in files.items():
                    before = os.getloadavg()[0]
                    res = run_check(cli, f"{fmt}:{path}", args)
                    ld = None
                    if condition == "loaded":
                        ld = {"containers": load.count, "running_after": load.running() if load.count else 0,
                              "loadavg_before": round(before, 2),
                              "loadavg_after": round(os.getloadavg()[0], 2)}
                    row = summarize(label, condition, fmt, orig, res, ld)
                    rows.append(row)
                    if not args.json:
                        print_row(row)
                        sys.stdout.flush()
    except (KeyboardInterrupt, Interrupted) as exc:
        interrupted = type(exc).__name__ if isinstance(exc, KeyboardInterrupt) else str(exc)
    except RuntimeError as exc:  # the load could not be started
        rows.append({"suite": "-", "condition": "loaded", "error": str(exc)})
        if not args.json:
            print(f"error: {exc}", file=sys.stderr)
    finally:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)  # a second Ctrl-C must not skip the cleanup
        load.stop()
        for s, h in old.items():
            signal.signal(s, h)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    changed = changes(rows)
    ok = bool(rows) and not any(bad(r) for r in rows) and interrupted is None
    errors = any("error" in r for r in rows)
    result = {**meta, "runs": rows, "changed_by_load": changed,
              "total_wall_s": round(time.perf_counter() - total_start, 1), "interrupted": interrupted,
              "ok": ok}
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=1) + "\n")
    if args.json:
        print(json.dumps(result))
    else:
        for suite, ch in changed.items():
            if ch["reference"] or ch["empty"]:
                print(f"changed by load, {suite}: references {names(ch['reference']) or '-'}; "
                      f"empties {names(ch['empty']) or '-'}")
        print(f"total {result['total_wall_s']:.0f} s: "
              + ("interrupted (" + interrupted + ")" if interrupted else "OK" if ok else "FAILED"))
    if interrupted:
        return 130
    if any(bad(r) for r in rows if "error" not in r):
        return 1
    return 2 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
