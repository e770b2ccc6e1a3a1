"""The report's figures for test audits (``grpo-code tasks audit --out DIR``): how the
mutation score spreads over a suite's tasks, and which shortcuts pass how many tasks."""

from __future__ import annotations

from collections.abc import Callable

from matplotlib.figure import Figure

from grpo_code.report.load import AuditData
from grpo_code.report.plots import _figure, _legend_outside, color


def mutation_scores(audits: list[AuditData]) -> Figure | str:
    """The share of tasks at or under each mutation score (one line per audit): a suite whose
    line rises early has many tasks whose tests let mutants through."""
    drawn = [(i, a, sorted(a.scores())) for i, a in enumerate(audits)]
    drawn = [(i, a, s) for i, a, s in drawn if s]
    if not drawn:
        return "no audit has mutants (their tasks have no reference, or --mutants 0)"
    fig, axes = _figure(3.6)
    ax = axes[0][0]
    handles = []
    for i, audit, scores in drawn:
        n = len(scores)
        xs = [0.0] + [s for s in scores for _ in (0, 1)] + [1.0]
        ys = [0.0] + [y for k in range(n) for y in (k / n, (k + 1) / n)] + [1.0]
        handles += ax.plot(xs, ys, color=color(i), lw=1.8, label=f"{audit.name} ({n} tasks)")
    minimum = audits[0].summary.get("min_score")
    if isinstance(minimum, (int, float)):
        ax.axvline(minimum, color="#999", ls=":", lw=1)
    ax.set_xlabel("mutation score (share of the reference's mutants the tests reject)")
    ax.set_ylabel("share of tasks at or under it")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    _legend_outside(fig, handles)
    return fig


def shortcuts_passed(audits: list[AuditData]) -> Figure | str:
    """How many tasks each shortcut passes, per audit (grouped bars)."""
    names = sorted({n for a in audits for n in a.summary.get("shortcuts_passed", {})})
    if not names:
        return "no shortcut passed any task"
    fig, axes = _figure(0.9 + 0.35 * len(names) * max(1, len(audits)) ** 0.5)
    ax = axes[0][0]
    width = 0.8 / len(audits)
    handles = []
    for i, audit in enumerate(audits):
        counts = audit.summary.get("shortcuts_passed", {})
        ys = [k + i * width for k in range(len(names))]
        handles.append(ax.barh(ys, [counts.get(n, 0) for n in names], height=width, color=color(i),
                               label=audit.name))
    ax.set_yticks([k + 0.4 - width / 2 for k in range(len(names))], names)
    ax.invert_yaxis()
    ax.set_xlabel("tasks the shortcut passes (hackable)")
    ax.grid(axis="x", alpha=0.3)
    if len(audits) > 1:
        _legend_outside(fig, handles)
    return fig


AUDIT_PLOTS: list[tuple[str, str, Callable[[list[AuditData]], Figure | str]]] = [
    ("audit_mutation_scores.png", "Mutation score over the tasks", mutation_scores),
    ("audit_shortcuts.png", "Shortcuts that pass a task's tests", shortcuts_passed),
]
