"""JavaScript and C++ literal expressions read as Python values, for
:mod:`~grpo_code.tasks.native_asserts` (assert statements turned into ``call`` tests).

:func:`tokenize` and :class:`Parser` read an expression into small tuples; :func:`value`
evaluates the literal ones: numbers (C++ suffixes, hex, octal, C-style casts, arithmetic
such as ``2.0/3.0`` with C++'s integer division, JavaScript's ``**`` and its doubles past
2**53), strings and chars with escapes (adjacent C++ strings joined, ``+`` between
strings), ``true/false/null/undefined``, arrays, JavaScript object literals, C++ braced
lists, ``std::vector<T>({...})``, ``std::string("...")``, ``std::make_tuple(...)``,
``std::map<K, V>({...})``, ``std::optional``/``std::nullopt``. Anything else raises
:class:`Unconvertible`, so a caller never guesses a value. :func:`typed` reads an expected
value as a C++ return type would (``1`` for ``bool`` is ``true``; a list of pairs for a
``map`` is a map).
"""

from __future__ import annotations

import re
from typing import Any


class Unconvertible(Exception):
    """A statement or literal outside the recognised shapes: the test stays a script."""


# --------------------------------------------------------------------------- tokens

_NUMBER = re.compile(r"(?:0[xX][0-9a-fA-F']+|0[bB][01']+|(?:\d[\d']*\.?[\d']*|\.\d[\d']*)(?:[eE][+-]?\d+)?)"
                     r"[uUlLfF]*")
_IDENT = re.compile(r"[A-Za-z_$][\w$]*(?:\s*::\s*[A-Za-z_]\w*)*")
_PUNCT = ("===", "!==", "==", "!=", "<=", ">=", "&&", "||", "=>", "::", "**", "<", ">", "+", "-", "*", "/", "%", "!",
          "(", ")", "[", "]", "{", "}", ",", ":", ".", ";", "=", "?")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "b": "\b", "f": "\f", "v": "\v", "a": "\a", "\\": "\\",
            "'": "'", '"': '"', "?": "?", "/": "/", "`": "`"}


def strip_comments(code: str) -> str:
    """The code with // and /* */ comments blanked, strings kept."""
    out, i, n = [], 0, len(code)
    while i < n:
        c = code[i]
        if c in "'\"`":
            j = i + 1
            while j < n and code[j] != c:
                j += 2 if code[j] == "\\" else 1
            out.append(code[i:j + 1])
            i = j + 1
        elif code.startswith("//", i):
            j = code.find("\n", i)
            i = n if j < 0 else j
        elif code.startswith("/*", i):
            j = code.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _read_string(code: str, i: int, quote: str, lang: str) -> tuple[str, int]:
    out, j = [], i + 1
    while True:
        if j >= len(code) or code[j] == "\n" and quote != "`":
            raise Unconvertible("unterminated string")
        c = code[j]
        if c == quote:
            return "".join(out), j + 1
        if quote == "`" and code.startswith("${", j):
            raise Unconvertible("template literal with substitutions")
        if c != "\\":
            out.append(c)
            j += 1
            continue
        e = code[j + 1:j + 2]
        if e == "x":
            out.append(chr(int(code[j + 2:j + 4], 16)))
            j += 4
        elif e == "u" and code[j + 2:j + 3] == "{":
            end = code.index("}", j)
            out.append(chr(int(code[j + 3:end], 16)))
            j = end + 1
        elif e == "u":
            out.append(chr(int(code[j + 2:j + 6], 16)))
            j += 6
        elif lang == "cpp" and e.isdigit() and e not in "89":
            m = re.match(r"[0-7]{1,3}", code[j + 1:])
            assert m is not None
            out.append(chr(int(m.group(), 8)))
            j += 1 + len(m.group())
        elif e == "\n":
            j += 2
        elif e in _ESCAPES:
            out.append(_ESCAPES[e])
            j += 2
        else:
            raise Unconvertible(f"unknown escape \\{e}")


