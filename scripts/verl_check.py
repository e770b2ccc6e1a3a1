"""veRL's own SandboxFusion client, unchanged, against `grpo-code sandbox serve`: every
case's pass/fail must equal what `grpo-code tasks check --solutions` says of the same program.

    .venv/bin/python scripts/verl_check.py                    # 20 HumanEval tasks + the fixtures, docker
    .venv/bin/python scripts/verl_check.py --humaneval 164 --backend docker --json

What it does, all on loopback:

1. A scratch venv (``~/.cache/grpo-code/verl-check``) with ``verl==0.9.1 --no-deps`` and
   ``requests`` (all its ``sandbox_fusion`` module imports). The module's two files are
   loaded as they are from the installed package, without veRL's package ``__init__``
   (which imports torch and Ray).
2. Suites: the first ``--humaneval`` HumanEval tasks (``shared/`` next to the repository)
   and the stdin/stdout problems of the CodeContests and APPS fixtures
   (``tests/fixtures``), converted by ``grpo-code tasks convert``.
3. For each task two programs: its reference and a wrong one (a stub that returns
   ``None`` / prints nothing). ``grpo-code tasks check SUITE --solutions FILE --json``
   says pass or fail for each.
4. ``grpo-code sandbox serve`` on a free loopback port; in the scratch venv veRL's
   ``compute_score(url, semaphore, 1024, completion, test_cases)`` scores each program:
   HumanEval through ``assert_case`` (the task's test and ``check(entry_point)``), the
   contests through ``inputs``/``outputs``. A case passes when its score is 1.0.

Prints the counts per suite and every case where veRL and ``tasks check`` disagree; exit
status 1 when one does. A task whose tests allow more than exact output (any letter case,
a float tolerance: what its statement allows) can pass here and fail veRL's exact
comparison; such a case is listed as explained, not as a disagreement. Never imported by
the package.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HUMANEVAL = REPO.parent / "shared" / "benchmarks" / "humaneval" / "HumanEval.jsonl.gz"
VENV = Path(os.environ.get("GRPO_CODE_CACHE", Path.home() / ".cache" / "grpo-code")) / "verl-check"
GRPO = [sys.executable, "-c", "from grpo_code.cli import main; main()"]

CLIENT = r'''
import importlib.machinery, importlib.util, json, site, sys, threading, types
from pathlib import Path

root = next(Path(p) / "verl" for p in site.getsitepackages() if (Path(p) / "verl").is_dir())
for name in ("verl", "verl.utils", "verl.utils.reward_score"):  # packages without their __init__
    module = types.ModuleType(name)
    module.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
    sys.modules[name] = module
folder = root / "utils" / "reward_score" / "sandbox_fusion"
spec = importlib.util.spec_from_file_location("verl.utils.reward_score.sandbox_fusion", folder / "__init__.py",
                                              submodule_search_locations=[str(folder)])
fusion = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = fusion
spec.loader.exec_module(fusion)

url, cases = sys.argv[1], json.load(open(sys.argv[2]))
semaphore = threading.Semaphore(8)
out = []
for case in cases:
    score, meta = fusion.compute_score(url, semaphore, 1024, case["completion"], case["test_cases"])
    out.append({"id": case["id"], "score": score, "statuses": [m.get("status") for m in meta]})
print(json.dumps(out))
'''


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, text=True, capture_output=True, cwd=REPO, **kwargs)


def scratch_venv() -> Path:
    python = VENV / "bin" / "python"
    if not python.exists():
        run([sys.executable, "-m", "venv", str(VENV)])
    check = subprocess.run([str(python), "-c", "import requests, importlib.util as u; "
                            "assert u.find_spec('verl')"], capture_output=True)
    if check.returncode:
        run([str(python), "-m", "pip", "install", "-q", "--no-deps", "verl==0.9.1"])
        run([str(python), "-m", "pip", "install", "-q", "requests"])
    return python


def convert(fmt: str, source: Path, out: Path, limit: int | None = None) -> list[dict]:
    if limit is not None:
        with gzip.open(source, "rt") as f:
            lines = [line for _, line in zip(range(limit), f)]
        source = out.parent / f"{out.name}-{source.name}".replace(".gz", "")
        source.write_text("".join(lines))
    run([*GRPO, "tasks", "convert", fmt, str(source), str(out), "--skip-invalid"])
    return [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]


def wrong(task: dict) -> str:
    if task.get("entry_point"):
        return f"def {task['entry_point']}(*args, **kwargs):\n    return None\n"
    return "pass\n"


def cases_of(tasks: list[dict], kind: str) -> tuple[list[dict], dict[str, str]]:
    """veRL cases and the programs they hold (by case id)."""
    cases, programs = [], {}
    for t in tasks:
        if t.get("language", "python") != "python" or not t.get("reference"):
            continue
        if kind == "humaneval":
            script = [x for x in t["tests"] if x["kind"] == "script"]
            if not script:
                continue
            tests = {"inputs": [""], "outputs": [None],
                     "assert_case": ["\n".join(x["code"] for x in script) + "\n"]}
            prefix = t["prompt"] if t.get("mode") == "complete" else ""
        else:
            io = [x for x in t["tests"] if x["kind"] == "io" and x.get("stdout") is not None]
            if not io or len(io) != len(t["tests"]) or any(x.get("checker") for x in io):
                continue  # only plain stdin/stdout problems (a checker has no veRL counterpart)
            tests = {"inputs": [x["stdin"] for x in io], "outputs": [x["stdout"] for x in io]}
            prefix = ""
        for label, program in (("reference", t["reference"]), ("wrong", wrong(t))):
            whole = program if prefix and program.startswith(prefix) else prefix + program
            cid = f"{t['id']}#{label}"
            programs[cid] = whole
            cases.append({"id": cid, "completion": f"```python\n{whole}\n```", "test_cases": tests})
    return cases, programs


def check(suite: Path, programs: dict[str, str], label: str, work: Path) -> dict[str, bool]:
    chosen = {cid.split("#")[0]: p for cid, p in programs.items() if cid.endswith(f"#{label}")}
    samples = work / f"{suite.name}-{label}.jsonl"
    samples.write_text("".join(json.dumps({"task_id": t, "solution": p}) + "\n" for t, p in chosen.items()))
    done = subprocess.run([*GRPO, "tasks", "check", str(suite), "--solutions", str(samples), "--json"],
                          text=True, capture_output=True, cwd=REPO)
    report = json.loads(done.stdout)["file"]
    failed = set(report["failed"])
    return {f"{t}#{label}": t not in failed for t in chosen}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--humaneval", type=int, default=20, help="first N HumanEval tasks (0: none)")
    parser.add_argument("--backend", default="docker", choices=["docker", "local"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    python = scratch_venv()
    with tempfile.TemporaryDirectory(prefix="verl-check-") as tmp:
        work = Path(tmp)
        suites = {}
        if args.humaneval:
            suites["humaneval"] = ("humaneval", convert("humaneval", HUMANEVAL, work / "humaneval", args.humaneval))
        suites["codecontests"] = ("io", convert("codecontests", REPO / "tests/fixtures/codecontests.jsonl",
                                                work / "codecontests"))
        suites["apps"] = ("io", convert("apps", REPO / "tests/fixtures/apps.jsonl", work / "apps"))
        port = free_port()
        server = subprocess.Popen([*GRPO, "sandbox", "serve", "--port", str(port), "--backend", args.backend],
                                  cwd=REPO, stderr=subprocess.PIPE, text=True)
        report: dict = {"backend": args.backend, "suites": {}, "disagree": [], "explained": []}
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and "listening on" not in server.stderr.readline():
                pass
            for name, (kind, tasks) in suites.items():
                cases, programs = cases_of(tasks, kind)
                expected = {**check(work / name, programs, "reference", work),
                            **check(work / name, programs, "wrong", work)}
                (work / f"{name}-cases.json").write_text(json.dumps(cases))
                started = time.perf_counter()
                scored = json.loads(run([str(python), "-c", CLIENT, f"http://127.0.0.1:{port}/run_code",
                                         str(work / f"{name}-cases.json")]).stdout)
                took = time.perf_counter() - started
                agree = 0
                relaxed = {t["id"] for t in tasks if any(x.get("ignore_case") or x.get("float_tol") or
                                                          x.get("compare") == "tokens" for x in t["tests"])}
                for s in scored:
                    passed = s["score"] == 1.0
                    if passed == expected[s["id"]]:
                        agree += 1
                    elif s["id"].split("#")[0] in relaxed and expected[s["id"]]:
                        # veRL compares output exactly (but trailing newlines); the statement allows
                        # more (any letter case, a float tolerance): veRL's verdict is the wrong one.
                        report["explained"].append({"case": s["id"], "verl": s["statuses"],
                                                    "why": "veRL compares exactly; the task's tests allow "
                                                           "what the statement allows"})
                    else:
                        report["disagree"].append({"case": s["id"], "verl": s["statuses"],
                                                   "tasks_check_passed": expected[s["id"]]})
                report["suites"][name] = {"cases": len(scored), "agree": agree,
                                          "references_passed": sum(s["score"] == 1.0 for s in scored
                                                                   if s["id"].endswith("#reference")),
                                          "wrong_failed": sum(s["score"] < 1.0 for s in scored
                                                              if s["id"].endswith("#wrong")),
                                          "verl_seconds": round(took, 1)}
                if not args.json:
                    r = report["suites"][name]
                    print(f"{name}: {r['agree']}/{r['cases']} cases agree; references passed "
                          f"{r['references_passed']}, wrong programs failed {r['wrong_failed']} "
                          f"({r['verl_seconds']} s through veRL's client)", flush=True)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(120)
    if args.json:
        print(json.dumps(report, indent=2))
    for d in report["explained"]:
        print(f"differs, explained: {d}", file=sys.stderr)
    for d in report["disagree"]:
        print(f"disagree: {d}", file=sys.stderr)
    return 1 if report["disagree"] else 0


if __name__ == "__main__":
    sys.exit(main())
