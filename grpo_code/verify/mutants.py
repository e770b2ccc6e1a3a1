"""Mutants of a reference program: small wrong versions its tests should reject.

A mutant changes one thing in the reference (mutation testing's classic operators, as
mutmut and cosmic-ray apply them):

- ``compare``: a comparison flipped or shifted (``<`` to ``<=``, ``==`` to ``!=``, ...);
- ``arith``: an arithmetic operator swapped (``+`` and ``-``, ``*`` and ``//``, ...);
- ``constant``: an integer constant off by one (``n`` to ``n + 1`` and ``n - 1``), a
  boolean negated, a string emptied;
- ``bool``: ``and`` and ``or`` swapped, a ``not`` dropped;
- ``statement``: one statement of a function body dropped (replaced by ``pass``);
- ``return``: a returned expression replaced by ``None``;
- ``slice``/``index``: a subscript's integer bound shifted by one (in ``constant``).

Python mutants are made on the syntax tree (:func:`python_mutants`); JavaScript and C++
ones on the source text's operators and integer literals outside strings and comments
(:func:`text_mutants`), which is cheap and coarse. Mutants are listed in a fixed order
and, when there are more than ``limit``, a fixed subset is taken (evenly spaced over the
list), so an audit repeats exactly. Each mutant differs from the reference; a mutant that
does not compile is dropped (it tests the compiler, not the tests).
"""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass

_COMPARE = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
            ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
_ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult, ast.Div: ast.Mult,
          ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd,
          ast.LShift: ast.RShift, ast.RShift: ast.LShift, ast.BitXor: ast.BitOr}
_SYMBOL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is",
           ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.Add: "+", ast.Sub: "-", ast.Mult: "*",
           ast.FloorDiv: "//", ast.Div: "/", ast.Mod: "%", ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|",
           ast.LShift: "<<", ast.RShift: ">>", ast.BitXor: "^", ast.And: "and", ast.Or: "or"}


@dataclass(frozen=True)
class Mutant:
    """One changed program: what changed (``operator``, a short ``description`` with its line)."""

    operator: str
    description: str
    line: int
    program: str


class _Sites(ast.NodeVisitor):
    """Every place a mutation applies, in source order: (node path, operator, description)."""

    def __init__(self, only: str | None) -> None:
        self.sites: list[tuple[int, str, str, int]] = []  # (node index, operator, what, line)
        self.index = -1
        self.only = only
        self.inside = 0 if only else 1
        self.in_annotation = False

    def generic_visit(self, node: ast.AST) -> None:
        self.index += 1
        here = self.index
        node._mutant_index = here  # type: ignore[attr-defined]
        line = getattr(node, "lineno", 0)
        entered = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == self.only
        self.inside += entered
        if self.inside and not self.in_annotation and not isinstance(node, (ast.Import, ast.ImportFrom)):
            self._collect(node, here, line)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for child in ast.iter_child_nodes(node):
                if child is getattr(node, "returns", None) or isinstance(child, ast.arguments):
                    self.in_annotation = True
                    self.visit(child)
                    self.in_annotation = False
                else:
                    self.visit(child)
            self.inside -= entered
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self.inside -= entered
            return
        if isinstance(node, (ast.AnnAssign, ast.arg)):
            for child in ast.iter_child_nodes(node):
                self.in_annotation = child is getattr(node, "annotation", None) or self.in_annotation
                self.visit(child)
                self.in_annotation = False
            return
        super().generic_visit(node)
        self.inside -= entered

    def _collect(self, node: ast.AST, here: int, line: int) -> None:
        add = self.sites.append
        if isinstance(node, ast.Compare):
            for k, op in enumerate(node.ops):
                if type(op) in _COMPARE:
                    add((here, "compare", f"{k}", line))
        elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _ARITH:
            add((here, "arith", "", line))
        elif isinstance(node, ast.BoolOp):
            add((here, "bool", "swap", line))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            add((here, "bool", "not", line))
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            add((here, "constant", "negate", line))
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            add((here, "constant", "+1", line))
            add((here, "constant", "-1", line))
        elif isinstance(node, ast.Constant) and type(node.value) is str and node.value and not self._docstring(node):
            add((here, "constant", "empty", line))
        elif isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            add((here, "return", "None", line))
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.For, ast.While, ast.If, ast.With)):
            body = node.body
            if len(body) > 1:
                for k, stmt in enumerate(body):
                    if not self._docstring_stmt(stmt):
                        add((here, "statement", f"{k}", getattr(stmt, "lineno", line)))

    @staticmethod
    def _docstring_stmt(stmt: ast.stmt) -> bool:
        return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)

    @staticmethod
    def _docstring(node: ast.Constant) -> bool:
        return getattr(node, "_docstring", False)


def _mark_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                first.value._docstring = True  # type: ignore[attr-defined]