def tokenize(code: str, lang: str) -> list[tuple[str, Any]]:
    """(kind, value) tokens: num, str, chr, id, op, end."""
    out: list[tuple[str, Any]] = []
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c.isspace():
            i += 1
            continue
        if c == '"' or (c in "'`" and lang == "javascript"):
            text, i = _read_string(code, i, c, lang)
            if out and out[-1][0] == "str" and lang == "cpp":  # "a" "b" is one literal in C++
                out[-1] = ("str", out[-1][1] + text)
            else:
                out.append(("str", text))
            continue
        if c == "'":
            text, i = _read_string(code, i, c, lang)
            if len(text) != 1:
                raise Unconvertible("a char literal of more than one character")
            out.append(("chr", text))
            continue
        m = _NUMBER.match(code, i) if (c.isdigit() or (c == "." and code[i + 1:i + 2].isdigit())) else None
        if m:
            out.append(("num", _number(m.group(), lang)))
            i = m.end()
            continue
        m = _IDENT.match(code, i)
        if m:
            out.append(("id", re.sub(r"\s+", "", m.group())))
            i = m.end()
            continue
        for p in _PUNCT:
            if code.startswith(p, i):
                out.append(("op", p))
                i += len(p)
                break
        else:
            raise Unconvertible(f"unexpected character {c!r}")
    out.append(("end", None))
    return out


def _number(text: str, lang: str) -> int | float:
    text = text.replace("'", "")
    if lang == "cpp" and not text.lower().startswith("0x"):
        text = text.rstrip("uUlLfF")
    else:
        text = text.rstrip("uUlL") if lang == "cpp" else text
    low = text.lower()
    if low.startswith("0x"):
        return int(low, 16)
    if low.startswith("0b"):
        return int(low[2:], 2)
    if any(ch in low for ch in ".e"):
        return float(text)
    if lang == "cpp" and len(text) > 1 and text.startswith("0"):
        return int(text, 8)
    if lang == "javascript" and abs(int(text)) > 2**53:
        return float(text)  # a JavaScript number: the literal's double, as the test compares it
    return int(text)


# --------------------------------------------------------------------------- expressions

_TEMPLATES = frozenset("vector map unordered_map set unordered_set tuple pair optional array list deque "
                       "basic_string function".split())
_CAST_TYPES = frozenset("int long short unsigned signed float double char bool size_t int64_t int32_t uint64_t "
                        "uint32_t string".split())


def bare(name: str) -> str:
    return name.split("::")[-1]


