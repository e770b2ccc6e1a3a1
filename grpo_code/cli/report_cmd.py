"""``grpo-code report``: plots, summary tables and an HTML page for runs and evals."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def report(
    dirs: Annotated[list[Path], typer.Argument(
        help="Training run directories (config.yaml + metrics.jsonl) and eval directories "
             "(summary.json, or one <model>/summary.json per model).", metavar="DIR", show_default=False)],
    out: Annotated[Path | None, typer.Option(
        "--out", help="Where to write the PNGs and report.html (default: report/ inside the first directory).",
        metavar="DIR", show_default=False)] = None,
) -> None:
    """Plot and compare training runs and evals: PNGs, one self-contained report.html, a summary table.

    Runs: reward and pass rate per step (raw and smoothed), verdict mix, completion length,
    reward wait vs sandbox busy time, prompt-filter savings. Evals: pass@k with 95% intervals,
    a per-task pass grid, verdict mix. Test audits (`tasks audit --out DIR`): the mutation
    score over the tasks, the shortcuts that pass. Several directories are overlaid, named
    by directory.
    """
    from rich.console import Console

    from grpo_code.report import build_report
    from grpo_code.report.tables import print_tables

    result = build_report(dirs, out)
    console = Console()
    print_tables(result.runs, result.evals, console, result.audits)
    for _, title, why in result.skipped:
        console.print(f"not plotted: {title} ({why})", highlight=False)
    console.print(f"report: {result.html} ({len(result.figures)} plots as PNG in {result.out})", highlight=False)
