"""A Python call-test suite in another language, the way MultiPL-E translates HumanEval:
the tests stay data (the same ``call`` tests, judged outside the program's process in
every language), the prompt becomes the language's own.

* ``complete`` tasks (HumanEval, HumanEval+: a signature with type hints and a docstring)
  get a stub in the language: the docstring as a comment, a typed signature where the
  language is typed (Python's ``List[float]`` is Go's ``[]float64``, Rust's ``Vec<f64>``,
  Java's ``ArrayList<Double>``, TypeScript's ``number[]``, C++'s ``std::vector<double>``), the
  body left open for the model.
* ``instruct`` tasks (the demo, MBPP: a statement naming the function) name the language
  instead of Python and show the signature the tests call.

A task is skipped, with the reason, when a type has no translation (an untyped parameter in
a typed language, ``Any``, a ``Union``, a tuple in Java), when it has tests that are not
``call`` tests (a Python ``script`` test cannot run in another language), or when the
language takes no call tests (Bash). Tuples become lists and sets compare as sets (the
``value`` comparison); ``compare: python`` tests (evalplus's float rule) keep their
tolerances. The expected values are the Python suite's, as MultiPL-E's are.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from pathlib import Path
from typing import Any

from grpo_code.sandbox.languages import CALL_TESTS, FACTS
from grpo_code.tasks.schema import Task

Type = tuple  # ("int",), ("list", T), ("tuple", T, ...), ("dict", K, V), ("optional", T), ("set", T)


class Untranslatable(Exception):
    """A task that has no translation into the language; the message says why."""


@dataclasses.dataclass(frozen=True)
class Signature:
    name: str
    params: tuple[tuple[str, Type | None], ...]
    returns: Type | None
    doc: str


_NAMES = {"int": ("int",), "float": ("float",), "str": ("str",), "bool": ("bool",), "None": ("none",)}


def _type(node: ast.expr | None) -> Type | None:
    """A Python annotation as a type tree (None: no annotation)."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and node.value is None:
        return ("none",)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _type(ast.parse(node.value, mode="eval").body)
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.Name) and node.id in ("list", "List", "tuple", "Tuple", "dict", "Dict", "set", "Set"):
        bare = node.id.lower()
        return ("list", None) if bare == "list" else ("set", None) if bare == "set" else \
            ("dict", None, None) if bare == "dict" else None  # the items come from the tests' values
    if isinstance(node, ast.Subscript) and isinstance(node.value, (ast.Name, ast.Attribute)):
        outer = node.value.id if isinstance(node.value, ast.Name) else node.value.attr
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if outer in ("List", "list", "Sequence", "Iterable"):
            return ("list", _type(items[0]))
        if outer in ("Set", "set", "FrozenSet", "frozenset"):
            return ("set", _type(items[0]))
        if outer in ("Tuple", "tuple"):
            if len(items) == 2 and isinstance(items[1], ast.Constant) and items[1].value is Ellipsis:
                return ("list", _type(items[0]))
            return ("tuple", *(_type(i) for i in items))
        if outer in ("Dict", "dict", "Mapping"):
            return ("dict", _type(items[0]), _type(items[1]))
        if outer == "Optional":
            return ("optional", _type(items[0]))
    raise Untranslatable(f"the type `{ast.unparse(node)}` has no translation")


def signature(prompt: str, entry: str) -> Signature:
    """The entry point's signature and docstring in a Python prompt."""
    try:
        tree = ast.parse(prompt + "\n    pass\n" if prompt.rstrip().endswith(":") or '"""' in prompt else prompt)
    except SyntaxError:
        try:
            tree = ast.parse(prompt)
        except SyntaxError as exc:
            raise Untranslatable(f"the prompt does not parse as Python ({exc.msg})") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == entry:
            args = node.args
            if args.vararg or args.kwarg or args.kwonlyargs:
                raise Untranslatable("a signature with *args, **kwargs or keyword-only parameters")
            params = tuple((a.arg, _type(a.annotation)) for a in [*args.posonlyargs, *args.args])
            return Signature(entry, params, _type(node.returns), ast.get_docstring(node) or "")
    raise Untranslatable(f"the prompt defines no function {entry!r}")


# --------------------------------------------------------------------------- types per language
# Each typed language: a function of a type tree (``_t_<language>``); None for an untyped
# language. No table keyed by language names (tests/test_layout.py).


