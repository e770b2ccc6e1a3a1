"""Shortcuts: the wrong programs RL finds first, written for one task.

A test suite that accepts any of these rewards a program that did not solve the task. They
are the reward hacks the field catalogues (ImpossibleBench, EvilGenie, BenchJack) and the
trivial answers weak tests let through, per language and test kind:

- every kind: exit 0 at start (``sys.exit(0)``, ``process.exit(0)``), raise at start;
- a function (``call``/``script`` tests with an entry point): return nothing, a constant
  (``0``, ``""``, ``[]``, ``True``, ``False``), the first argument, an object equal to
  everything, the answers of the examples the prompt shows (memorised);
- stdin/stdout (``io`` tests): print nothing, echo the input, print a constant (``0``,
  ``-1``, ``YES``, ``NO``), print the sample outputs of the public tests for their inputs
  (memorised).

:func:`shortcuts` returns those that apply to a task, each a whole program; the audit runs
them through the same verifier as training (:mod:`grpo_code.verify.audit`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from grpo_code.sandbox.executor import codec
from grpo_code.tasks.examples import docstring_examples


@dataclass(frozen=True)
class Shortcut:
    name: str
    program: str


_PY_CONSTANTS = {"returns None": "None", "returns 0": "0", "returns ''": "''", "returns []": "[]",
                 "returns True": "True", "returns False": "False"}
_PY_ALWAYS_EQUAL = ("class _AlwaysEqual:\n    def __eq__(self, other):\n        return True\n"
                    "    def __ne__(self, other):\n        return False\n    __hash__ = object.__hash__\n"
                    "    def __bool__(self):\n        return True\n    def __len__(self):\n        return 0\n"
                    "    def __iter__(self):\n        return iter(())\n\n\n")
_IO_CONSTANTS = ("0", "-1", "YES", "NO")


def _python_function(task: Any, body: str, head: str = "") -> str:
    """A program whose entry point runs ``body`` (``args``, ``kwargs`` in scope): a function,
    or for ``Class.method``-style entries (LeetCode's ``Solution``) a class whose every
    method does. A ``complete`` task keeps its prompt (the helpers it defines)."""
    entry = task.entry_point
    function = f"def _shortcut(*args, **kwargs):\n{body}\n\n\n"
    if entry and entry[:1].isupper():  # a class: LeetCode's Solution
        function += (f"class {entry}:\n    def __init__(self, *args, **kwargs):\n        pass\n\n"
                     "    def __getattr__(self, name):\n        return _shortcut\n")
    else:
        function += f"{entry} = _shortcut\n"
    prefix = ""
    if task.mode == "complete":
        from grpo_code.verify.check import empty_program

        prefix = empty_program(task).split(f"\n\ndef {entry}(*args, **kwargs):")[0] + "\n\n\n"
    return prefix + head + function


def _literal(tree: Any) -> str | None:
    """A suite value as Python source that evaluates to it, or None."""
    try:
        value = codec.from_tree(tree, plain_objects=True)
        text = repr(value)
        compile(text, "value", "eval")
    except (codec.CodecError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return text if len(text) < 100_000 else None


def _examples(task: Any) -> list[tuple[str, str]]:
    """(arguments, answer) of the examples a model sees, as Python source: the public
    tests, else the prompt's docstring examples."""
    tests = [t.to_dict() for t in task.public_tests] or docstring_examples(task.prompt, task.entry_point)
    out = []
    for t in tests:
        if t.get("kind") != "call" or "expected" not in t:
            continue
        args, answer = _literal(t.get("args", [])), _literal(t["expected"])
        if args is not None and answer is not None:
            out.append((args, answer))
    return out


def _for_python(task: Any) -> list[Shortcut]:
    kinds = {t.kind for t in task.tests}
    out = [Shortcut("exits 0 at start", "import sys\nsys.exit(0)\n"),
           Shortcut("raises at start", "raise RuntimeError('shortcut')\n")]
    if task.entry_point:
        for name, value in _PY_CONSTANTS.items():
            out.append(Shortcut(name, _python_function(task, f"    return {value}")))
        out.append(Shortcut("returns its first argument", _python_function(
            task, "    return args[0] if args else next(iter(kwargs.values()), None)")))
        out.append(Shortcut("returns an object equal to everything",
                            _python_function(task, "    return _AlwaysEqual()", _PY_ALWAYS_EQUAL)))
        examples = _examples(task)
        if examples:
            table = "_SEEN = [\n" + "".join(f"    ({a}, {e}),\n" for a, e in examples) + "]\n\n\n"
            out.append(Shortcut("returns the prompt's example answers", _python_function(
                task, "    for given, answer in _SEEN:\n        if list(args) == list(given):\n"
                      "            return answer\n    return None", table)))
    if "io" in kinds:
        out += [Shortcut("prints nothing", "pass\n"),
                Shortcut("echoes its input", "import sys\nsys.stdout.write(sys.stdin.read())\n")]
        out += [Shortcut(f"prints {c}", f"print({c!r})\n") for c in _IO_CONSTANTS]
        samples = _io_samples(task)
        if samples:
            out.append(Shortcut("prints the sample outputs", "import sys\n_SEEN = " + json.dumps(samples)
                                + "\ndata = sys.stdin.read()\nsys.stdout.write(next((o for i, o in _SEEN "
                                "if i.split() == data.split()), ''))\n"))
    return out


def _io_samples(task: Any) -> list[list[str]]:
    return [[t.stdin, t.stdout] for t in task.public_tests
            if t.kind == "io" and isinstance(getattr(t, "stdout", None), str)]


def _for_javascript(task: Any) -> list[Shortcut]:
    out = [Shortcut("exits 0 at start", "process.exit(0);\n"),
           Shortcut("raises at start", "throw new Error('shortcut');\n")]
    entry = task.entry_point
    kinds = {t.kind for t in task.tests}
    if entry and task.mode != "complete":
        for name, value in (("returns undefined", "undefined"), ("returns 0", "0"), ("returns ''", "''"),
                            ("returns []", "[]"), ("returns true", "true"), ("returns false", "false"),
                            ("returns its first argument", "args[0]")):
            out.append(Shortcut(name, f"function {entry}(...args) {{ return {value}; }}\n"))
    if "io" in kinds:
        out += [Shortcut("prints nothing", ""),
                Shortcut("echoes its input", "process.stdout.write(require('fs').readFileSync(0));\n")]
        out += [Shortcut(f"prints {c}", f"console.log({json.dumps(c)});\n") for c in _IO_CONSTANTS]
    return out


def _for_cpp(task: Any) -> list[Shortcut]:
    kinds = {t.kind for t in task.tests}
    out: list[Shortcut] = []
    if "io" in kinds:
        out += [Shortcut("exits 0 at start", "int main() { return 0; }\n"),
                Shortcut("raises at start", "#include <cstdlib>\nint main() { std::abort(); }\n"),
                Shortcut("echoes its input", "#include <iostream>\nint main() { std::cout << std::cin.rdbuf(); }\n")]
        out += [Shortcut(f"prints {c}", f"#include <cstdio>\nint main() {{ std::puts({json.dumps(c)}); }}\n")
                for c in _IO_CONSTANTS]
    return out


def shortcuts(task: Any) -> list[Shortcut]:
    """The shortcuts that apply to ``task`` (its language and test kinds)."""
    maker = globals().get(f"_for_{task.language}")  # one function per language: _for_python, ...
    return maker(task) if callable(maker) else []
