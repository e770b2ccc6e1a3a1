"""The report's figures for multi-turn rollouts and evals (``train.multi_turn``,
``grpo-code eval --turns``): how often each turn's answer passed, per run and per eval."""

from __future__ import annotations

import re
from collections.abc import Callable

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator, PercentFormatter

from grpo_code import metric_names as M
from grpo_code.report.load import EvalData, RunData
from grpo_code.report.plots import _figure, _legend_outside, _step_axis, color

_TURN_KEY = re.compile("^" + re.escape(M.public_pass_turn(0))[:-1] + r"(\d+)$")
STYLES = ["-", "--", ":", "-."]


def run_turns(runs: list[RunData]) -> Figure | str:
    """Per step: the share of rows whose public tests passed after each turn, and the share
    that answered a second time; one colour per run, one line style per turn."""
    keyed = [(i, run, sorted({int(m.group(1)) for row in run.rows for k in row if (m := _TURN_KEY.match(k))}))
             for i, run in enumerate(runs)]
    keyed = [(i, run, turns) for i, run, turns in keyed if turns]
    if not keyed:
        return "no run logged multi-turn metrics (train.multi_turn.turns > 1)"
    fig, axes = _figure(4.0)
    ax = axes[0][0]
    handles = []
    for i, run, turns in keyed:
        for t in turns:
            xs, ys = run.series(M.public_pass_turn(t))
            ax.plot(xs, ys, color=color(i), ls=STYLES[(t - 1) % len(STYLES)], lw=1.6, marker="o", ms=3)
        xs, ys = run.series(M.SECOND_TURN_FRAC)
        if xs:
            ax.plot(xs, ys, color=color(i), lw=0.8, alpha=0.5)
        if len(keyed) > 1:
            handles.append(Line2D([], [], color=color(i), lw=2, label=run.name))
    turns = sorted({t for _, _, ts in keyed for t in ts})
    handles += [Line2D([], [], color="#555555", ls=STYLES[(t - 1) % len(STYLES)], lw=1.6,
                       label=f"public tests passed after turn {t}") for t in turns]
    handles.append(Line2D([], [], color="#555555", lw=0.8, alpha=0.5, label="rows that answered again"))
    _legend_outside(fig, handles, ncol=2)
    ax.set_ylabel("share of rows")
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.set_ylim(-0.02, 1.02)
    _step_axis(ax)
    fig.suptitle("Multi-turn rollouts per step")
    return fig


def eval_turns(evals: list[EvalData]) -> Figure | str:
    """pass@1 after each turn (a sample counts once one of its programs passed), per eval."""
    present = [(j, ev) for j, ev in enumerate(evals) if ev.summary.turns and ev.summary.turns.pass_at_1]
    if not present:
        return "no eval ran more than one turn (grpo-code eval --turns)"
    fig, axes = _figure(4.0, width=6.5)
    ax = axes[0][0]
    for j, ev in present:
        rates = list(ev.summary.turns.pass_at_1)
        turns = list(range(1, len(rates) + 1))
        ax.plot(turns, rates, color=color(j), lw=2, marker="o", label=ev.name)
        for t, r in zip(turns, rates, strict=True):
            ax.text(t, r + 0.015, f"{r:.2f}", ha="center", va="bottom", fontsize="small", color=color(j))
    ax.set_xlabel("turn")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("pass@1 by that turn")
    ax.set_ylim(0, max(0.1, max(max(ev.summary.turns.pass_at_1) for _, ev in present) + 0.1))
    ax.grid(alpha=0.3)
    _legend_outside(fig, [Line2D([], [], color=color(j), lw=2, marker="o", label=ev.name) for j, ev in present])
    fig.suptitle("pass@1 after each turn")
    return fig


RUN_PLOTS: list[tuple[str, str, Callable[[list[RunData]], Figure | str]]] = [
    ("train_turns.png", "Multi-turn rollouts", run_turns),
]
EVAL_PLOTS: list[tuple[str, str, Callable[[list[EvalData]], Figure | str]]] = [
    ("eval_turns.png", "pass@1 by turn", eval_turns),
]
