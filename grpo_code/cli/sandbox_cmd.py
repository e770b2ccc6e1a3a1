"""``grpo-code sandbox``: build images, run jobs, check and benchmark the sandbox.

Thin commands over :mod:`grpo_code.sandbox`; everything heavy is imported inside them so
``grpo-code --help`` stays instant. Sandbox settings come from the run config's
``sandbox`` section (``--config`` plus dotted overrides such as ``sandbox.workers=4``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from grpo_code.cli.common import ConfigOpt, OverridesArg, command

app = typer.Typer(
    name="sandbox",
    help="Build images, run jobs, check and benchmark the sandbox.",
    no_args_is_help=True,
    add_completion=False,
)

BackendOpt = Annotated[
    str | None,
    typer.Option(
        "--backend", show_default=False,
        help="auto, docker, local, ray or http (overrides sandbox.backend; http talks to sandbox.url).",
    ),
]
WorkersOpt = Annotated[
    int | None,
    typer.Option("--workers", min=1, help="Jobs run at once (default: CPU cores).", show_default=False),
]


def _sandbox_config(
    config: Path | None, overrides: list[str] | None, backend: str | None = None, workers: int | None = None
) -> Any:
    from grpo_code.config import load_config

    extra = list(overrides or [])
    if backend is not None:
        extra.append(f"sandbox.backend={backend}")
    if workers is not None:
        extra.append(f"sandbox.workers={workers}")
    return load_config(config, extra).sandbox


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


@command(app, "build")
def build(
    lang: Annotated[
        str, typer.Option("--lang", help="Language image to build: python, javascript or cpp.")
    ] = "python",
    base_image: Annotated[
        str | None,
        typer.Option(
            "--base-image",
            help="Base image with python3 and the language's toolchain (python default: python:3.12-slim; "
            "javascript and cpp have no registry default, use --bootstrap).",
            show_default=False,
        ),
    ] = None,
    bootstrap: Annotated[
        bool,
        typer.Option(
            "--bootstrap", help="Build the base image from the host's Debian sources (no registry needed)."
        ),
    ] = False,
    tag: Annotated[
        str | None,
        typer.Option("--tag", help="Image name (default: the one the sandbox uses).", show_default=False),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Rebuild even when the image is up to date.")
    ] = False,
) -> None:
    """Build the sandbox image for a language (skipped when already up to date)."""
    from grpo_code.sandbox.image import build as build_image

    console = _stderr_console()
    with console.status("building the sandbox image") as status:

        def log(line: str) -> None:
            status.update(line)
            console.print(line, highlight=False)

        report = build_image(lang, base_image=base_image, bootstrap=bootstrap, tag=tag, force=force, log=log)
    typer.echo(report.image)


@command(app, "exec")
def exec_(
    job_file: Annotated[Path, typer.Argument(help="JSON file with one job or a list of jobs (- for stdin).")],
    backend: BackendOpt = None,
    workers: WorkersOpt = None,
    config: ConfigOpt = None,
    overrides: OverridesArg = None,
) -> None:
    """Run jobs from a JSON file and print their results as JSON."""
    from grpo_code.errors import MissingFileError
    from grpo_code.sandbox import Sandbox, load_jobs

    if str(job_file) == "-":
        text, source = sys.stdin.read(), "stdin"
    else:
        if not job_file.is_file():
            raise MissingFileError(f"job file {str(job_file)!r} not found", "check the path")
        text, source = job_file.read_text(), str(job_file)
    jobs = load_jobs(text, source)
    many = text.lstrip().startswith("[")
    cfg = _sandbox_config(config, overrides, backend, workers)
    with Sandbox(cfg) as sandbox:
        results = sandbox.run(jobs)
    payload = [r.to_dict() for r in results] if many else results[0].to_dict()
    typer.echo(json.dumps(payload, indent=2))


@command(app, "serve")
def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on (beyond loopback: --token-file).")] = (
        "127.0.0.1"),
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")] = 8080,
    backend: BackendOpt = None,
    workers: WorkersOpt = None,
    token_file: Annotated[
        Path | None,
        typer.Option("--token-file", help="File holding the bearer token clients must send (required off loopback).",
                     show_default=False),
    ] = None,
    queue: Annotated[int, typer.Option("--queue", min=1, help="Jobs accepted and not finished, at most (429 past it).")
                     ] = 256,
    max_body_mb: Annotated[int, typer.Option("--max-body-mb", min=1, help="Largest request body (413 past it).")] = 16,
    max_output_kb: Annotated[int, typer.Option(
        "--max-output-kb", min=1,
        help="stdout a /run_code program (and a record job) may print, at most; more is a Failed run "
             "(keeps each answer, and the server's memory, bounded).")] = 1024,
    config: ConfigOpt = None,
    overrides: OverridesArg = None,
) -> None:
    """Serve the sandbox over HTTP: SandboxFusion's /run_code and /v1/ping, our /v1/jobs, /metrics."""
    from grpo_code.serve import read_token
    from grpo_code.serve import serve as run_server

    token = read_token(host, token_file)
    cfg = _sandbox_config(config, overrides, backend, workers)
    # /run_code runs untrusted programs as record jobs: what they print must not fill the server
    cfg = dataclasses.replace(cfg, record_output_kb=min(cfg.record_output_kb, max_output_kb))
    run_server(cfg, host, port, token, queue, max_body_mb)


