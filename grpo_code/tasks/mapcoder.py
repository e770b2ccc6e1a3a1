"""Call arguments in MapCoder's APPS selection: one argument per line, written with ``str()``.

Used by the ``apps`` adapter (:mod:`grpo_code.tasks.contests`) for MapCoder's records
(``test_list`` of ``{input, output}``, the function in ``starter_code``). A line is read
as a Python literal when ``str()`` of that literal gives the line back (``12``, ``True``,
``[1, 2]``), else as a string (``apple``, ``'quoted'``); a function of one parameter takes
the whole input. ``str()`` of a string keeps its newlines, so an input with more lines
than parameters holds a string argument with newlines: :func:`call_args` gives those lines
to the one parameter that can take them, the one whose neighbours all read as non-string
literals (numbers, lists, booleans: their ``str()`` is one line). Where no parameter, or
more than one, fits, the input is ambiguous and the record cannot be read.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from grpo_code.tasks.records import RecordError

DEF = re.compile(r"^[ \t]*def\s+([A-Za-z_]\w*)\s*\((.*?)\)\s*(?:->[^:]*)?:", re.M | re.S)
_NOT_STRINGS = re.compile(r"(?:int|float|bool|complex|list|tuple|dict|set|List|Tuple|Dict|Set)\b")
_AMBIGUOUS_HINT = ("the lines of this input cannot be assigned to the parameters soundly; "
                   "leave the record out with --skip-invalid")


@dataclass(frozen=True)
class Starter:
    """The function a starter code defines (for ``class Solution``: its first method,
    ``self`` not counted). ``not_strings``: positions of parameters annotated with a type
    that is not ``str`` (``int``, ``List[int]``...)."""

    name: str
    method: bool
    params: tuple[str, ...]
    required: int
    varargs: bool
    not_strings: frozenset[int] = frozenset()

    @property
    def total(self) -> int:
        return len(self.params)


def starter_function(starter: str, where: str) -> Starter:
    method = bool(re.search(r"^\s*class\s+Solution\b", starter, re.M))
    for match in DEF.finditer(starter):
        name, params = match.groups()
        if name.startswith("__"):
            continue
        try:
            fn = ast.parse(f"def _f({params}): pass").body[0]
        except SyntaxError:
            raise RecordError(f"{where}: starter_code", f"cannot read the parameters of {name}()") from None
        positional = fn.args.posonlyargs + fn.args.args
        if method and positional:
            positional = positional[1:]
        not_strings = frozenset(j for j, arg in enumerate(positional) if arg.annotation is not None
                                and _NOT_STRINGS.match(ast.unparse(arg.annotation)))
        return Starter(name, method, tuple(a.arg for a in positional), len(positional) - len(fn.args.defaults),
                       fn.args.vararg is not None, not_strings)
    raise RecordError(f"{where}: starter_code", "defines no function")


def _value(text: str) -> Any:
    try:
        parsed = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text
    if str(parsed) == text or (isinstance(parsed, (list, tuple, dict)) and text.strip()[:1] in "[({"):
        return parsed  # containers may have been written by hand, without str()'s spacing
    return text


def call_args(text: str, fn: Starter, where: str) -> list:
    """The argument list one MapCoder input line block gives ``fn``."""
    if fn.total == 0 and not fn.varargs:
        return []
    if fn.total == 1 and not fn.varargs:
        return [_value(text)]  # one argument: a string argument may hold newlines
    lines = text.split("\n")
    if fn.varargs or fn.required <= len(lines) <= fn.total:
        return [_value(line) for line in lines]
    if len(lines) < fn.required:
        raise RecordError(where, f"{len(lines)} lines for a function of {fn.required} required parameters",
                          _AMBIGUOUS_HINT)
    # More lines than parameters: one string argument holds the extra newlines. Parameter j
    # can be it when every line the others take reads as a non-string literal.
    span = len(lines) - fn.total + 1
    fits: dict[str, list] = {}
    for j, param in enumerate(fn.params):
        if j in fn.not_strings:
            continue
        before, after = [_value(line) for line in lines[:j]], [_value(line) for line in lines[j + span:]]
        if not any(isinstance(v, str) for v in before + after):
            fits[param] = [*before, "\n".join(lines[j:j + span]), *after]
    if len(fits) == 1:
        return next(iter(fits.values()))
    which = (" or ".join(f"`{p}`" for p in fits) + " could each take them" if fits else
             "whichever parameter takes them, another one's line reads as a string too")
    raise RecordError(where, f"{len(lines)} lines for a function of {fn.total} parameters: a string argument "
                      f"holds newlines, and {which}, so which lines are whose cannot be told", _AMBIGUOUS_HINT)
