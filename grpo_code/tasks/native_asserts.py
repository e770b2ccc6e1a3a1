"""HumanEval-X / MultiPL-E asserts (JavaScript, C++) turned into ``call`` tests.

A JavaScript or C++ ``script`` test runs its asserts inside the program's process, where
a program can forge the harness's report: its result is unattested, and an unattested
pass is not a pass for the reward (docs/rewards.md). Nearly every assert of these suites
has the shape ``f(literal args) == literal``; as a ``call`` test the program's process
gets only the arguments and returns a value that the executor compares outside it, so
the pass rests on nothing the program can reach. :func:`call_tests` does the conversion
for one test's code; the humaneval adapter keeps the test as one ``script`` test when
any statement of it does not convert (a loop, a helper call, random inputs), so nothing
is dropped and nothing is guessed.

Recognised statements (``f`` is the entry point or ``candidate`` bound to it):

- JavaScript: ``console.assert(f(A) === E)`` (``==`` only where ``E`` is a string: loose
  equality of numbers, or of ``null`` with a returned ``undefined``, is not a value
  comparison; ``undefined`` is no expected value),
  ``console.assert(JSON.stringify(f(A)) === JSON.stringify(E))``,
  ``console.assert(Math.abs(f(A) - E) < TOL)``,
  ``assert.deepEqual / deepStrictEqual / equal / strictEqual(f(A), E)``; the test function
  that holds them (``const testF = () => {...}`` or ``function test() {...}``) and its call,
  ``const assert = require('node:assert')`` and ``let candidate = f``.
- C++: in ``int main()``: ``assert (f(A) == E);``, ``assert (issame(f(A), E));`` (the test's
  own comparison helper, whose ``abs(a[i]-b[i])>1e-4`` gives a tolerance),
  ``assert (abs(f(A) - E) < TOL);`` (``fabs``, ``std::abs`` too; ``abs(f(A) + 1)`` means
  -1), ``assert (f(A));`` and
  ``assert (!f(A));`` for a ``bool`` function, ``auto candidate = f;``, local variables
  initialised with literals, ``return 0;``; ``#undef NDEBUG`` and ``#include`` lines.

Literals are read by :mod:`~grpo_code.tasks.literals`. The C++ function's declared
return type (from the prompt) types the expected value: ``bool`` for 0/1, a ``map`` for a
list of pairs. Floats stay as written: the C++ harness writes a ``float`` in its shortest
round-trip form, so ``3.1f`` returned compares equal to the literal ``3.1``.
"""

from __future__ import annotations

import re
from typing import Any

from grpo_code.sandbox.values import suite_tree
from grpo_code.tasks.literals import Parser, Unconvertible, bare, cast, strip_comments, tokenize, typed, value

# --------------------------------------------------------------------------- statements


def _split(code: str, lang: str) -> list[str]:
    """Top-level statements: split at ``;`` outside brackets and, in JavaScript, at line
    ends outside brackets (automatic semicolons); a braced block closes a statement."""
    out, depth, cur, i = [], 0, [], 0
    text = code
    while i < len(text):
        c = text[i]
        if c in "'\"`":
            j = i + 1
            while j < len(text) and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            cur.append(text[i:j + 1])
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        cur.append(c)
        if depth == 0 and (c == ";" or (c == "}" and _block_closes(text, i)) or (c == "\n" and lang == "javascript")):
            stmt = "".join(cur).strip().rstrip(";").strip()
            if stmt:
                out.append(stmt)
            cur = []
        i += 1
    rest = "".join(cur).strip().rstrip(";").strip()
    if rest:
        out.append(rest)
    if depth != 0:
        raise Unconvertible("unbalanced brackets")
    return out


def _block_closes(text: str, i: int) -> bool:
    """A ``}`` at depth 0 ends a function body unless an expression goes on (``)``, ``,``)."""
    nxt = text[i + 1:].lstrip()
    return not nxt or nxt[0] not in "),;.]"


_JS_FUNCTION = re.compile(r"^(?:(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:async\s*)?\(\s*\)\s*=>|"
                          r"(?:async\s+)?function\s+([A-Za-z_$][\w$]*)\s*\(\s*\))\s*\{(.*)\}$", re.S)
_JS_REQUIRE = re.compile(r"^(?:const|let|var)\s+assert\s*=\s*require\(\s*['\"](?:node:)?assert(?:/strict)?['\"]\s*\)$")
_JS_ALIAS = re.compile(r"^(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*([A-Za-z_$][\w$]*)$")
_JS_BINDING = re.compile(r"^(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*(.+)$", re.S)
_CPP_FUNCTION = re.compile(r"^([\w:<>,\s\*&]+?)\b([A-Za-z_]\w*)\s*\(([^()]*)\)\s*(?:const\s*)?\{(.*)\}$", re.S)
_CPP_ALIAS = re.compile(r"^auto\s+([A-Za-z_]\w*)\s*=\s*&?\s*([A-Za-z_]\w*)$")
_CPP_BINDING = re.compile(r"^(?:const\s+)?([\w:]+(?:\s*<.*>)?)(?:\s+|\s*&\s*|(?<=>))([A-Za-z_]\w*)\s*"
                          r"(?:=\s*(.+)|(\{.*\})|\((.*)\))$", re.S)
