"""Judged C++ script tests: the two translation units, one with the program and one with the test.

A C++ script test (HumanEval-X / MultiPL-E: code with ``int main()`` and ``assert``) used
to be compiled into the program's binary, where the program could reach the report's
nonce. When the job carries the task's declarations (``helpers``: the prompt's headers,
helper functions and the prototype of the function under test), the cpp runner builds
instead:

* the **server** (:func:`serve_unit`): the program, its own ``main`` renamed, and
  ``harness/cpp_serve.hpp``, which answers calls of the functions the tests name on fd 3,
  decoding arguments into the program's own parameter types;
* the **judge** (:func:`judge_unit`): the declarations, ``harness/cpp_judge.hpp``, a
  stand-in definition per program function with the *prototype's* signature (types come
  from the task, never from the program's text), the tests and ``harness/cpp.hpp``'s
  ``main``. No program code is in it.

:func:`plan` decides whether a job's script tests can be judged so: every function the
tests call that the declarations declare but do not define gets a stand-in. A job
without declarations (or a test that calls none) keeps the in-process path, unattested.
Standard library only (copied into every image with the executor).
"""

from __future__ import annotations

import os
import re

HARNESS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "harness")
_TEXT: dict[str, str] = {}

# Every name of the test: a call, or a function taken by name (MultiPL-E's `auto candidate = f;`).
_CALLED = re.compile(r"\b([A-Za-z_]\w*)\b")
# A prototype at namespace scope: `<return type> name(<parameters>);` on one line.
_PROTOTYPE = re.compile(r"^([^\n;{}#/]*?)\b([A-Za-z_]\w*)\s*\(([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*)\)\s*;", re.M)
_TYPE_WORDS = frozenset(
    "int long short char bool double float unsigned signed void auto const volatile string size_t".split()
)


def harness(name: str) -> str:
    """The text of ``harness/<name>``, read once."""
    if name not in _TEXT:
        with open(os.path.join(HARNESS_DIR, name)) as f:
            _TEXT[name] = f.read()
    return _TEXT[name]


def harness_parts(name: str, marker: str) -> tuple[str, str]:
    """``harness/<name>`` cut at its ``// @@<marker>@@`` line, where generated code goes."""
    head, sep, tail = harness(name).partition(f"\n// @@{marker}@@\n")
    assert sep, f"harness/{name} lost its @@{marker}@@ line"
    return head, tail


def _split_parameters(text: str) -> list[str]:
    """Parameters at the top level of a parameter list (commas inside <>, (), {} stay)."""
    out, depth, cur = [], 0, []
    for c in text:
        if c in "<({[":
            depth += 1
        elif c in ">)}]":
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    out.append("".join(cur))
    return [p.strip() for p in out if p.strip() and p.strip() != "void"]


def _named(parameter: str, i: int) -> str | None:
    """The parameter with its name replaced by ``__grpo_a<i>`` (or one added); None for a
    shape the stand-in cannot take (an array, a default value, a pack)."""
    if any(mark in parameter for mark in ("[", "=", "...")):
        return None
    tokens = list(re.finditer(r"[A-Za-z_]\w*|\S", parameter))
    last = tokens[-1]
    if len(tokens) > 1 and re.fullmatch(r"[A-Za-z_]\w*", last.group()) and last.group() not in _TYPE_WORDS \
            and tokens[-2].group() != ":":
        return parameter[:last.start()] + f"__grpo_a{i}"
    return f"{parameter} __grpo_a{i}"


def plan(helpers: str | None, codes: list[str]) -> tuple[list[str], list[str]] | None:
    """(the program functions the tests call, their stand-in definitions), or None when the
    tests cannot be judged outside the program (no declarations, no declared function the
    tests call, a signature the stand-in cannot copy)."""
    if not helpers:
        return None
    called = {m.group(1) for code in codes for m in _CALLED.finditer(code)}
    fns, stubs = [], []
    for match in _PROTOTYPE.finditer(helpers):
        prefix, name, params = match.group(1), match.group(2), match.group(3)
        if name not in called or name in fns or not prefix.strip():
            continue
        if re.search(rf"\b{re.escape(name)}\s*\([^;{{}}]*\)\s*(?:const\s*)?\{{", helpers):
            continue  # defined by the task itself (a helper): the test calls that one
        named = [_named(p, i) for i, p in enumerate(_split_parameters(params))]
        if any(p is None for p in named):
            return None
        args = "".join(f", __grpo_a{i}" for i in range(len(named)))
        stubs.append(f"{prefix}{name}({', '.join(named)}) {{\n"
                     f"  return __grpo_judge::proxy<decltype(&::{name})>::call({len(fns)}{args});\n}}")
        fns.append(name)
    return (fns, stubs) if fns else None


def serve_unit(program_part: list[str], undefines, head: str, call_head: str, fns: list[str]) -> str:
    """The server: the program (``program_part``: its lines with ``main`` renamed), the
    harness heads and ``cpp_serve.hpp`` with one table entry per function, after
    ``undefines(harness text)`` (so a program's ``#define int long long`` leaves the
    harness alone)."""
    serve_head, serve_tail = harness_parts("cpp_serve.hpp", "serve")
    table = "static std::string (*const __grpo_serve[])(const __grpo_call::node &) = {\n"
    table += "".join(f"  [](const __grpo_call::node &a) {{ return __grpo_call::answer(&::{fn}, a); }},\n"
                     for fn in fns)
    table += f"}};\nstatic const long __grpo_serve_count = {len(fns)};"
    harness = [head, call_head, serve_head, table, serve_tail]
    return "\n".join([*program_part, *undefines("\n".join(harness)), '#line 1 "grpo_harness.hpp"', *harness]) + "\n"


def judge_unit(helpers: str, head: str, call_head: str, tail: str, stubs: list[str], codes: list[str]) -> str:
    """The judge: declarations, harness heads, ``cpp_judge.hpp``, the stand-ins, every
    script test of the job (``main`` renamed, asserts armed) and ``cpp.hpp``'s ``main``
    running test ``argv[1]``. Trusted text only."""
    out = ['#line 1 "declarations.cpp"', helpers, '#line 1 "grpo_harness.hpp"', head, call_head,
           harness("cpp_judge.hpp"), *stubs, '#pragma GCC diagnostic ignored "-Wreturn-type"']
    table = []
    for i, code in enumerate(codes):
        out += ["#undef NDEBUG", "#undef assert", "#include <assert.h>",
                f'#define main __attribute__((optimize("O0"))) __grpo_test_main_{i}', f'#line 1 "test_{i}.cpp"',
                code, "#undef main"]
        table.append(f"  []() -> int {{ return __grpo_invoke(__grpo_test_main_{i}); }},")
    out.append("static int (*const __grpo_tests[])() = {\n" + "\n".join(table) + "\n};\n"
               f"static const long __grpo_test_count = {len(codes)};")
    out += ['#line 1 "grpo_harness.hpp"', tail]
    return "\n".join(out) + "\n"