class Parser:
    """Recursive descent over tokens into small tuples: ("lit", v), ("id", name),
    ("call", callee, args), ("member", obj, name), ("bin", op, l, r), ("un", op, x),
    ("list", items), ("obj", pairs), ("cast", type, x), ("type", name)."""

    def __init__(self, tokens: list[tuple[str, Any]], lang: str):
        self.t, self.i, self.lang = tokens, 0, lang

    def peek(self, k: int = 0) -> tuple[str, Any]:
        return self.t[min(self.i + k, len(self.t) - 1)]

    def take(self) -> tuple[str, Any]:
        tok = self.t[self.i]
        self.i += 1
        return tok

    def expect(self, op: str) -> None:
        if self.take() != ("op", op):
            raise Unconvertible(f"expected {op!r}")

    def at(self, *ops: str) -> bool:
        kind, value = self.peek()
        return kind == "op" and value in ops

    def whole(self) -> tuple:
        node = self.expr()
        if self.peek()[0] != "end":
            raise Unconvertible("trailing tokens")
        return node

    def expr(self) -> tuple:
        node = self.binary(0)
        if self.at("&&", "||", "?", "="):
            raise Unconvertible("compound condition")
        return node

    _LEVELS = (("==", "===", "!=", "!=="), ("<", "<=", ">", ">="), ("+", "-"), ("*", "/", "%"), ("**",))

    def binary(self, level: int) -> tuple:
        if level == len(self._LEVELS):
            return self.unary()
        node = self.binary(level + 1)
        while self.at(*self._LEVELS[level]):
            op = self.take()[1]
            node = ("bin", op, node, self.binary(level + 1))
        return node

    def unary(self) -> tuple:
        if self.at("-", "+", "!") or self.peek() == ("id", "not"):
            op = self.take()[1]
            return ("un", "!" if op == "not" else op, self.unary())
        if self.at("(") and self.lang == "cpp":
            to = self._cast()
            if to is not None:
                return ("cast", to, self.unary())
        return self.postfix(self.primary())

    def _cast(self) -> str | None:
        """A C-style cast ``(type)`` at the cursor (consumed), or None."""
        start = self.i
        self.i += 1
        name = self._type_name()
        if name is not None and self.at(")"):
            self.i += 1
            if self.peek()[0] in ("num", "str", "chr", "id") or self.at("(", "{", "-"):
                return name
        self.i = start
        return None

    def _type_name(self) -> str | None:
        kind, value = self.peek()
        if kind != "id" or (bare(value) not in _CAST_TYPES | _TEMPLATES and "::" not in value):
            return None
        self.i += 1
        words = [value]
        while self.peek()[0] == "id" and self.peek()[1] in ("long", "int", "char", "short", "double"):
            words.append(self.take()[1])
        if self.at("<"):
            words.append(self._template_args())
        return " ".join(words)

    def _template_args(self) -> str:
        depth, parts = 0, []
        while True:
            kind, value = self.take()
            if kind == "end":
                raise Unconvertible("unclosed template arguments")
            parts.append(str(value))
            if (kind, value) == ("op", "<"):
                depth += 1
            elif (kind, value) == ("op", ">"):
                depth -= 1
                if depth == 0:
                    return "".join(parts)

    def primary(self) -> tuple:
        kind, value = self.take()
        if kind in ("num", "str"):
            return ("lit", value)
        if kind == "chr":
            return ("lit", value)
        if kind == "id":
            if value in ("true", "false"):
                return ("lit", value == "true")
            # JavaScript's undefined is no value a call test can expect (the harness refuses
            # a function that returns it), so it stays a name: a test that needs it stays a script
            if value in ("null", "nullptr", "std::nullopt", "nullopt"):
                return ("lit", None)
            if self.lang == "cpp" and bare(value) in _TEMPLATES and self.at("<"):
                return ("type", value + self._template_args())
            return ("id", value)
        if (kind, value) == ("op", "("):
            node = self.expr()
            self.expect(")")
            return node
        if (kind, value) == ("op", "["):
            return ("list", self.items("]"))
        if (kind, value) == ("op", "{"):
            if self.lang == "javascript":
                return self.object()
            return ("list", self.items("}"))
        raise Unconvertible(f"unexpected {value!r}")

    def items(self, close: str) -> list:
        items = []
        while not self.at(close):
            items.append(self.expr())
            if not self.at(close):
                self.expect(",")
        self.take()
        return items

    def object(self) -> tuple:
        pairs = []
        while not self.at("}"):
            kind, key = self.take()
            if kind not in ("id", "str", "num"):
                raise Unconvertible("an object key that is not a name, string or number")
            self.expect(":")
            pairs.append((str(key), self.expr()))
            if not self.at("}"):
                self.expect(",")
        self.take()
        return ("obj", pairs)

    def postfix(self, node: tuple) -> tuple:
        while True:
            if self.at("("):
                self.take()
                node = ("call", node, self.items(")"))
            elif self.at("{") and node[0] in ("type", "id") and self.lang == "cpp":
                self.take()
                node = ("call", node, [("list", self.items("}"))])
            elif self.at(".") and self.peek(1)[0] == "id":
                self.take()
                node = ("member", node, self.take()[1])
            else:
                return node


# --------------------------------------------------------------------------- values


