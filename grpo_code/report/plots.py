"""The report's figures, drawn with matplotlib's object API on the Agg canvas (no display, no
pyplot global state). Each function takes the runs or evals to overlay and returns a
``Figure``, or a string saying why the plot does not apply (a missing metric is a note,
not a crash). One colour per run or eval, the same in every figure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from os.path import commonprefix
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter, PercentFormatter

from grpo_code import metric_names as M
from grpo_code.report.load import TEST_VERDICTS, EvalData, RunData

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
          "#bcbd22", "#17becf"]
# Verdict colours: green for pass, warm for wrong programs, cool/grey for limits and missing code.
VERDICT_COLORS = {
    "pass": "#4c9a4c", "fail": "#d9534f", "compile_error": "#8e5ea2", "runtime_error": "#f0ad4e",
    "timeout": "#5bc0de", "memory": "#337ab7", "output_limit": "#b5651d", "not_run": "#e6e6e6",
    "no_code": "#9e9e9e", "masked": "#d0d0d0", "infra_error": "#333333",
}
VERDICT_LABELS = {"compile_error": "compile error", "runtime_error": "runtime error", "no_code": "no code",
                  "infra_error": "infra error", "output_limit": "output limit", "not_run": "not run"}
WIDTH = 8.0


def color(i: int) -> str:
    return COLORS[i % len(COLORS)]


def _figure(height: float, nrows: int = 1, ncols: int = 1, width: float = WIDTH, **kw: Any) -> tuple[Figure, Any]:
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def ema(values: list[float], span: int) -> list[float]:
    """Exponential moving average, bias-corrected at the start (TensorBoard's smoothing)."""
    alpha = 2.0 / (span + 1)
    out, acc, weight = [], 0.0, 0.0
    for v in values:
        acc = (1 - alpha) * acc + alpha * v
        weight = (1 - alpha) * weight + alpha
        out.append(acc / weight)
    return out


def span_for(n: int) -> int:
    return max(3, min(50, n // 4))


def _step_axis(ax: Any) -> None:
    ax.set_xlabel("training step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)


def _legend_outside(fig: Figure, handles: list, ncol: int | None = None) -> None:
    # Below the axes: above them it would collide with the figure title.
    fig.legend(handles=handles, loc="outside lower center", ncol=ncol or min(len(handles), 4), frameon=False,
               fontsize="small")


# --------------------------------------------------------------------------- training runs


def per_step(runs: list[RunData], key: str, ylabel: str, title: str, share: bool = False) -> Figure | str:
    """A metric per step, raw and smoothed, one colour per run."""
    present = [(i, r) for i, r in enumerate(runs) if r.series(key)[0]]
    if not present:
        return f"no run logged {key}"
    fig, axes = _figure(4.0)
    ax = axes[0][0]
    spans = set()
    handles = []
    for i, run in present:
        xs, ys = run.series(key)
        single = len(runs) == 1
        ax.plot(xs, ys, color=color(i), alpha=0.8 if single else 0.35, lw=1,
                marker="o" if len(xs) <= 40 else None, ms=3)
        if len(xs) >= 3:
            span = span_for(len(xs))
            spans.add(span)
            ax.plot(xs, ema(ys, span), color=color(i), lw=2.4)
        if not single:
            handles.append(Line2D([], [], color=color(i), lw=2.4, label=run.name))
    smooth = f"smoothed (EMA over ~{'/'.join(map(str, sorted(spans)))} steps)" if spans else None
    style = [Line2D([], [], color="#555555", lw=1, marker="o", ms=3, label="per step")]
    if smooth:
        style.append(Line2D([], [], color="#555555", lw=2.4, label=smooth))
    _legend_outside(fig, handles + style)
    ax.set_ylabel(ylabel)
    if share:
        ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    lo = min(min(r.series(key)[1]) for _, r in present)
    top = max(ax.get_ylim()[1], 0.05 if share else 0.0)
    # A little room below zero so points at 0 are not hidden by the axis line.
    ax.set_ylim(min(0.0, lo) - 0.02 * (top - min(0.0, lo)), top)
    _step_axis(ax)
    fig.suptitle(title)
    return fig


def _verdict_shares(run: RunData) -> tuple[list[float], dict[str, list[float]]]:
    """Test verdict shares per step, each as logged (``tests/pass`` included).

    Runs logged before ``tests/pass`` was written get pass as what every other verdict
    leaves (``not_run`` and ``output_limit`` included, so tests that never ran are not
    drawn as passes). Steps where no test ran (every completion without code, unfinished
    or masked) are left out.
    """
    steps: list[float] = []
    shares: dict[str, list[float]] = {v: [] for v in TEST_VERDICTS}
    for row in run.rows:
        if not any(M.verdict_share(v) in row for v in TEST_VERDICTS):
            continue
        logged = {v: float(row.get(M.verdict_share(v), 0.0) or 0.0) for v in TEST_VERDICTS}
        no_tests = sum(float(row.get(k, 0.0) or 0.0) for k in (M.NO_CODE, M.UNFINISHED, M.MASKED)) >= 1.0
        if M.verdict_share("pass") not in row:
            logged["pass"] = max(0.0, 1.0 - sum(s for v, s in logged.items() if v != "pass"))
        if no_tests or sum(logged.values()) <= 0.0:
            continue
        steps.append(float(row["step"]))
        for v, share in logged.items():
            shares[v].append(share)
    return steps, shares


def verdict_mix(runs: list[RunData]) -> Figure | str:
    data = [(i, r, *_verdict_shares(r)) for i, r in enumerate(runs)]
    data = [d for d in data if d[2]]
    if not data:
        return "no run logged test verdicts (tests/fail, tests/runtime_error, ...)"
    rows = len(data)
    fig, axes = _figure(1.0 + 2.4 * rows if rows > 1 else 4.0, nrows=rows, sharex=True, sharey=True)
    used = [v for v in TEST_VERDICTS if any(max(d[3][v], default=0) > 0 for d in data)]
    for ax, (i, run, steps, shares) in zip(axes[:, 0], data):
        ax.stackplot(steps, [shares[v] for v in used], colors=[VERDICT_COLORS[v] for v in used], alpha=0.9,
                     step=None)
        ax.set_ylim(0, 1)
        ax.set_xlim(min(min(d[2]) for d in data), max(max(d[2]) for d in data))  # shared by all panels
        ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        ax.set_ylabel("share of tests")
        if rows > 1:
            ax.set_title(run.name, fontsize="medium", color=color(i), loc="left")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[-1][0].set_xlabel("training step")
    _legend_outside(fig, [Patch(color=VERDICT_COLORS[v], label=VERDICT_LABELS.get(v, v)) for v in used],
                    ncol=len(used))
    fig.suptitle("Test verdicts per step (executed tests; completions without code not counted)")
    return fig


def completion_length(runs: list[RunData]) -> Figure | str:
    present = [(i, r) for i, r in enumerate(runs) if r.series(M.MEAN_LENGTH)[0]]
    if not present:
        return "no run logged completions/mean_length"
    clipped = any(r.series(M.CLIPPED_RATIO)[0] for _, r in present)
    fig, axes = _figure(5.6 if clipped else 4.0, nrows=2 if clipped else 1, sharex=True,
                        gridspec_kw={"height_ratios": [3, 1.4]} if clipped else None)
    ax = axes[0][0]
    handles = []
    limits = set()
    for i, run in present:
        xs, mean = run.series(M.MEAN_LENGTH)
        lo_x, lo = run.series(M.MIN_LENGTH)
        hi_x, hi = run.series(M.MAX_LENGTH)
        ax.plot(xs, mean, color=color(i), lw=2, marker="o" if len(xs) <= 40 else None, ms=3)
        if lo_x == xs and hi_x == xs:
            ax.fill_between(xs, lo, hi, color=color(i), alpha=0.15, lw=0)
        if len(runs) > 1:
            handles.append(Line2D([], [], color=color(i), lw=2, label=run.name))
        limit = run.completion_limit()
        if limit:
            limits.add(limit)
            ax.axhline(limit, color=color(i) if len(runs) > 1 else "#555555", ls="--", lw=1)
        if clipped:
            cx, cy = run.series(M.CLIPPED_RATIO)
            axes[1][0].plot(cx, cy, color=color(i), lw=1.5, marker="o" if len(cx) <= 40 else None, ms=3)
    handles += [Line2D([], [], color="#555555", lw=2, label="mean"),
                Patch(color="#555555", alpha=0.2, label="min to max")]
    if limits:
        handles.append(Line2D([], [], color="#555555", ls="--", lw=1, label="length limit"))
    _legend_outside(fig, handles)
    ax.set_ylabel("completion length (tokens)")
    ax.set_ylim(bottom=0, top=max(ax.get_ylim()[1], max(limits, default=0) * 1.08))
    ax.grid(alpha=0.3)
    if clipped:
        cax = axes[1][0]
        cax.set_ylabel("cut off at\nthe limit")
        cax.set_ylim(-0.05, 1.05)
        cax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        _step_axis(cax)
    else:
        _step_axis(ax)
    fig.suptitle("Completion length per step")
    return fig


def timing(runs: list[RunData]) -> Figure | str:
    keys = [(M.SANDBOX_BUSY_S, "-", "sandbox busy (summed job run time)"),
            (M.REWARD_WAIT_S, "--", "blocked on rewards after generation")]
    present = [(i, r) for i, r in enumerate(runs) if any(r.series(k)[0] for k, _, _ in keys)]
    if not present:
        return "no run logged timing/reward_wait_s or timing/sandbox_busy_s"
    fig, axes = _figure(4.0)
    ax = axes[0][0]
    values = []
    for i, run in present:
        for key, ls, _ in keys:
            xs, ys = run.series(key)
            values += ys
            ax.plot(xs, ys, color=color(i), ls=ls, lw=1.8, marker="o" if len(xs) <= 40 else None, ms=3)
    positive = [v for v in values if v > 0]
    # Waits are often 100x shorter than the sandbox work; a log axis keeps both readable.
    if positive and max(positive) / min(positive) > 30:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_ylabel("seconds per step (log scale)")
    else:
        ax.set_ylim(bottom=0)
        ax.set_ylabel("seconds per step")
    handles = [Line2D([], [], color=color(i), lw=1.8, label=r.name) for i, r in present] if len(runs) > 1 else []
    handles += [Line2D([], [], color="#555555", ls=ls, lw=1.8, label=label) for _, ls, label in keys]
    _legend_outside(fig, handles, ncol=min(len(handles), 3))
    _step_axis(ax)
    fig.suptitle("Time blocked on rewards vs sandbox busy time")
    return fig


def prompt_filter(runs: list[RunData]) -> Figure | str:
    present = [(i, r) for i, r in enumerate(runs) if r.series(M.FILTER_SKIPPED_FRAC)[0]]
    if not present:
        off = all(not r.config.get("train", {}).get("filter", {}).get("enabled") for r in runs if r.config)
        return ("prompt filter off in every run (train.filter.enabled: false)" if off
                else "no run logged filter/skipped_frac")
    fig, axes = _figure(5.6, nrows=2, sharex=True)
    handles = []
    top_saved = 0.0
    all_steps = [float(row["step"]) for _, r in present for row in r.rows]
    steps_span = (min(all_steps) - 0.3, max(all_steps) + 0.3)
    for i, run in present:
        xs, skipped = run.series(M.FILTER_SKIPPED_FRAC)
        axes[0][0].plot(xs, skipped, color=color(i), lw=1.8, marker="o" if len(xs) <= 40 else None, ms=3)
        sx, saved = run.series(M.FILTER_GENERATIONS_SAVED)
        total, cumulative = 0.0, []
        for v in saved:
            total += v
            cumulative.append(total)
        top_saved = max(top_saved, total)
        axes[1][0].plot(sx, cumulative, color=color(i), lw=1.8, drawstyle="steps-post")
        handles.append(Line2D([], [], color=color(i), lw=1.8, label=run.name))
    axes[0][0].set_ylabel("prompts skipped")
    axes[0][0].set_ylim(-0.03, 1.05)
    axes[0][0].yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    axes[0][0].grid(alpha=0.3)
    axes[1][0].set_ylabel("generations saved\n(cumulative)")
    axes[1][0].set_ylim(-0.03 * max(1.0, top_saved), max(1.0, top_saved) * 1.08)
    axes[1][0].set_xlim(*steps_span)
    axes[1][0].yaxis.set_major_locator(MaxNLocator(integer=True))
    _step_axis(axes[1][0])
    if len(runs) > 1:
        _legend_outside(fig, handles)
    fig.suptitle("Prompt filter: zero-advantage prompts skipped")
    return fig


# --------------------------------------------------------------------------- evals


def pass_at_k(evals: list[EvalData]) -> Figure | str:
    ks = sorted({k for e in evals for k in e.ks})
    if not ks:
        return "no eval has pass@k values"
    fig, axes = _figure(4.2, width=max(6.0, min(12.0, 2.0 + 0.9 * len(ks) * len(evals))))
    ax = axes[0][0]
    width = min(0.8 / len(evals), 0.3)
    for j, ev in enumerate(evals):
        for x, k in enumerate(ks):
            got = ev.pass_at(k)
            if got is None:
                continue
            value, lo, hi = got
            pos = x + width * (j - (len(evals) - 1) / 2)
            ax.bar(pos, value, width * 0.92, color=color(j))
            ax.errorbar(pos, value, yerr=[[value - lo], [hi - value]], color="#222222", capsize=4, lw=1.2)
            ax.text(pos, hi + 0.015, f"{value:.2f}", ha="center", va="bottom", fontsize="small")
    ax.set_xticks(range(len(ks)), [f"pass@{k}" for k in ks])
    ax.set_ylim(0, 1.1)
    ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    ax.set_ylabel("pass@k (mean over tasks)")
    ax.grid(axis="y", alpha=0.3)
    handles = [Patch(color=color(j), label=e.name) for j, e in enumerate(evals)]
    handles.append(Line2D([], [], color="#222222", marker="|", ms=10, lw=1.2, label="95% bootstrap CI over tasks"))
    _legend_outside(fig, handles, ncol=min(len(handles), 3))
    fig.suptitle("pass@k per model")
    return fig


def _natural(task_id: str) -> list[Any]:
    """Sort key that puts HumanEval/2 before HumanEval/10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", task_id)]


def _short_ids(ids: list[str]) -> tuple[list[str], str]:
    """Task ids without the prefix they share up to a '/' (``demo/003-is-even`` -> ``003-is-even``)."""
    prefix = commonprefix(ids)
    prefix = prefix[: prefix.rfind("/") + 1] if "/" in prefix else ""
    return [t[len(prefix):] for t in ids], prefix


def task_grid(evals: list[EvalData]) -> Figure | str:
    per = [e.per_task() for e in evals]
    ids = sorted({t for p in per for t in p}, key=_natural)
    if not ids:
        return "no eval has per-task counts"
    grid = np.ma.masked_invalid(np.array([[p.get(t, math.nan) for p in per] for t in ids], dtype=float))
    names, prefix = _short_ids(ids)
    counts = [e.summary.per_task for e in evals]
    wide = len(ids) > 60  # a long suite runs along the x axis instead
    cmap = _colormap()
    if wide:
        fig, axes = _figure(1.6 + 0.45 * len(evals), width=12.0)
        ax = axes[0][0]
        image = ax.imshow(grid.T, aspect="auto", cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
        ax.set_yticks(range(len(evals)), [e.name for e in evals])
        step = max(1, len(ids) // 30)
        ax.set_xticks(range(0, len(ids), step), [names[i] for i in range(0, len(ids), step)], rotation=90,
                      fontsize="x-small")
        ax.set_xlabel(f"task ({prefix}..., suite order)" if prefix else "task (suite order)")
    else:
        fig, axes = _figure(1.8 + 0.24 * len(ids), width=max(5.5, 3.6 + 1.3 * len(evals)))
        ax = axes[0][0]
        image = ax.imshow(grid, aspect="auto", cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
        ax.set_yticks(range(len(ids)), names, fontsize="small")
        ax.xaxis.tick_top()
        ax.set_xticks(range(len(evals)), [e.name for e in evals])
        if len(evals) > 2:  # long names side by side would overlap
            ax.tick_params(axis="x", labelrotation=25)
            for label in ax.get_xticklabels():
                label.set(ha="left", rotation_mode="anchor")
        ax.set_ylabel(f"task ({prefix}...)" if prefix else "task")
        if len(evals) <= 10:
            for r, t in enumerate(ids):
                for c, cnt in enumerate(counts):
                    if t in cnt:
                        value = grid[r, c]
                        ax.text(c, r, f"{cnt[t].correct}/{cnt[t].n}", ha="center", va="center",
                                fontsize="x-small", color="white" if value < 0.55 else "black")
    ax.tick_params(length=0)
    bar = fig.colorbar(image, ax=ax, shrink=0.9 if wide else min(0.9, 8 / max(8, len(ids)) + 0.3), pad=0.02)
    bar.set_label("samples passing")
    bar.ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    fig.suptitle("Per-task pass rate (grey: task not in that eval)" if grid.mask.any() else "Per-task pass rate")
    return fig


def _colormap() -> Any:
    return matplotlib.colormaps["viridis"].with_extremes(bad="#dddddd")


def eval_verdicts(evals: list[EvalData]) -> Figure | str:
    panels = [("samples by status", False), ("tests by verdict", True)]
    mixes = [[e.mix(tests) for e in evals] for _, tests in panels]
    if not any(sum(m.values()) for mix in mixes for m in mix):
        return "no eval has a verdict mix"
    order = [*TEST_VERDICTS, "no_code", "infra_error"]
    fig, axes = _figure(1.9 + 0.5 * len(evals), ncols=2, width=10.0, sharey=True)
    used: list[str] = []
    for ax, (title, tests), mix in zip(axes[0], panels, mixes):
        keys = [k for k in order if any(m.get(k) for m in mix)] + sorted({k for m in mix for k in m} - set(order))
        for row, m in enumerate(mix):
            total = sum(m.values())
            left = 0.0
            for k in keys:
                share = m.get(k, 0) / total if total else 0.0
                if share:
                    ax.barh(row, share, left=left, color=VERDICT_COLORS.get(k, "#bbbbbb"), height=0.6)
                    if share >= 0.08:
                        ax.text(left + share / 2, row, f"{share:.0%}", ha="center", va="center",
                                fontsize="x-small", color="white" if k in ("fail", "compile_error", "memory",
                                                                         "pass", "infra_error") else "black")
                    left += share
            ax.text(1.01, row, f"{total}\n{'tests' if tests else 'samples'}", va="center", fontsize="x-small",
                    color="#555555")
        used += [k for k in keys if k not in used]
        ax.set_title(title, fontsize="medium")
        ax.set_xlim(0, 1)
        ax.xaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        ax.invert_yaxis()
    axes[0][0].set_yticks(range(len(evals)), [e.name for e in evals])
    _legend_outside(fig, [Patch(color=VERDICT_COLORS.get(k, "#bbbbbb"), label=VERDICT_LABELS.get(k, k))
                          for k in used], ncol=min(len(used), 7))
    fig.suptitle("Verdict mix")
    return fig


def held_out(runs: list[RunData]) -> Figure | str:
    """Held-out pass@1 during training (``train.eval_every``) at each evaluated policy
    version, on the right axis, beside the reward per step on the left."""
    present = [(i, r) for i, r in enumerate(runs) if r.series(M.EVAL_PASS1)[0]]
    if not present:
        return f"no run logged {M.EVAL_PASS1} (train.eval_every)"
    fig, axes = _figure(4.0)
    ax = axes[0][0]
    right = ax.twinx()
    handles = []
    for i, run in present:
        xs, ys = run.series(M.REWARD)
        ax.plot(xs, ys, color=color(i), alpha=0.35, lw=1)
        ex, ey = run.series(M.EVAL_PASS1)
        right.plot(ex, ey, color=color(i), lw=2.4, marker="o", ms=5)
        if len(present) > 1:
            handles.append(Line2D([], [], color=color(i), lw=2.4, label=run.name))
    style = [Line2D([], [], color="#555555", alpha=0.5, lw=1, label="reward per step (left)"),
             Line2D([], [], color="#555555", lw=2.4, marker="o", ms=5,
                    label="held-out pass@1 at the policy version (right)")]
    _legend_outside(fig, handles + style)
    ax.set_ylabel("reward")
    right.set_ylabel("held-out pass@1")
    right.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    right.set_ylim(0, max(0.05, max(max(r.series(M.EVAL_PASS1)[1]) for _, r in present) * 1.15))
    _step_axis(ax)
    fig.suptitle("Held-out pass@1 beside reward")
    return fig


RUN_PLOTS: list[tuple[str, str, Callable[[list[RunData]], Figure | str]]] = [
    ("train_reward.png", "Reward per step", lambda runs: per_step(
        runs, M.REWARD, "reward (mean over completions)", "Reward per step")),
    ("train_pass_rate.png", "Pass rate per step", lambda runs: per_step(
        runs, M.PASS_RATE, "completions passing every test", "Pass rate per step", share=True)),
    ("train_held_out.png", "Held-out pass@1 during training", held_out),
    ("train_verdicts.png", "Verdict mix over time", verdict_mix),
    ("train_length.png", "Completion length", completion_length),
    ("train_timing.png", "Reward wait vs sandbox busy time", timing),
    ("train_filter.png", "Prompt-filter savings", prompt_filter),
]
EVAL_PLOTS: list[tuple[str, str, Callable[[list[EvalData]], Figure | str]]] = [
    ("eval_pass_at_k.png", "pass@k per model", pass_at_k),
    ("eval_tasks.png", "Per-task pass grid", task_grid),
    ("eval_verdicts.png", "Verdict mix", eval_verdicts),
]
