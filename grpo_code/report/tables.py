"""The report's summary tables as text cells, printed with rich and embedded in the HTML page.

Runs: steps, mean reward and pass rate over the first and last quarter of steps, mean step
time, the share of step time blocked on rewards and that wait next to the sandbox's busy
time. Evals: model, suite, tasks, samples per task, pass@k with its 95% interval.
"""

from __future__ import annotations

from typing import Any

from grpo_code.evaluate import slug
from grpo_code.report.load import AuditData, EvalData, RunData, eval_summary, run_summary

Table = tuple[str, list[str], list[list[str]]]  # title, headers, rows
RUN_TITLE = "Training runs (reward, pass rate: first quarter of steps → last; wait: blocked on rewards)"
EVAL_TITLE = "Evals (pass@k with 95% bootstrap interval over tasks)"


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _arrow(a: float | None, b: float | None) -> str:
    return "-" if a is None and b is None else f"{_num(a)} → {_num(b)}"


def run_table(runs: list[RunData]) -> Table:
    headers = ["run", "steps", "reward", "pass rate", "s/step", "wait/step", "wait/busy"]
    rows = []
    for run in runs:
        s = run_summary(run)
        rows.append([s["name"], str(s["steps"]), _arrow(s["reward_first"], s["reward_last"]),
                     _arrow(s["pass_first"], s["pass_last"]), _num(s["step_s"], 1), _pct(s["wait_share"]),
                     _pct(s["wait_of_busy"])])
    return RUN_TITLE, headers, rows


def eval_table(evals: list[EvalData]) -> Table:
    ks = sorted({k for e in evals for k in e.ks})
    # The model column only when some eval directory is not simply named after its model.
    with_model = any(slug(e.summary.model) != e.name.split("/")[-1] for e in evals)
    suites = {eval_summary(e)["suite"] for e in evals}
    with_suite = len(suites) > 1  # one suite goes in the title
    title = EVAL_TITLE if with_suite else f"Evals on {suites.pop()}: {EVAL_TITLE[len('Evals ('):-1]}"
    headers = ["eval", *(["model"] if with_model else []), *(["suite"] if with_suite else []), "tasks", "n"]
    for k in ks:
        headers += [f"pass@{k}", "95% CI"]
    rows = []
    for ev in evals:
        s = eval_summary(ev)
        n = s["n"] if not isinstance(s["n"], list) else "/".join(map(str, s["n"]))
        cells = [s["name"], *([str(s["model"])] if with_model else []), *([s["suite"]] if with_suite else []),
                 str(s["tasks"]), str(n)]
        for k in ks:
            got = s["pass"].get(k)
            cells += ["-", "-"] if got is None else [f"{got[0]:.3f}", f"{got[1]:.3f} – {got[2]:.3f}"]
        rows.append(cells)
    return title, headers, rows


def audit_table(audits: list[AuditData]) -> Table:
    """One row per audited suite: hackable and weak tasks, the mutation score's quartiles."""
    headers = ["audit", "suite", "tasks", "hackable", "weak", "score p25", "median", "mean", "mutants killed"]
    rows = []
    for a in audits:
        s, dist = a.summary, a.summary.get("mutation_score", {})
        rows.append([a.name, str(s.get("suite", "")), str(s.get("tasks", "")), str(len(s.get("hackable", []))),
                     str(len(s.get("weak", []))), _num(dist.get("p25"), 2), _num(dist.get("median"), 2),
                     _num(dist.get("mean"), 3), f"{s.get('killed', 0)}/{s.get('mutants', 0)}"])
    return ("weak: hackable by a shortcut, or a mutation score under the audit's --min-score "
            "(docs/tasks.md, Auditing a suite's tests)"), headers, rows


def tables(runs: list[RunData], evals: list[EvalData], audits: list[AuditData] | None = None) -> list[Table]:
    return ([run_table(runs)] if runs else []) + ([eval_table(evals)] if evals else []) + \
        ([audit_table(audits)] if audits else [])


def print_tables(runs: list[RunData], evals: list[EvalData], console: Any,
                 audits: list[AuditData] | None = None) -> None:
    from rich.table import Table as RichTable

    for title, headers, rows in tables(runs, evals, audits):
        table = RichTable(title=title, title_justify="left")
        for i, h in enumerate(headers):
            text = i == 0 or h in ("model", "suite")
            # Names fold; ranges ("a → b", "lo – hi") may wrap at their spaces; single numbers never break.
            ranged = any(" " in row[i] for row in rows)
            longest = max([len(h), *(len(row[i]) for row in rows)])
            table.add_column(h, justify="left" if text else "right", overflow="fold",
                             no_wrap=not (text or ranged), min_width=min(longest, 8) if text else None)
        for row in rows:
            table.add_row(*row)
        console.print(table)