def _t_go(t: Type) -> str:
    kind = t[0]
    simple = {"int": "int", "float": "float64", "str": "string", "bool": "bool"}
    if kind in simple:
        return simple[kind]
    if kind in ("list", "set"):
        return "[]" + _t_go(t[1])
    if kind == "tuple":
        return "[]" + _t_go(t[1]) if len(set(t[1:])) == 1 else "[]interface{}"
    if kind == "dict":
        return f"map[{_t_go(t[1])}]{_t_go(t[2])}"
    if kind == "optional":
        return "*" + _t_go(t[1])
    raise Untranslatable(f"{kind} has no Go type")


def _t_rust(t: Type) -> str:
    kind = t[0]
    simple = {"int": "i64", "float": "f64", "str": "String", "bool": "bool", "none": "()"}
    if kind in simple:
        return simple[kind]
    if kind == "list":
        return f"Vec<{_t_rust(t[1])}>"
    if kind == "set":
        return f"HashSet<{_t_rust(t[1])}>"
    if kind == "tuple":
        return "(" + ", ".join(_t_rust(x) for x in t[1:]) + ("," if len(t) == 2 else "") + ")"
    if kind == "dict":
        return f"HashMap<{_t_rust(t[1])}, {_t_rust(t[2])}>"
    if kind == "optional":
        return f"Option<{_t_rust(t[1])}>"
    raise Untranslatable(f"{kind} has no Rust type")


def _t_java(t: Type, boxed: bool = False) -> str:
    kind = t[0]
    simple = {"int": ("long", "Long"), "float": ("double", "Double"), "str": ("String", "String"),
              "bool": ("boolean", "Boolean")}
    if kind in simple:
        return simple[kind][boxed]
    if kind == "list":
        return f"ArrayList<{_t_java(t[1], True)}>"
    if kind == "set":
        return f"HashSet<{_t_java(t[1], True)}>"
    if kind == "dict":
        return f"HashMap<{_t_java(t[1], True)}, {_t_java(t[2], True)}>"
    if kind == "optional":
        return f"Optional<{_t_java(t[1], True)}>"
    if kind == "none":
        return "void"
    raise Untranslatable(f"{kind} has no Java type (a tuple would need a class of its own)")


def _t_typescript(t: Type) -> str:
    kind = t[0]
    simple = {"int": "number", "float": "number", "str": "string", "bool": "boolean", "none": "void"}
    if kind in simple:
        return simple[kind]
    if kind in ("list", "set"):
        return _t_typescript(t[1]) + "[]"
    if kind == "tuple":
        return "[" + ", ".join(_t_typescript(x) for x in t[1:]) + "]"
    if kind == "dict":
        return f"{{[key: string]: {_t_typescript(t[2])}}}"
    if kind == "optional":
        return f"{_t_typescript(t[1])} | undefined"
    raise Untranslatable(f"{kind} has no TypeScript type")


def _t_cpp(t: Type) -> str:
    kind = t[0]
    simple = {"int": "long", "float": "double", "str": "std::string", "bool": "bool", "none": "void"}
    if kind in simple:
        return simple[kind]
    if kind == "list":
        return f"std::vector<{_t_cpp(t[1])}>"
    if kind == "set":
        return f"std::set<{_t_cpp(t[1])}>"
    if kind == "tuple":
        return "std::tuple<" + ", ".join(_t_cpp(x) for x in t[1:]) + ">"
    if kind == "dict":
        return f"std::map<{_t_cpp(t[1])}, {_t_cpp(t[2])}>"
    if kind == "optional":
        return f"std::optional<{_t_cpp(t[1])}>"
    raise Untranslatable(f"{kind} has no C++ type")


# --------------------------------------------------------------------------- types from values


def _join(a: Type | None, b: Type | None) -> Type | None:
    """One type for two values' types (None: not known yet)."""
    if a is None or a == b:
        return b if a is None else a
    if b is None:
        return a
    if {a[0], b[0]} == {"int", "float"}:
        return ("float",)
    if a[0] == "none":
        return b if b[0] == "optional" else ("optional", b)
    if b[0] == "none":
        return _join(b, a)
    if a[0] == "optional" or b[0] == "optional":
        inner = _join(a[1] if a[0] == "optional" else a, b[1] if b[0] == "optional" else b)
        return ("optional", inner)
    if a[0] == b[0] and len(a) == len(b):
        return (a[0], *(_join(x, y) for x, y in zip(a[1:], b[1:])))
    raise Untranslatable(f"the tests' values mix {a[0]} and {b[0]}")


