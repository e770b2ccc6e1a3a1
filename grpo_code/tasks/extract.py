"""Code extraction: from a model's completion to the program the sandbox runs.

Chat-style completions hold the code in a fenced block (first or last, by config), with
prose around it; base models continue a code prefix and run on past the function. Empty
or prose-only completions give a distinct ``no code`` outcome (``program is None``) that
rewards can penalise instead of sending garbage to the sandbox.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, replace
from typing import Any

from grpo_code.sandbox.languages import FACTS, code_start

FENCE_TAGS = {k: v.fence_tags for k, v in FACTS.items()}
# A fence opens at the start of a line: ```tag, then the code until a closing ``` line
# (group 3), or until the end of the text when the block was never closed.
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:^[ \t]*(```)|\Z)", re.S | re.M)
_CODE_START = re.compile(r"^(def |async def |class |import |from \w[\w.]* import |@\w)", re.M)
# Where unfenced code starts in the other languages (the rest of the text is taken).
_CODE_STARTS = {k: pattern for k in FACTS if (pattern := code_start(k)) is not None}
# Lines of a C++ prefix that an answer needs in front of it (headers, using-declarations).
_CPP_HEADER = re.compile(r"^\s*(#\s*include\b|using\s+namespace\b)")


@dataclass(frozen=True)
class Extraction:
    """``program`` is what runs (``None`` = no code found); ``how`` says which rule applied."""

    program: str | None
    how: str  # fenced | unfenced | continuation | verbatim (samples files) | none
    cut: bool = False
    """The program runs to the end of the text (a code block never closed, code with nothing
    after it): if the completion was cut at the length limit, the program is unfinished."""

    @property
    def ok(self) -> bool:
        return self.program is not None


def fenced_blocks(text: str, language: str = "python") -> list[str]:
    """Code blocks in the language (or untagged) in order; a block cut off by the end counts."""
    return [body for body, _ in _blocks(text, language)]


def _blocks(text: str, language: str) -> list[tuple[str, bool]]:
    """``fenced_blocks`` with, for each, whether the end of the text cut it off (never closed)."""
    tags = FENCE_TAGS.get(language, (language,))
    tagged, untagged = [], []
    for match in _FENCE.finditer(text):
        tag, block = match.group(1).lower(), (match.group(2), match.group(3) is None)
        if tag in tags:
            tagged.append(block)
        elif not tag:
            untagged.append(block)
    return tagged or untagged


def _python_prefix_that_parses(lines: list[str]) -> str | None:
    for end in range(len(lines), 0, -1):
        chunk = "\n".join(lines[:end]).strip("\n")
        if not chunk.strip():
            return None
        try:
            ast.parse(chunk)
        except SyntaxError:
            continue
        return chunk + "\n"
    return None


def _unfenced(text: str, language: str) -> tuple[str | None, bool]:
    """Code written without fences (from the first line that starts code, cut where prose
    starts), and whether it runs to the end of the text: nothing follows it, or what follows
    is indented (code past the part that parses)."""
    if language != "python":
        match = _CODE_STARTS.get(language, _CODE_START).search(text)
        return (text[match.start():], True) if match else (None, False)
    match = _CODE_START.search(text)
    if not match:
        return None, False
    lines = text[match.start():].splitlines()
    code = _python_prefix_that_parses(lines)
    if code is None:
        return None, False
    rest = [ln for ln in lines[code.count("\n"):] if ln.strip()]
    return code, not rest or rest[0][0].isspace()


def extract_code(text: str, language: str = "python", which: str = "last",
                 entry_point: str | None = None) -> Extraction:
    """The program in a chat-style completion: a fenced block, else unfenced code, else none.

    With an ``entry_point`` (Python), blocks that define it win over the others, so an
    "Example usage" block after the solution is not taken for the solution.
    """
    blocks = [b for b in _blocks(text, language) if b[0].strip()]
    if entry_point and language == "python":
        defining = [b for b in blocks if _defines(b[0], entry_point)]
        # A block cut off by the token limit does not parse; a complete one is preferred.
        defining = [b for b in defining if _parses(b[0])] or defining
        if defining:
            body, cut = defining[0] if which == "first" else defining[-1]
            return Extraction(body, "fenced", cut)
        code, cut = _unfenced(text, language)
        if code and _defines(code, entry_point):
            return Extraction(code, "unfenced", cut)
    if blocks:
        body, cut = blocks[0] if which == "first" else blocks[-1]
        return Extraction(body, "fenced", cut)
    code, cut = _unfenced(text, language)
    if code and code.strip():
        return Extraction(code, "unfenced", cut)
    return Extraction(None, "none")


def continuation(text: str, language: str = "python") -> str:
    """The body a base model wrote after a code prefix: up to the first top-level line.

    A function body is indented; the first non-blank line at column 0 (a new ``def``, a
    test, ``if __name__``, prose, a closing fence) ends it. In brace languages (JavaScript,
    C++) a column-0 ``}`` closes the prefix's function and is kept.
    """
    return _continue(text, language)[0]


def _continue(text: str, language: str) -> tuple[str, bool]:
    """``continuation`` and whether no top-level line ended it (it runs to the end of the text)."""
    out = []
    for line in text.split("\n"):
        if line.strip() and not line[0].isspace():
            if language != "python" and line.startswith("}"):
                out.append(line.rstrip())
            return "\n".join(out).rstrip() + "\n", False
        out.append(line)
    return "\n".join(out).rstrip() + "\n", True


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def _defines(code: str, name: str) -> bool:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return re.search(rf"^\s*def\s+{re.escape(name)}\s*\(", code, re.M) is not None
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name
               for n in ast.walk(tree))


def whole_program(task: Any, completion: str, style: str = "chat", which: str = "last") -> bool:
    """Whether a completion being generated already holds its whole program: a code block
    that closed, or a continuation that a top-level line ended, which (Python with an entry
    point) defines the entry point, so a first block of imports or of example usage does not
    count. Unfenced code never counts: half a line (``def helper(``) does not parse, so
    while it is being written it looks like the prose that ends the code."""
    found = build_program(task, completion, style, which)
    if found.program is None or found.cut or found.how == "unfenced":
        return False
    return task.language != "python" or not task.entry_point or _defines(found.program, task.entry_point)


def _header(prefix: str) -> str:
    """Import lines of a code prefix, which chat answers often leave out."""
    lines = [ln for ln in prefix.splitlines() if re.match(r"(import |from \w[\w.]* import )", ln)]
    return "\n".join(lines) + "\n\n" if lines else ""


def build_program(task: Any, completion: str, style: str = "chat", which: str = "last") -> Extraction:
    """The program to run for ``task`` given a completion rendered in ``style``."""
    if style == "raw" and task.mode == "complete":
        body, cut = _continue(completion, task.language)
        if not body.strip():
            return Extraction(None, "none")
        return Extraction(task.prompt + body, "continuation", cut)
    if style == "raw":
        code = completion.split("```", 1)[0]
        if code.strip():
            return Extraction(code.rstrip() + "\n", "continuation", "```" not in completion)
        return extract_code(completion, task.language, which, task.entry_point)
    found = extract_code(completion, task.language, which, task.entry_point)
    if not found.ok or task.mode != "complete":
        return found
    if task.language == "cpp":
        # The prefix's #include and using lines, which answers often leave out (repeating
        # them is harmless); an answer that is only the body continues the prefix.
        code = found.program or ""
        if code.startswith((" ", "\t")) and task.entry_point and task.entry_point not in code:
            return replace(found, program=task.prompt + code)
        header = "".join(ln + "\n" for ln in task.prompt.splitlines() if _CPP_HEADER.match(ln))
        return replace(found, program=header + code)
    if task.language != "python":
        return found
    code = found.program or ""
    if task.entry_point and not _defines(code, task.entry_point):
        if code.startswith((" ", "\t")):  # only the body came back: continue the prefix with it
            return replace(found, program=task.prompt + code)
        return found
    return replace(found, program=_header(task.prompt) + code)
