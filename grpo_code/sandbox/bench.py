"""The sandbox benchmark (``grpo-code sandbox bench``): HumanEval references, four harnesses.

Every HumanEval reference solution (``prompt + canonical_solution`` against ``check``)
must pass. They run through (a) our warm docker pool, (b) an unisolated harness that
starts one ``multiprocessing.Process`` per sample, (c) one ``docker run --rm --network
none`` per sample (a subset: it is slow), (d) a bare ``os.fork()`` per sample, all with
the same number of concurrent workers (= CPU cores unless told). Our pool is also run
``repeat`` times with twice as many concurrent jobs as cores, counting wrong verdicts.
Throughputs are medians over ``repeat`` runs; the pool is warm before timing starts
(it is long-lived in training), its start-up time is reported separately. With
``backend="ray"`` (a) runs on the Ray actors instead (each with the same number of workers).
"""

from __future__ import annotations

import gzip
import json
import multiprocessing
import multiprocessing.connection
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from grpo_code import resources
from grpo_code.config import SandboxConfig
from grpo_code.errors import MissingFileError, SandboxError
from grpo_code.sandbox.types import Job, Limits, ScriptTest, Status

_CHECKOUT = resources.source_checkout()
SHARED_HUMANEVAL = (
    _CHECKOUT.parent / "shared" / "benchmarks" / "humaneval" / "HumanEval.jsonl.gz" if _CHECKOUT else None
)
"""The workspace's copy next to a source checkout (none for an installed wheel)."""

# progress(label, done, total): called as work completes (label changes per phase)
Progress = Callable[[str, int, int], None]


def _no_progress(label: str, done: int, total: int) -> None:
    pass


@dataclass(frozen=True)
class Sample:
    """One program to judge and the verdict a correct harness must give."""

    task_id: str
    program: str
    test: str
    should_pass: bool

    @property
    def source(self) -> str:
        """The whole sample as one script, for the naive harnesses."""
        return self.program + "\n" + self.test

    def job(self, timeout_s: float = 10.0) -> Job:
        return Job(program=self.program, tests=(ScriptTest(self.test),), limits=Limits(timeout_s=timeout_s))


def default_data() -> Path | None:
    env = os.environ.get("GRPO_CODE_HUMANEVAL")
    bench = os.environ.get("GRPO_CODE_BENCHMARKS")
    candidates = [Path(env)] if env else []
    if bench:
        candidates.append(Path(bench) / "humaneval" / "HumanEval.jsonl.gz")
    elif SHARED_HUMANEVAL is not None:
        candidates.append(SHARED_HUMANEVAL)
    for path in candidates:
        if path.is_file():
            return path
    return None


def load_humaneval(path: str | os.PathLike[str] | None = None, mismatched: bool = False) -> list[Sample]:
    """HumanEval reference solutions as samples; ``mismatched`` pairs each task's tests with
    the next task's solution (renamed to the expected entry point), which must fail."""
    p = Path(path) if path is not None else default_data()
    if p is None or not p.is_file():
        raise MissingFileError(
            f"HumanEval data not found ({path or SHARED_HUMANEVAL or 'no --data, GRPO_CODE_HUMANEVAL unset'})",
            "pass --data PATH to HumanEval.jsonl(.gz) or set GRPO_CODE_HUMANEVAL",
        )
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    samples = []
    for i, row in enumerate(rows):
        test = row["test"] + f"\ncheck({row['entry_point']})\n"
        if not mismatched:
            program = row["prompt"] + row["canonical_solution"]
            samples.append(Sample(row["task_id"], program, test, True))
        else:
            other = rows[(i + 1) % len(rows)]
            program = other["prompt"] + other["canonical_solution"]
            program += f"\n\n{row['entry_point']} = {other['entry_point']}\n"
            samples.append(Sample(row["task_id"], program, test, False))
    return samples


# --------------------------------------------------------------------------- harnesses