def infer(value: Any) -> Type | None:
    """The type of a value in the suite's form (docs/sandbox.md, Values)."""
    if value is None:
        return ("none",)
    if isinstance(value, bool):
        return ("bool",)
    if isinstance(value, int):
        return ("int",)
    if isinstance(value, float):
        return ("float",)
    if isinstance(value, str):
        return ("str",)
    if isinstance(value, list):
        return ("list", _join_all(infer(v) for v in value))
    if isinstance(value, dict) and len(value) == 1:
        tag, body = next(iter(value.items()))
        if tag == "$t" and isinstance(body, list):
            return ("tuple", *(infer(v) for v in body))
        if tag in ("$s", "$f") and isinstance(body, list):
            return ("set", _join_all(infer(v) for v in body))
        if tag == "$d" and isinstance(body, list):
            return ("dict", _join_all(infer(k) for k, _ in body), _join_all(infer(v) for _, v in body))
        if tag == "$i":
            return ("int",)
        if tag.startswith("$"):
            raise Untranslatable(f"a value tagged {tag} has no translation")
    if isinstance(value, dict):
        return ("dict", ("str",) if value else None, _join_all(infer(v) for v in value.values()))
    raise Untranslatable(f"a {type(value).__name__} value has no translation")


def _join_all(types) -> Type | None:
    out = None
    for t in types:
        out = _join(out, t)
    return out


def _fill(hint: Type | None, seen: Type | None) -> Type | None:
    """The hint, with what it leaves open (``list`` without item types) from the values."""
    if hint is None:
        return seen
    if seen is None or seen[0] != hint[0] or len(seen) != len(hint):
        if hint[0] == "tuple" and seen is not None and seen[0] == "list":  # a tuple of one type as a list
            return hint
        return hint if all(part is not None for part in hint[1:]) else seen
    return (hint[0], *(_fill(h, v) for h, v in zip(hint[1:], seen[1:])))


def _complete(t: Type | None) -> bool:
    return t is not None and all(_complete(p) for p in t[1:])


def typed(language: str, t: Type | None, what: str) -> str:
    convert = globals().get(f"_t_{language}")
    if not _complete(t):
        raise Untranslatable(f"the type of {what} is neither hinted nor shown by the tests' values "
                             f"({FACTS[language].display} needs it)")
    return convert(t)


# --------------------------------------------------------------------------- stubs per language


def _comment(doc: str, mark: str) -> str:
    return "".join(f"{mark} {line}".rstrip() + "\n" for line in doc.strip().splitlines()) if doc.strip() else ""


def _stub_go(s: Signature) -> str:
    params = ", ".join(f"{n} {typed('go', t, n)}" for n, t in s.params)
    returns = "" if s.returns in (None, ("none",)) else " " + typed("go", s.returns, "the result")
    return f"package main\n\n{_comment(s.doc, '//')}func {s.name}({params}){returns} {{\n"


def _stub_rust(s: Signature) -> str:
    params = ", ".join(f"{n}: {typed('rust', t, n)}" for n, t in s.params)
    returns = "" if s.returns in (None, ("none",)) else " -> " + typed("rust", s.returns, "the result")
    head = "use std::collections::{HashMap, HashSet};\n\n"
    return f"{head}{_comment(s.doc, '///')}fn {s.name}({params}){returns} {{\n"


def _stub_java(s: Signature) -> str:
    params = ", ".join(f"{typed('java', t, n)} {n}" for n, t in s.params)
    returns = "void" if s.returns in (None, ("none",)) else typed("java", s.returns, "the result")
    doc = _comment(s.doc, "    //")
    return f"import java.util.*;\n\nclass Problem {{\n{doc}    public static {returns} {s.name}({params}) {{\n"


def _stub_typescript(s: Signature) -> str:
    params = ", ".join(f"{n}: {typed('typescript', t, n)}" for n, t in s.params)
    returns = typed("typescript", s.returns, "the result") if s.returns is not None else "void"
    return f"{_comment(s.doc, '//')}function {s.name}({params}): {returns} {{\n"


