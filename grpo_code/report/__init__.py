"""``grpo-code report``: plots, summary tables and one HTML page for training runs and evals.

:func:`build_report` reads each directory (a run: ``config.yaml`` + ``metrics.jsonl``; an
eval: ``summary.json`` or ``<model>/summary.json``), overlays all runs in one set of
figures and all evals in another, writes them as PNGs and writes ``report.html``, which
embeds the images as data URIs so the page can be mailed or archived alone. A plot whose
metrics no input has is skipped with a note. matplotlib is imported here, never by the CLI
module, so ``grpo-code --help`` stays fast; it is the ``report`` extra
(``pip install 'grpo-code[report]'``), and a report without it is an error that says so.

Layout: ``load`` reads directories and computes the table numbers, ``plots`` draws,
``html`` writes the page, ``tables`` prints the terminal summary.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

from grpo_code.report.load import AuditData, EvalData, ReportError, RunData, load_dirs

__all__ = ["Report", "ReportError", "build_report", "default_out"]


@dataclass
class Figure:
    file: str  # file name under the output directory
    title: str
    section: str  # "runs", "evals" or "audits"


@dataclass
class Report:
    out: Path
    runs: list[RunData]
    evals: list[EvalData]
    audits: list[AuditData] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # (section, plot title, why)

    @property
    def html(self) -> Path:
        return self.out / "report.html"


def default_out(dirs: list[Path]) -> Path:
    return dirs[0] / "report"


def build_report(dirs: list[Path], out: Path | None = None) -> Report:
    """Read ``dirs``, write the PNGs and ``report.html`` to ``out`` (default ``<first dir>/report``)."""
    if not dirs:
        raise ReportError("no directory given", "pass one or more run or eval directories")
    items = load_dirs(dirs)
    if importlib.util.find_spec("matplotlib") is None:
        raise ReportError("grpo-code report draws its plots with matplotlib, which is not installed",
                          "pip install 'grpo-code[report]'")
    out = out or default_out(dirs)
    if out.exists() and not out.is_dir():
        raise ReportError(f"--out {out} is a file", "choose a directory for the report")
    out.mkdir(parents=True, exist_ok=True)
    report = Report(out, [i for i in items if isinstance(i, RunData)], [i for i in items if isinstance(i, EvalData)],
                    [i for i in items if isinstance(i, AuditData)])

    from grpo_code.report import audits, html, plots, turns

    for section, inputs, specs in (("runs", report.runs, plots.RUN_PLOTS + turns.RUN_PLOTS),
                                   ("evals", report.evals, plots.EVAL_PLOTS + turns.EVAL_PLOTS),
                                   ("audits", report.audits, audits.AUDIT_PLOTS)):
        if not inputs:
            continue
        for file, title, draw in specs:
            drawn = draw(inputs)  # type: ignore[arg-type]
            if isinstance(drawn, str):
                report.skipped.append((section, title, drawn))
                (out / file).unlink(missing_ok=True)  # no stale image from an earlier report
                continue
            drawn.savefig(out / file, dpi=110)
            report.figures.append(Figure(file, title, section))
    html.write(report)
    return report