def run_ours(
    samples: list[Sample],
    config: SandboxConfig,
    progress: Progress = _no_progress,
    label: str = "ours",
    info: dict[str, Any] | None = None,
) -> tuple[float, int, float]:
    """Our pool: returns (samples/s, wrong verdicts, start-up seconds); ``info`` gets Ray's actors."""
    from grpo_code.sandbox.api import Sandbox

    with Sandbox(config, quiet=True) as sandbox:
        t0 = time.perf_counter()
        sandbox.start()
        startup = time.perf_counter() - t0
        if info is not None and sandbox.backend == "ray":
            info["ray_actors"] = sandbox.worker_names()
        start = time.perf_counter()
        futures = [sandbox.submit(s.job()) for s in samples]
        wrong = 0
        for i, (sample, fut) in enumerate(zip(samples, futures)):
            result = fut.result()
            if result.status is Status.INFRA_ERROR or (result.status is Status.PASS) != sample.should_pass:
                wrong += 1
            progress(label, i + 1, len(samples))
        elapsed = time.perf_counter() - start
    return len(samples) / elapsed, wrong, startup


def _exec_source(source: str) -> None:
    exec(compile(source, "<sample>", "exec"), {"__name__": "__main__"})


def _mp_target(source: str) -> None:
    _exec_source(source)


def run_mp(
    samples: list[Sample], workers: int, timeout_s: float = 10.0, progress: Progress = _no_progress
) -> tuple[float, int]:
    """One ``multiprocessing.Process`` (fork) per sample, ``workers`` at a time; exit 0 = pass."""
    ctx = multiprocessing.get_context("fork")
    pending = list(enumerate(samples))
    running: dict[Any, tuple[Any, Sample, float]] = {}
    wrong = done = 0
    start = time.perf_counter()
    while pending or running:
        while pending and len(running) < workers:
            _, sample = pending.pop(0)
            proc = ctx.Process(target=_mp_target, args=(sample.source,), daemon=True)
            proc.start()
            running[proc.sentinel] = (proc, sample, time.monotonic() + timeout_s)
        ready = multiprocessing.connection.wait(list(running), timeout=0.05)
        now = time.monotonic()
        for sentinel in list(running):
            proc, sample, deadline = running[sentinel]
            if sentinel not in ready and now < deadline:
                continue
            if sentinel not in ready:
                proc.kill()
            proc.join()
            del running[sentinel]
            if (proc.exitcode == 0) != sample.should_pass:
                wrong += 1
            done += 1
            progress("multiprocessing", done, len(samples))
    return len(samples) / (time.perf_counter() - start), wrong


def run_fork(
    samples: list[Sample], workers: int, timeout_s: float = 10.0, progress: Progress = _no_progress
) -> tuple[float, int]:
    """A bare ``os.fork()`` per sample, ``workers`` at a time; exit status 0 = pass."""
    pending = list(samples)
    running: dict[int, tuple[Sample, float]] = {}
    wrong = done = 0
    start = time.perf_counter()
    while pending or running:
        while pending and len(running) < workers:
            sample = pending.pop(0)
            pid = os.fork()
            if pid == 0:  # pragma: no cover - child
                code = 1
                try:
                    _exec_source(sample.source)
                    code = 0
                except BaseException:
                    pass
                os._exit(code)
            running[pid] = (sample, time.monotonic() + timeout_s)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            now = time.monotonic()
            for p, (_, deadline) in running.items():
                if now > deadline:
                    os.kill(p, 9)
            time.sleep(0.0002)
            continue
        if pid not in running:
            continue
        sample, _ = running.pop(pid)
        ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        if ok != sample.should_pass:
            wrong += 1
        done += 1
        progress("fork", done, len(samples))
    return len(samples) / (time.perf_counter() - start), wrong


def run_docker_run(
    samples: list[Sample],
    workers: int,
    image: str,
    timeout_s: float = 60.0,
    progress: Progress = _no_progress,
) -> tuple[float, int]:
    """One ``docker run --rm --network none`` per sample (program on stdin); exit 0 = pass."""
    done = [0]

    def one(sample: Sample) -> bool:
        argv = [
            "docker",
            "run",
            "--rm",
            "-i",
            "--network",
            "none",
            "--log-driver",
            "none",
            image,
            "python3",
            "-",
        ]
        try:
            out = subprocess.run(argv, input=sample.source.encode(), capture_output=True, timeout=timeout_s)
            ok = out.returncode == 0
        except subprocess.TimeoutExpired:
            ok = False
        done[0] += 1
        progress("docker run", done[0], len(samples))
        return ok

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        oks = list(pool.map(one, samples))
    elapsed = time.perf_counter() - start
    return len(samples) / elapsed, sum(1 for ok, s in zip(oks, samples) if ok != s.should_pass)