@command(app, "doctor")
def doctor(
    backend: BackendOpt = None,
    config: ConfigOpt = None,
    overrides: OverridesArg = None,
) -> None:
    """Report backend, engine, images and limits, and run a short self-test."""
    from rich.console import Console
    from rich.table import Table

    from grpo_code.errors import SandboxError
    from grpo_code.sandbox.doctor import diagnose

    cfg = _sandbox_config(config, overrides, backend)
    console = Console()
    with _stderr_console().status("running the sandbox self-test"):
        report = diagnose(cfg)
    console.print(f"backend      {report.backend or '-'} (configured: {cfg.backend})", highlight=False)
    console.print(
        f"engine       {('docker ' + report.engine) if report.engine else 'no Docker engine answers'}",
        highlight=False,
    )
    console.print(f"channel      {report.channel}", highlight=False)
    for lang, info in report.images.items():
        state = "up to date" if info["up_to_date"] else ("OUT OF DATE" if info["present"] else "MISSING")
        console.print(f"image        {lang}: {info['image']} ({state})", highlight=False)
    console.print("limits       " + ", ".join(f"{k}={v}" for k, v in report.limits.items()), highlight=False)
    if report.checks:
        table = Table("self-test", "expected", "got", "ms", "", title=None)
        for c in report.checks:
            mark = "[green]ok[/]" if c.ok else "[red]FAILED[/]"
            if c.note.startswith("not isolated"):
                mark = "[yellow]n/a[/]"
            table.add_row(c.name, c.expected, c.got, f"{c.ms:.0f}", f"{mark} {c.note}".strip())
        console.print(table)
    if report.error:
        raise SandboxError(
            report.error.split(" (")[0], "fix the problem above, then rerun `grpo-code sandbox doctor`"
        )
    if not report.ok:
        raise SandboxError(
            "the sandbox self-test failed", "see the table above; rerun with GRPO_CODE_DEBUG=1"
        )
    console.print("[green]sandbox OK[/]")


@command(app, "bench")
def bench(
    data: Annotated[
        Path | None,
        typer.Option(
            "--data", help="HumanEval.jsonl(.gz) (default: the shared copy when present).", show_default=False
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of a table.")
    ] = False,
    repeat: Annotated[
        int, typer.Option("--repeat", min=1, help="Runs per harness (medians are reported).")
    ] = 3,
    workers: WorkersOpt = None,
    docker_run_samples: Annotated[
        int,
        typer.Option(
            "--docker-run-samples", min=1, help="Samples for the slow docker-run-per-sample harness."
        ),
    ] = 16,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Only the first N problems.", show_default=False)
    ] = None,
    details: Annotated[bool, typer.Option("--details", help="With --json, add a `details` object.")] = False,
    backend: Annotated[
        str,
        typer.Option(
            "--backend",
            help="Backend of our pool: docker, local or ray (ray: --workers per actor, sandbox.ray.* overrides).",
        ),
    ] = "docker",
    config: ConfigOpt = None,
    overrides: OverridesArg = None,
) -> None:
    """Benchmark the docker pool against per-sample multiprocessing, docker run and fork on HumanEval."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from grpo_code.sandbox.bench import run_bench

    cfg = _sandbox_config(config, overrides, backend)
    columns = (TextColumn("{task.description:<34}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=_stderr_console(), transient=as_json) as progress:
        tasks: dict[str, Any] = {}

        def update(label: str, done: int, total: int) -> None:
            if label not in tasks:
                tasks[label] = progress.add_task(label, total=total)
            progress.update(tasks[label], completed=done)

        report = run_bench(data, repeat, workers, docker_run_samples, limit, cfg, update, cfg.backend)
    if as_json:
        if not details:
            report.pop("details")
        typer.echo(json.dumps(report))
        return
    _print_bench(report)


def _print_bench(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    d = report["details"]
    w = report["wrong_verdicts"]
    ours = report["ours_per_s"]
    table = Table(
        title=f"HumanEval references: {report['samples']} samples, {d['workers']} workers, "
        f"median of {d['repeat']} runs"
    )
    for col in ("harness", "samples/s", "ours / it", "wrong verdicts"):
        table.add_column(col, justify="right" if col != "harness" else "left")
    pool = {"docker": "warm docker pool", "local": "local pool (unisolated)", "ray": "Ray actors"}
    table.add_row(
        f"ours: {pool.get(report['backend'], report['backend'])}", f"{ours:.1f}", "1.00", str(w["ours"])
    )
    table.add_row(
        f"ours, {d['oversubscribed_workers']} jobs at once", f"{d['oversubscribed_per_s']:.1f}", "", ""
    )
    table.add_row(
        "(b) multiprocessing per sample", f"{d['mp_per_s']:.1f}", f"{report['ratio_vs_mp']:.2f}", str(w["mp"])
    )
    if d["docker_run_per_s"] is not None:
        table.add_row(
            f"(c) docker run per sample ({d['docker_run_samples']})",
            f"{d['docker_run_per_s']:.2f}",
            f"{report['ratio_vs_docker_run']:.1f}",
            str(w["docker_run"]),
        )
    table.add_row(
        "(d) bare fork per sample", f"{d['fork_per_s']:.1f}", f"{report['ratio_vs_fork']:.2f}", str(w["fork"])
    )
    console = Console()
    console.print(table)
    console.print(f"pool start-up (not in the rates): {d['pool_startup_s']} s", highlight=False)
    if d.get("ray_actors"):
        console.print(f"Ray actors: {', '.join(d['ray_actors'])}", highlight=False)
