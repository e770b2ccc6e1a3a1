"""``grpo-code tasks audit``: shortcuts and mutants against a suite's tests (grpo_code/verify/audit.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from grpo_code.cli.audit_report import print_audit
from grpo_code.cli.common import OverridesArg, command
from grpo_code.cli.tasks_cmd import ConfigOpt, SuiteArg, _config, app


@command(app, "audit")
def audit(
    suite: SuiteArg,
    overrides: OverridesArg = None,
    mutants: Annotated[int, typer.Option(help="Mutants of each reference (0: none).")] = 20,
    shortcuts: Annotated[bool, typer.Option(help="Run the shortcuts (constants, exit 0, memorised examples...).")] = True,
    stronger: Annotated[str | None, typer.Option(
        help="A stronger suite of the same task ids (HumanEval+ for HumanEval): survivors it rejects are gaps in "
             "these tests, survivors of both likely equivalent.")] = None,
    min_score: Annotated[float, typer.Option(help="Mutation score under which a task is weak.")] = 0.8,
    split: Annotated[str | None, typer.Option(help="Only this split (name, id range A-B, or all).")] = None,
    backend: Annotated[str | None, typer.Option(help="Sandbox backend: auto, docker or local.")] = None,
    workers: Annotated[int | None, typer.Option(help="Concurrent jobs (default: CPU count).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as one JSON object.")] = False,
    out: Annotated[Path | None, typer.Option(
        "--out", help="Also write the report to DIR/audit.json (for `grpo-code report DIR`).")] = None,
    config: ConfigOpt = None,
) -> None:
    """Find the tasks whose tests a wrong program passes: shortcuts and mutants of the reference.

    A task that a shortcut passes (returning a constant, exiting 0 at start, printing the
    sample outputs, ...) is hackable; the mutation score is the share of the reference's
    mutants the tests reject. Runs go through the training sandbox and verifier, stop at a
    test's first failure, and are cached on disk (a rerun resumes). The report of the suite
    version is kept for `train` (tasks.exclude_weak). Exits 1 when the sandbox failed runs.
    """
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from grpo_code.errors import SuiteError
    from grpo_code.sandbox import Sandbox
    from grpo_code.tasks import load_suite
    from grpo_code.verify.audit import audit_suite, require_clean, save_last

    if mutants < 0:
        raise SuiteError(f"--mutants {mutants} must be >= 0", "use --mutants 0 to run the shortcuts only")
    if not 0.0 <= min_score <= 1.0:
        raise SuiteError(f"--min-score {min_score} must be between 0 and 1", "the default is 0.8")
    cfg = _config(config, overrides)
    sb_cfg = replace(cfg.sandbox, **{k: v for k, v in (("backend", backend), ("workers", workers)) if v is not None})
    s = load_suite(suite, cfg.tasks.paths).split(split)
    strong = load_suite(stronger, cfg.tasks.paths) if stronger else None
    err = Console(stderr=True)
    with Sandbox(sb_cfg) as sandbox, Progress(TextColumn("auditing {task.description}"), BarColumn(),
                                              MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                                              disable=as_json) as bar:
        job = bar.add_task(s.name, total=None)
        report = audit_suite(s, sandbox, shortcuts=shortcuts, mutants=mutants, stronger=strong,
                             min_score=min_score,
                             progress=lambda done, total: bar.update(job, completed=done, total=total))
    saved = save_last(report)
    summary = report.summary()
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "audit.json").write_text(json.dumps(summary))
    if as_json:
        typer.echo(json.dumps(summary))
    else:
        print_audit(summary, saved)
    require_clean(report)