def _stub_cpp(s: Signature) -> str:
    params = ", ".join(f"{typed('cpp', t, n)} {n}" for n, t in s.params)
    returns = typed("cpp", s.returns, "the result") if s.returns is not None else "void"
    return f"#include <bits/stdc++.h>\n\n{_comment(s.doc, '//')}{returns} {s.name}({params}) {{\n"


def _stub_javascript(s: Signature) -> str:
    return f"{_comment(s.doc, '//')}function {s.name}({', '.join(n for n, _ in s.params)}) {{\n"


def _stub_ruby(s: Signature) -> str:
    return f"{_comment(s.doc, '#')}def {s.name}({', '.join(n for n, _ in s.params)})\n"


def _stub_php(s: Signature) -> str:
    return f"<?php\n{_comment(s.doc, '//')}function {s.name}({', '.join('$' + n for n, _ in s.params)}) {{\n"


def _stub_perl(s: Signature) -> str:
    return f"{_comment(s.doc, '#')}sub {s.name} {{\n    my ({', '.join('$' + n for n, _ in s.params)}) = @_;\n"


def _stub_lua(s: Signature) -> str:
    return f"{_comment(s.doc, '--')}function {s.name}({', '.join(n for n, _ in s.params)})\n"


def _stub_r(s: Signature) -> str:
    return f"{_comment(s.doc, '#')}{s.name} <- function({', '.join(n for n, _ in s.params)}) {{\n"


def _stub_racket(s: Signature) -> str:
    return f"#lang racket\n\n{_comment(s.doc, ';;')}(define ({s.name} {' '.join(n for n, _ in s.params)})\n"


def _mentions(t: Type | None, kinds: tuple[str, ...]) -> bool:
    return t is not None and (t[0] in kinds or any(_mentions(p, kinds) for p in t[1:]))


# What a language's values cannot say, which would make a right answer fail: such tasks are
# skipped rather than judged wrong.


def _limits_perl(s: Signature) -> None:
    if any(_mentions(t, ("bool",)) for t in (s.returns, *(t for _, t in s.params))):
        raise Untranslatable("Perl has no booleans (1 and the empty string are not true and false)")


def _limits_r(s: Signature) -> None:
    if _mentions(s.returns, ("list", "tuple", "set")) or s.returns is None:
        raise Untranslatable("R cannot tell a one-element vector from its element (a returned sequence)")


def _limits_lua(s: Signature) -> None:
    if _mentions(s.returns, ("dict",)):
        raise Untranslatable("Lua cannot tell an empty table that is a dict from an empty list")


def _limits_php(s: Signature) -> None:
    if _mentions(s.returns, ("dict",)):
        raise Untranslatable("PHP cannot tell an empty array that is a dict from an empty list")
    if s.name.lower() in _builtins("php"):
        raise Untranslatable(f"{s.name} is a PHP function, which a program cannot declare again")


def _limits_cpp(s: Signature) -> None:
    if s.name in _builtins("cpp"):
        raise Untranslatable(f"{s.name} is a C library function the call harness cannot tell from the program's")


@functools.cache
def _builtins(language: str) -> frozenset[str]:
    """The functions the language already declares (``<language>_functions.txt``; PHP's in lower case)."""
    text = (Path(__file__).parent / f"{language}_functions.txt").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def stub(language: str, sig: Signature) -> str:
    """The code prefix a model completes: the docstring as a comment and the signature."""
    make = globals().get(f"_stub_{language}")
    if make is None:
        raise Untranslatable(f"no stub for {language}")
    return make(sig)


# --------------------------------------------------------------------------- tasks

_PYTHON_WORDS = re.compile(r"\bPython( 3)?\b")


_BIG = 1 << 62
"""The suite writes integers from here on as ``{"$i": hex}``: a task whose values reach it is
skipped, but in Ruby and Racket, whose harnesses read and report integers of any size."""
_exact_ints_javascript = _exact_ints_typescript = _exact_ints_r = 1 << 53
_exact_ints_ruby = _exact_ints_racket = None
_INT_WORDS = {_BIG: "64-bit integers", 1 << 53: "numbers as 64-bit floating point"}