def _arith(op: str, a: Any, b: Any, lang: str) -> Any:
    if op == "+" and type(a) is str and type(b) is str:  # 'abc' + 'de', std::string("a") + "b"
        return a + b
    if type(a) not in (int, float) or type(b) not in (int, float):
        raise Unconvertible("arithmetic on something that is not a number")
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "**" and lang == "javascript" and type(b) is int and 0 <= b <= 64:
        return a ** b
    if op == "/":
        if b == 0:
            raise Unconvertible("division by zero")
        if lang == "cpp" and type(a) is int and type(b) is int:
            q = abs(a) // abs(b)
            return q if (a >= 0) == (b >= 0) else -q
        return a / b
    raise Unconvertible(f"operator {op}")


def value(node: tuple, lang: str, names: dict[str, Any]) -> Any:
    """The Python value of a literal expression (raises :class:`Unconvertible`)."""
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "list":
        return [value(x, lang, names) for x in node[1]]
    if kind == "obj":
        return {k: value(v, lang, names) for k, v in node[1]}
    if kind == "un":
        inner = value(node[2], lang, names)
        if node[1] == "!" or type(inner) not in (int, float):
            raise Unconvertible("a unary operator on something that is not a number")
        return -inner if node[1] == "-" else inner
    if kind == "bin" and node[1] in ("+", "-", "*", "/", "**"):
        return _arith(node[1], value(node[2], lang, names), value(node[3], lang, names), lang)
    if kind == "id" and node[1] in names:
        return names[node[1]]
    if kind == "cast":
        return cast(node[1], value(node[2], lang, names))
    if kind == "call" and node[1][0] in ("type", "id") and lang == "cpp":
        return _construct(node[1][1], [value(a, lang, names) for a in node[2]])
    raise Unconvertible(f"not a literal: {kind}")


def cast(type_name: str, v: Any) -> Any:
    base = bare(type_name.split("<")[0].split()[0])
    if base in ("float", "double"):
        if type(v) not in (int, float):
            raise Unconvertible("a float cast of something that is not a number")
        return float(v)
    if base in ("int", "long", "short", "unsigned", "signed", "size_t", "int64_t", "int32_t", "uint64_t", "uint32_t"):
        if type(v) is float:
            return int(v)
        if type(v) is not int:
            raise Unconvertible("an integer cast of something that is not a number")
        return v
    if base == "char" and type(v) is int and 0 <= v < 128:
        return chr(v)
    if base == "bool":
        return bool(v)
    if base == "map" or base == "unordered_map":
        return _as_map(v)
    return v


def _construct(name: str, args: list[Any]) -> Any:
    """``std::vector<T>({...})``, ``std::string("...")``, ``std::make_tuple(...)`` and the like."""
    base = bare(name.split("<")[0])
    if base in ("make_tuple", "make_pair", "tuple", "pair"):
        return list(args)
    if base in ("map", "unordered_map"):
        return _as_map(args[0] if args else [])
    if base in ("vector", "set", "unordered_set", "list", "deque", "array"):
        if not args:
            return []
        if len(args) == 1 and type(args[0]) is list:
            return args[0]
        raise Unconvertible(f"{base} built from {len(args)} arguments")
    if base in ("string", "optional") and len(args) == 1:
        return args[0]
    if base == "string" and not args:
        return ""
    raise Unconvertible(f"call of {name}")


def _as_map(v: Any) -> dict:
    if type(v) is dict:
        return v
    if type(v) is not list or not all(type(p) is list and len(p) == 2 for p in v):
        raise Unconvertible("a map that is not a list of pairs")
    try:
        return {k: x for k, x in v}
    except TypeError:
        raise Unconvertible("a map key that is not a plain value") from None


def typed(v: Any, return_type: str | None) -> Any:
    """The expected value as the C++ function's return type reads it."""
    if not return_type:
        return v
    base = bare(re.sub(r"\b(const|static|inline)\b|[&\s]", "", return_type).split("<")[0])
    if base == "bool" and type(v) is int and v in (0, 1):
        return bool(v)
    if base in ("map", "unordered_map"):
        return _as_map(v)
    if base == "char" and type(v) is int and 0 <= v < 128:
        return chr(v)
    return v