_CPP_TOLERANCE = re.compile(r"\babs\s*\([^;]*\)\s*>=?\s*([0-9.]+(?:[eE][+-]?\d+)?)")


class _Test:
    """What one test's statements turn into, in order."""

    def __init__(self, lang: str, entry: str, return_type: str | None):
        self.lang, self.entry, self.return_type = lang, entry, return_type
        self.aliases = {entry}
        self.names: dict[str, Any] = {}
        self.helpers: dict[str, dict[str, Any]] = {}
        self.calls: list[dict[str, Any]] = []

    def target(self, node: tuple) -> list[Any] | None:
        """The arguments when ``node`` calls the function under test."""
        if node[0] == "call" and node[1][0] == "id" and node[1][1] in self.aliases:
            return [value(a, self.lang, self.names) for a in node[2]]
        return None

    def add(self, args: list[Any], expected: Any, **options: Any) -> None:
        if self.lang == "cpp":
            expected = typed(expected, self.return_type)
        test = {"kind": "call", "fn": self.entry, "args": [suite_tree(a) for a in args],
                "expected": suite_tree(expected)}
        self.calls.append({**test, **{k: v for k, v in options.items() if v is not None}})

    def compare(self, a: tuple, b: tuple, **options: Any) -> bool:
        for call, other in ((a, b), (b, a)):
            args = self.target(call)
            if args is not None:
                self.add(args, value(other, self.lang, self.names), **options)
                return True
        return False

    def condition(self, node: tuple) -> None:
        """One asserted condition."""
        if node[0] == "bin" and node[1] in ("==", "==="):
            a, b = node[2], node[3]
            if self.lang == "javascript" and all(_is_call(x, "JSON.stringify", 1) for x in (a, b)):
                a, b = a[2][0], b[2][0]
            elif self.lang == "javascript" and node[1] == "==" and not _literal_of(b, (str,)):
                # Loose equality converts: `f(x) == 6` holds for a returned "6.00" (HumanEval-X
                # JavaScript/71), and `f(x) == null` for a returned undefined, which no value
                # comparison repeats (the harness refuses undefined). Only strings compare
                # alike both ways.
                raise Unconvertible("loose == with a number, boolean, null or object")
            if self.compare(a, b):
                return
        if node[0] == "bin" and node[1] in ("<", "<="):
            inner = node[2]
            if _is_call(inner, ("Math.abs", "abs", "fabs", "std::abs", "std::fabs"), 1) and inner[2][0][0] == "bin" \
                    and inner[2][0][1] in ("-", "+"):
                tol = value(node[3], self.lang, self.names)
                a, b = inner[2][0][2], inner[2][0][3]
                if inner[2][0][1] == "+":  # abs(f(x) + 1) < tol: f(x) is -1
                    a, b = a, ("un", "-", b)
                if type(tol) in (int, float) and tol > 0 and self.compare(a, b, abs_tol=float(tol)):
                    return
        if node[0] == "call" and node[1][0] == "id" and node[1][1] in self.helpers and len(node[2]) == 2:
            if self.compare(node[2][0], node[2][1], **self.helpers[node[1][1]]):
                return
        if self.lang == "cpp" and bare(re.sub(r"\s", "", self.return_type or "")) == "bool":
            negated = node[0] == "un" and node[1] == "!"
            args = self.target(node[2] if negated else node)
            if args is not None:
                self.add(args, not negated)
                return
        raise Unconvertible("an assert of another shape")

    def statement(self, text: str) -> None:
        node = Parser(tokenize(text, self.lang), self.lang).whole()
        if node[0] != "call":
            raise Unconvertible("a statement that is not a call")
        callee, args = node[1], node[2]
        name = callee[1] if callee[0] == "id" else _dotted(callee)
        if name in ("assert", "console.assert") and len(args) >= 1:
            if self.lang == "javascript" and name == "assert" and len(args) != 1:
                raise Unconvertible("assert with a message")
            self.condition(args[0])
            return
        if self.lang == "javascript" and name in ("assert.deepEqual", "assert.deepStrictEqual", "assert.equal",
                                                  "assert.strictEqual") and len(args) in (2, 3):
            if self.compare(args[0], args[1]):
                return
        raise Unconvertible(f"a call of {name}")


def _dotted(node: tuple) -> str:
    if node[0] == "id":
        return node[1]
    if node[0] == "member":
        return _dotted(node[1]) + "." + node[2]
    raise Unconvertible("a callee that is not a name")


def _literal_of(node: tuple, types: tuple[type, ...]) -> bool:
    return node[0] == "lit" and isinstance(node[1], types) and not isinstance(node[1], bool)


