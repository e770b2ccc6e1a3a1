"""How ``tasks audit`` (and ``tasks check --audit``) print an audit: the weak tasks' table and a summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def print_audit(s: dict[str, Any], saved: Path | None = None) -> None:
    """The audit as a table of the weak tasks and a summary line."""
    from rich.console import Console
    from rich.table import Table

    out = Console()
    weak = [t for t in s["per_task"] if t["task_id"] in set(s["weak"])]
    if weak:
        table = Table("task", "tests", "shortcuts passed", "mutation score", "surviving mutants",
                      title=f"{len(weak)} weak tasks of {s['suite']}", show_lines=False)
        for t in weak[:50]:
            score = "n/a" if t["score"] is None else f"{t['score']:.2f} ({t['killed']}/{t['mutants']})"
            survivors = "; ".join(_survivor(v) for v in t["survivors"][:3])
            if len(t["survivors"]) > 3:
                survivors += f"; +{len(t['survivors']) - 3} more"
            table.add_row(t["task_id"], str(t["tests"]), ", ".join(t["shortcuts"]) or "-", score, survivors or "-")
        out.print(table)
        if len(weak) > 50:
            out.print(f"(+{len(weak) - 50} more weak tasks; --json lists all)")
    if s["shortcuts_passed"]:
        out.print("shortcuts that passed: " + ", ".join(f"{k} ({v} tasks)" for k, v in s["shortcuts_passed"].items()))
    dist = s["mutation_score"]
    if dist["n"]:
        out.print(f"mutation score over {dist['n']} tasks: mean {dist['mean']:.3f}, min {dist['min']:.2f}, "
                  f"quartiles {dist['p25']:.2f} / {dist['median']:.2f} / {dist['p75']:.2f}, "
                  f"{dist['perfect']} tasks kill every mutant")
    if s["stronger"]:
        gaps = sum(1 for t in s["per_task"] for v in t["survivors"] if v["verdict_in_stronger"] == "rejected")
        same = sum(1 for t in s["per_task"] for v in t["survivors"] if v["verdict_in_stronger"] == "survives")
        out.print(f"survivors against {s['stronger']}: {gaps} rejected there (gaps in these tests), "
                  f"{same} survive both (likely equivalent)")
    out.print(f"{s['programs']} programs in {s['seconds']:.1f} s ({s['programs_per_s']}/s, {s['cached']} from the "
              "cache)")
    hackable, weak_n = len(s["hackable"]), len(s["weak"])
    median = f"{dist['median']:.2f}" if dist["n"] else "n/a"
    out.print(f"[bold]{s['suite']}[/bold]: {hackable} of {s['tasks']} tasks hackable, median mutation score "
              f"{median}, {weak_n} weak (hackable or score < {s['min_score']:g})"
              + (f"; saved for train (tasks.exclude_weak): {saved}" if saved else ""))


def _survivor(v: dict[str, Any]) -> str:
    mark = {"rejected": " [gap]", "survives": " [equivalent?]"}.get(v.get("verdict_in_stronger") or "", "")
    return v["description"] + mark
