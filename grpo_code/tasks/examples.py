"""Public tests from what a benchmark's prompt already shows (``Task.public_tests``).

A multi-turn rollout quotes a failed public test back to the model, so public tests must be
ones the model has seen: HumanEval's docstring examples (``>>> f(x)`` then the result),
the assert MBPP puts in its prompt, CodeContests' public tests, APPS' first example.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from grpo_code.sandbox.values import suite_tree

Record = dict[str, Any]

_PROMPT_LINE = re.compile(r"^\s*>>>\s?(.*)$")


def docstring_examples(prompt: str, entry: str | None) -> list[Record]:
    """``call`` tests from a prompt's examples of ``entry`` with literal arguments and a
    literal result: ``>>> entry(...)`` and the output line after it, or one line such as
    ``entry(...) ==> result`` (also ``==``, ``->``, ``returns``). Other forms are left out."""
    if not entry:
        return []
    lines = prompt.splitlines()
    inline = re.compile(rf"^\s*(?:>>>\s*)?({re.escape(entry)}\(.*\))\s*(?:==>|==|=>|->|\u279e|returns?|should return)\s*(.+?)\s*$")
    out: list[Record] = []
    for i, line in enumerate(lines):
        found = inline.match(line)
        if found:  # "f(x) ==> y", "f(x) == y", "f(x) -> y" on one line
            test = _call_test(found.group(1), found.group(2).rstrip(".,;"), entry)
        else:
            match = _PROMPT_LINE.match(line)
            shown = lines[i + 1].strip() if i + 1 < len(lines) else ""
            if not match or not shown or shown.startswith(">>>"):
                continue
            test = _call_test(match.group(1).strip(), shown, entry)
        if test is not None and test not in out:
            out.append(test)
    return out


def _call_test(expression: str, shown: str, entry: str) -> Record | None:
    try:
        call = ast.parse(expression, mode="eval").body
        expected = ast.literal_eval(shown)
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == entry
                and not call.keywords):
            return None
        args = [ast.literal_eval(a) for a in call.args]
        return {"kind": "call", "fn": entry, "args": [suite_tree(a) for a in args],
                "expected": suite_tree(expected), "compare": "python"}
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None


def prompt_assert(prompt: str, prefix: str = "") -> list[Record]:
    """The first ``assert`` line of a prompt (MBPP shows one) as a ``script`` test."""
    for line in prompt.splitlines():
        if line.strip().startswith("assert "):
            return [{"kind": "script", "code": prefix + line.strip()}]
    return []