def _is_call(node: tuple, names: str | tuple[str, ...], nargs: int) -> bool:
    names = (names,) if isinstance(names, str) else names
    if node[0] != "call" or len(node[2]) != nargs:
        return False
    try:
        return _dotted(node[1]) in names
    except Unconvertible:
        return False


def _js(code: str, test: _Test) -> None:
    functions: dict[str, list[str]] = {}
    for stmt in _split(code, "javascript"):
        m = _JS_FUNCTION.match(stmt)
        if m:
            functions[m.group(1) or m.group(2)] = _split(m.group(3), "javascript")
            continue
        if _JS_REQUIRE.match(stmt):
            continue
        call = re.fullmatch(r"([A-Za-z_$][\w$]*)\s*\(\s*\)", stmt)
        body = functions.pop(call.group(1), None) if call else None
        for line in body if body is not None else [stmt]:
            _js_statement(line, test)
    if functions:  # a test function that is never called tests nothing: keep it as written
        raise Unconvertible("a test function that is not called")


def _js_statement(stmt: str, test: _Test) -> None:
    alias = _JS_ALIAS.match(stmt)
    if alias and alias.group(2) in test.aliases:
        test.aliases.add(alias.group(1))
        return
    binding = _JS_BINDING.match(stmt)
    if binding:
        test.names[binding.group(1)] = value(Parser(tokenize(binding.group(2), "javascript"), "javascript").whole(),
                                             "javascript", test.names)
        return
    test.statement(stmt)


def _cpp(code: str, test: _Test) -> None:
    lines = [ln for ln in code.split("\n") if not re.match(r"\s*#\s*(undef\s+NDEBUG|include\b)", ln)]
    if any(ln.lstrip().startswith("#") for ln in lines):
        raise Unconvertible("a preprocessor directive")
    main = None
    for stmt in _split("\n".join(lines), "cpp"):
        if re.fullmatch(r"using\s+namespace\s+std", stmt):
            continue
        m = _CPP_FUNCTION.match(stmt)
        if not m:
            raise Unconvertible("a top-level declaration that is not a function")
        name, body = m.group(2), m.group(4)
        if name == "main":
            main = body
            _cpp_main(body, test)  # with the helpers declared so far, as the compiler sees them
        elif re.match(r"\s*bool\b", m.group(1)) and _arity(m.group(3)) == 2 and re.search(r"(?i)same|equal", name):
            # A comparison helper (HumanEval-X's issame): its tolerance and order carry over.
            # Known by its name: a bool function of two values may compare them otherwise.
            tol = _CPP_TOLERANCE.search(body)
            test.helpers[name] = {"abs_tol": float(tol.group(1)) if tol else None,
                                  "unordered": True if re.search(r"\bsort\s*\(", body) else None}
    if main is None:
        raise Unconvertible("no main")


def _arity(params: str) -> int:
    """How many parameters a C++ parameter list declares (commas inside <...> do not count)."""
    while re.search(r"<[^<>]*>", params):
        params = re.sub(r"<[^<>]*>", "", params)
    return params.count(",") + 1 if params.strip() else 0


def _cpp_main(main: str, test: _Test) -> None:
    for stmt in _split(main, "cpp"):
        alias = _CPP_ALIAS.match(stmt)
        if alias and alias.group(2) in test.aliases:
            test.aliases.add(alias.group(1))
            continue
        if re.fullmatch(r"return\s+0", stmt):
            continue
        binding = _CPP_BINDING.match(stmt)
        if binding and binding.group(1) not in ("return", "assert"):
            text = next(g for g in binding.groups()[2:] if g is not None)
            v = value(Parser(tokenize(text, "cpp"), "cpp").whole(), "cpp", test.names)
            test.names[binding.group(2)] = cast(binding.group(1), v)
            continue
        test.statement(stmt)


def return_type(prompt: str, entry: str) -> str | None:
    """The declared return type of C++ function ``entry`` in ``prompt`` (its last declaration)."""
    found = None
    for m in re.finditer(r"^[ \t]*((?:[\w:]+(?:<[^;(){}]*>)?[\s\*&]+)+?)" + re.escape(entry) + r"\s*\(", prompt, re.M):
        found = m.group(1).strip()
    return found


def call_tests(language: str, code: str, entry: str | None, prompt: str = "") -> list[dict[str, Any]] | None:
    """The ``call`` tests equivalent to a HumanEval-X / MultiPL-E test, or None when any
    statement of it is of another shape (it stays one ``script`` test)."""
    if not entry or language not in ("javascript", "cpp"):
        return None
    test = _Test(language, entry, return_type(prompt, entry) if language == "cpp" else None)
    try:
        text = strip_comments(code)
        (_js if language == "javascript" else _cpp)(text, test)
    except (Unconvertible, ValueError, IndexError, KeyError, RecursionError):
        return None
    return test.calls or None
