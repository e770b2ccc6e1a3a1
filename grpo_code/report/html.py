"""``report.html``: the summary tables and every figure on one page, with no external assets
(images are base64 data URIs, the style sheet is inline), so it opens offline and can be
sent as one file."""

from __future__ import annotations

import base64
import html
import time
from typing import Any

from grpo_code import __version__
from grpo_code.report.tables import audit_table, eval_table, run_table

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1000px;
       color: #222; padding: 0 1rem; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ddd; padding: 0.3rem 0.6rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f5f5f5; }
figure { margin: 1.2rem 0; } figcaption { font-weight: 600; margin-bottom: 0.3rem; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
.note { color: #666; } code { background: #f5f5f5; padding: 0 0.2rem; }
"""


def _table(title: str, headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table aria-label='{html.escape(title)}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render(report: Any) -> str:
    """The page as a string (images read from ``report.out``)."""
    esc = html.escape
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>grpo-code report</title>"
             f"<style>{STYLE}</style></head><body>",
             "<h1>grpo-code report</h1>",
             f"<p class='note'>Written {esc(time.strftime('%Y-%m-%d %H:%M'))} by grpo-code {esc(__version__)} from:</p><ul>"]
    for item in [*report.runs, *report.evals, *report.audits]:
        kind = "run" if item in report.runs else "eval" if item in report.evals else "test audit"
        parts.append(f"<li>{esc(item.name)} ({kind}): <code>{esc(str(item.path))}</code></li>")
    parts.append("</ul>")
    sections = (("runs", "Training runs", report.runs, run_table), ("evals", "Evals", report.evals, eval_table),
                ("audits", "Test audits", report.audits, audit_table))
    for section, heading, items, table in sections:
        if not items:
            continue
        title, headers, rows = table(items)
        parts.append(f"<h2>{heading}</h2>")
        parts.append(_table(title, headers, rows))
        if section == "runs":
            parts.append("<p class='note'>reward, pass rate: mean over the first and last quarter of logged steps; "
                         "wait/step and wait/busy: time blocked on rewards after generation "
                         "(<code>timing/reward_wait_s</code>) as a share of step time and of sandbox busy time.</p>")
        else:
            parts.append(f"<p class='note'>{esc(title)}</p>")
        for fig in report.figures:
            if fig.section != section:
                continue
            data = base64.b64encode((report.out / fig.file).read_bytes()).decode()
            parts.append(f"<figure id='{esc(fig.file[:-4])}'><figcaption>{esc(fig.title)}</figcaption>"
                         f"<img src='data:image/png;base64,{data}' alt='{esc(fig.title)}'></figure>")
        notes = [(title, why) for where, title, why in report.skipped if where == section]
        if notes:
            parts.append("<p class='note'>Not plotted:</p><ul class='note'>")
            parts += [f"<li>{esc(title)}: {esc(why)}</li>" for title, why in notes]
            parts.append("</ul>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write(report: Any) -> None:
    report.html.write_text(render(report))