def _widest_int(value: Any) -> int:
    """The largest magnitude of an integer in a value of the suite's form (0: none)."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return abs(value)
    if isinstance(value, dict):
        if set(value) == {"$i"} and isinstance(value["$i"], str):
            return abs(int(value["$i"], 16))
        return max((_widest_int(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max((_widest_int(v) for v in value), default=0)
    return 0


def translate(task: Task, language: str) -> Task:
    """``task`` (Python, call tests) in ``language``; :class:`Untranslatable` says why not."""
    if language not in FACTS or language == "python":
        raise Untranslatable(f"{language!r} is not a language to translate into")
    if language not in CALL_TESTS:
        raise Untranslatable(f"{FACTS[language].display} takes no call tests")
    if task.language != "python":
        raise Untranslatable(f"the task is in {task.language}, not Python")
    if not task.entry_point:
        raise Untranslatable("the task names no entry point")
    if any(t.kind != "call" for t in task.tests):
        raise Untranslatable("tests other than call tests (script tests are Python code)")
    if task.checkers or task.helpers or task.prelude:
        raise Untranslatable("Python checkers, helpers or a prelude")
    if any(not t.has_expected for t in task.tests):
        raise Untranslatable("tests without expected values (resolve them from the Python reference first)")
    exact = globals().get(f"_exact_ints_{language}", _BIG)  # None: integers of any size
    for what, limit, values in (("arguments", exact, [v for t in task.tests for v in t.args]),
                                ("expected values", exact, [t.expected for t in task.tests])):
        if limit is not None and max(map(_widest_int, values), default=0) >= limit:
            raise Untranslatable(f"integers of 2**{limit.bit_length() - 1} or more in the tests' {what} "
                                 f"({FACTS[language].display}'s call harness reads {_INT_WORDS.get(limit)})")
    sig = signature(task.prompt if task.mode == "complete" else (task.reference or ""), task.entry_point)
    try:
        sig = _with_values(sig, [t for t in task.tests if t.fn == task.entry_point])
    except Untranslatable:
        if globals().get(f"_t_{language}") is not None:  # a typed language needs the types
            raise
    prefix = stub(language, sig)  # raises for a type without a translation
    limit = globals().get(f"_limits_{language}")
    if limit is not None:
        limit(sig)
    if task.mode == "complete":
        prompt = prefix
    else:
        display = FACTS[language].display
        prompt = _PYTHON_WORDS.sub(display, task.prompt)
        if display not in prompt:
            prompt += f"\n\nWrite it in {display}."
        prompt += f"\n\nThe function's signature:\n\n{prefix.rstrip().rstrip('{(').rstrip()}"
    tests = tuple(_as_value(t) for t in task.tests)
    public = tuple(_as_value(t) for t in task.public_tests if t.kind == "call")
    metadata = {**task.metadata, "translated_from": task.id, "translated_to": language}
    return dataclasses.replace(task, prompt=prompt, language=language, tests=tests, public_tests=public,
                               reference=None, metadata=metadata)


def _with_values(sig: Signature, tests: list[Any]) -> Signature:
    """The signature with the types the hints leave open taken from the tests' values."""
    if not tests:
        return sig
    if any(len(t.args) != len(sig.params) for t in tests):
        raise Untranslatable("tests that call the function with another number of arguments")
    params = tuple((name, _fill(hint, _join_all(infer(t.args[i]) for t in tests)))
                   for i, (name, hint) in enumerate(sig.params))
    return dataclasses.replace(sig, params=params, returns=_fill(sig.returns, _join_all(infer(t.expected) for t in tests)))


def _as_value(test: Any) -> Any:
    """A call test compared as values (a tuple is a list in every other language); a
    ``python`` comparison keeps evalplus's float rule as explicit tolerances."""
    if getattr(test, "compare", None) != "python":
        return test
    if test.float_tol is None and test.abs_tol is None and test.rel_tol is None:
        return dataclasses.replace(test, compare="value", abs_tol=1e-6, rel_tol=1e-7)
    return dataclasses.replace(test, compare="value")


def translate_all(tasks: list[Task], language: str) -> tuple[list[Task], list[tuple[str, str]]]:
    """Every task that translates, and (id, reason) for each that does not."""
    done, skipped = [], []
    for task in tasks:
        try:
            done.append(translate(task, language))
        except Untranslatable as exc:
            skipped.append((task.id, str(exc)))
    return done, skipped