# --------------------------------------------------------------------------- the benchmark


def run_bench(
    data: str | os.PathLike[str] | None = None,
    repeat: int = 3,
    workers: int | None = None,
    docker_run_samples: int = 16,
    limit: int | None = None,
    config: SandboxConfig | None = None,
    progress: Progress = _no_progress,
    backend: str = "docker",
) -> dict[str, Any]:
    """Run the whole benchmark; returns the issue's JSON object plus a ``details`` entry.

    ``backend`` runs "ours" on another sandbox backend (``ray``: the actors of the configured
    cluster, ``sandbox.workers`` each); the baselines always run on this machine, and
    ``docker run`` (c) is skipped when this machine has no ready docker engine and image.
    """
    from grpo_code.sandbox import docker_backend
    from grpo_code.sandbox.image import default_image

    samples = load_humaneval(data)
    if limit:
        samples = samples[:limit]
    cores = os.cpu_count() or 1
    workers = workers or cores
    base = config or SandboxConfig()
    image = default_image(base)
    if backend == "docker":
        docker_backend.check_ready(image)
        docker_ok = True
    else:
        try:
            docker_backend.check_ready(image)
            docker_ok = True
        except SandboxError:
            docker_ok = False
    cfg = replace(base, backend=backend, workers=workers)
    over = replace(cfg, workers=2 * cores)
    info: dict[str, Any] = {}

    ours, mp, fork, startups = [], [], [], []
    wrong = {"ours": 0, "mp": 0, "docker_run": 0, "fork": 0}
    for r in range(repeat):
        rate, bad, startup = run_ours(samples, cfg, progress, f"ours (run {r + 1}/{repeat})", info)
        ours.append(rate)
        startups.append(startup)
        wrong["ours"] += bad
        rate, bad = run_mp(samples, workers, progress=progress)
        mp.append(rate)
        wrong["mp"] += bad
        rate, bad = run_fork(samples, workers, progress=progress)
        fork.append(rate)
        wrong["fork"] += bad
    over_rates = []
    for r in range(repeat):
        rate, bad, _ = run_ours(
            samples, over, progress, f"ours, {2 * cores} jobs at once (run {r + 1}/{repeat})"
        )
        over_rates.append(rate)
        wrong["ours"] += bad
    subset = samples[: max(1, min(docker_run_samples, len(samples)))]
    docker_rate: float | None = None
    if docker_ok:
        docker_rate, wrong["docker_run"] = run_docker_run(subset, workers, image, progress=progress)
    else:
        wrong.pop("docker_run")

    ours_rate = statistics.median(ours)
    mp_rate, fork_rate = statistics.median(mp), statistics.median(fork)
    if ours_rate <= 0 or mp_rate <= 0:
        raise SandboxError("benchmark measured no throughput", "rerun with GRPO_CODE_DEBUG=1")
    return {
        "backend": backend,
        "samples": len(samples),
        "ours_per_s": round(ours_rate, 1),
        "ratio_vs_mp": round(ours_rate / mp_rate, 2),
        "ratio_vs_docker_run": round(ours_rate / docker_rate, 1) if docker_rate else None,
        "ratio_vs_fork": round(ours_rate / fork_rate, 2),
        "wrong_verdicts": wrong,
        "details": {
            "workers": workers,
            **({"ray_actors": info["ray_actors"]} if "ray_actors" in info else {}),
            "cores": cores,
            "repeat": repeat,
            "mp_per_s": round(mp_rate, 1),
            "fork_per_s": round(fork_rate, 1),
            "docker_run_per_s": round(docker_rate, 2) if docker_rate else None,
            "docker_run_samples": len(subset),
            "oversubscribed_workers": 2 * cores,
            "oversubscribed_per_s": round(statistics.median(over_rates), 1),
            "pool_startup_s": round(statistics.median(startups), 2),
            "ours_runs_per_s": [round(x, 1) for x in ours],
            "mp_runs_per_s": [round(x, 1) for x in mp],
            "fork_runs_per_s": [round(x, 1) for x in fork],
        },
    }