def _apply(tree: ast.Module, site: tuple[int, str, str, int]) -> tuple[ast.Module, str] | None:
    """A copy of ``tree`` with the mutation at ``site``, and its description."""
    index, operator, what, line = site
    mutated = copy.deepcopy(tree)
    node = next(n for n in ast.walk(mutated) if getattr(n, "_mutant_index", None) == index)
    if operator == "compare":
        k = int(what)
        old = type(node.ops[k])
        node.ops[k] = _COMPARE[old]()
        text = f"{_SYMBOL[old]} -> {_SYMBOL[_COMPARE[old]]}"
    elif operator == "arith":
        old = type(node.op)
        node.op = _ARITH[old]()
        text = f"{_SYMBOL[old]} -> {_SYMBOL[_ARITH[old]]}"
    elif operator == "bool" and what == "swap":
        old = type(node.op)
        node.op = ast.Or() if old is ast.And else ast.And()
        text = f"{_SYMBOL[old]} -> {'or' if old is ast.And else 'and'}"
    elif operator == "bool":
        return _replace(mutated, node, node.operand), "not dropped"
    elif operator == "constant" and what == "negate":
        text = f"{node.value} -> {not node.value}"
        node.value = not node.value
    elif operator == "constant" and what in ("+1", "-1"):
        new = node.value + (1 if what == "+1" else -1)
        text = f"{node.value} -> {new}"
        node.value = new
    elif operator == "constant":
        text = f"{node.value[:20]!r} -> ''"
        node.value = ""
    elif operator == "return":
        node.value = ast.Constant(None)
        text = "returns None"
    else:  # statement
        k = int(what)
        dropped = node.body[k]
        node.body[k] = ast.copy_location(ast.Pass(), dropped)
        text = f"statement dropped: {ast.unparse(dropped).splitlines()[0][:60]}"
    return mutated, text


def _replace(tree: ast.Module, old: ast.AST, new: ast.AST) -> ast.Module:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return tree
            if isinstance(value, list) and any(v is old for v in value):
                setattr(parent, field, [new if v is old else v for v in value])
                return tree
    return tree


def _spread(items: list, limit: int) -> list:
    """At most ``limit`` of ``items``, evenly spaced (the same ones every time)."""
    if limit <= 0 or len(items) <= limit:
        return items
    step = len(items) / limit
    return [items[int(k * step)] for k in range(limit)]


def python_mutants(program: str, limit: int = 30, only: str | None = None) -> list[Mutant]:
    """Mutants of a Python program; ``only``: inside the function or class of that name
    alone (the entry point: helpers a prompt gives are the task's, whatever the program
    does with them). Imports and annotations are never changed. ``limit`` at most, in a
    fixed order."""
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    _mark_docstrings(tree)
    sites = _Sites(only)
    sites.visit(tree)
    baseline = ast.unparse(tree)
    out: list[Mutant] = []
    seen = {baseline}
    for site in _spread(sites.sites, limit * 2):
        try:
            applied = _apply(tree, site)
            if applied is None:
                continue
            mutated, text = applied
            source = ast.unparse(ast.fix_missing_locations(mutated))
            compile(source, "mutant", "exec")
        except (SyntaxError, ValueError, TypeError, RecursionError):
            continue
        if source in seen:
            continue
        seen.add(source)
        out.append(Mutant(site[1], f"line {site[3]}: {text}", site[3], source))
    return _spread(out, limit)


_TOKEN = re.compile(r"""("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`|//[^\n]*|/\*.*?\*/)
                        |(?P<op><=|>=|===|!==|==|!=|&&|\|\||\+\+|--|<<|>>|[<>+\-*/%])
                        |(?P<num>\b\d+\b)""", re.S | re.X)
_TEXT_SWAP = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "===": "!==", "!==": "===",
              "&&": "||", "||": "&&", "+": "-", "-": "+", "*": "/", "/": "*", "%": "/", "++": "--", "--": "++"}


def text_mutants(program: str, language: str, limit: int = 30) -> list[Mutant]:
    """Mutants of a JavaScript or C++ program on its source text: an operator swapped or an
    integer literal off by one, outside strings and comments (``#include`` lines and
    template brackets are left alone). Some do not compile; the audit drops those it runs."""
    sites: list[tuple[int, int, str, str]] = []
    for match in _TOKEN.finditer(program):
        line_start = program.rfind("\n", 0, match.start()) + 1
        line = program[line_start:program.find("\n", match.start()) if "\n" in program[match.start():] else None]
        if line.lstrip().startswith("#"):
            continue
        if match.group("op") and match.group("op") in _TEXT_SWAP:
            op = match.group("op")
            if op in "<>" and language == "cpp" and re.search(r"\w\s*$", program[line_start:match.start()]) and \
                    re.match(r"\s*[A-Za-z_:]", program[match.end():]) and "template" in line:
                continue
            sites.append((match.start(), match.end(), _TEXT_SWAP[op], f"{op} -> {_TEXT_SWAP[op]}"))
        elif match.group("num"):
            n = int(match.group("num"))
            sites.append((match.start(), match.end(), str(n + 1), f"{n} -> {n + 1}"))
            if n > 0:
                sites.append((match.start(), match.end(), str(n - 1), f"{n} -> {n - 1}"))
    out = []
    for start, end, new, text in _spread(sites, limit):
        line = program.count("\n", 0, start) + 1
        operator = "constant" if new.lstrip("-").isdigit() else "compare" if any(c in new for c in "<>=!") else \
            "bool" if new in ("&&", "||") else "arith"
        out.append(Mutant(operator, f"line {line}: {text}", line, program[:start] + new + program[end:]))
    return out


def mutants(program: str, language: str, limit: int = 30, only: str | None = None) -> list[Mutant]:
    """The mutants of a reference in its language (none for a language without a mutator)."""
    if language == "python":
        return python_mutants(program, limit, only)
    if language in ("javascript", "cpp"):
        return text_mutants(program, language, limit)
    return []
