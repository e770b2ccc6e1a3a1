"""KodCode: pytest-style test modules, collected here and called by the judge.

KodCode records (``question``, ``solution``, ``test``, ``test_info``, ``style``, ``subset``,
``gpt_difficulty``) test a program with a pytest module: ``from solution import f`` and
``def test_*()`` functions. No test runner runs in the sandbox, so nothing a program does
can make a runner report success (a collection or import error read as "no test failed",
a patched runner). The adapter collects the tests on the host, from the module's syntax
tree: each top-level ``test_*`` function is one ``script`` test made of the module (its
``solution`` imports removed: those names are the program's in the judge) and a call of
that function. A module that fails to import (the program lacks a name, a module-level
statement raises) fails every test; a test that raises fails.

What pytest offers that the tests use is provided by :data:`PYTEST_HELPERS` (the task's
``helpers``, trusted code the judge runs before each test): ``pytest.raises`` (as a
context manager, with ``match``, or called with a function), ``pytest.approx``,
``pytest.fail``, ``pytest.mark.parametrize`` (each parameter set called in turn) and
other marks (ignored). A test that takes fixtures (``capsys``, ``tmp_path``, ...) or a
module that uses ``solution`` as a module object cannot be run so: the record is
unreadable, with the reason.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from grpo_code.tasks.records import Record, RecordError, convert_each, first_key

PYTEST_HELPERS = '''
import re as _re


class _Raises:
    """``pytest.raises``; what ``with ... as excinfo`` gives has pytest's ``value``, ``type``,
    ``typename``, ``tb`` and ``match()``."""

    def __init__(self, expected, match=None):
        self.expected, self._pattern, self.value, self.type, self.typename, self.tb = (
            expected, match, None, None, None, None)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is None:
            raise AssertionError(f"DID NOT RAISE {self.expected}")
        if not _raised_as(kind, value, self.expected):
            return False
        if self._pattern is not None and not _re.search(self._pattern, str(value)):
            raise AssertionError(f"the message {str(value)!r} does not match {self._pattern!r}")
        self.value, self.tb = value, tb
        self.type, self.typename = _raised_type(kind, value, self.expected)
        return True

    def match(self, pattern):
        if not _re.search(pattern, str(self.value)):
            raise AssertionError(f"the message {str(self.value)!r} does not match {pattern!r}")
        return True

    def errisinstance(self, exc):
        return isinstance(self.value, exc)


def _raised_type(kind, value, expected):
    """The raised exception's class and its name, as the test knows them: a builtin the
    program raised is that builtin; a class of the program's is the program's class (the
    test's own name for it where it has one)."""
    own = getattr(value, "program_classes", ())
    name = (own[0] if own else kind.__name__).rpartition(".")[2]
    if not own:
        base = __builtins__.get(name) if isinstance(__builtins__, dict) else getattr(__builtins__, name, None)
        return (base if isinstance(base, type) and issubclass(kind, base) else kind), name
    for candidate in (expected if isinstance(expected, tuple) else (expected,)):
        if not isinstance(candidate, type) and _names_class(candidate, own[0]):
            return candidate, name
    found = globals().get("__program__", {}).get(name)
    return (found if found is not None else kind), name


def _names_class(cls, qualname):
    try:
        wanted = str(cls)  # the program's class, as it writes itself: <class 'module.Name'>
    except Exception:
        return False
    return isinstance(wanted, str) and (wanted == f"<class '{qualname}'>" or wanted.endswith(f".{qualname}'>"))


def _raised_as(kind, value, expected):
    """Whether the exception is one ``expected`` names. A class the program defines (the test
    imports it from the solution) is a stand-in here, and the program's exception arrives as
    its nearest builtin class carrying the names of the program's classes it derives from:
    one must be the expected class's."""
    if isinstance(expected, tuple):
        return any(_raised_as(kind, value, e) for e in expected)
    if isinstance(expected, type):
        return issubclass(kind, expected)
    own = getattr(value, "program_classes", ())
    return any(_names_class(expected, name) for name in own if isinstance(name, str) and name)


class _Approx:
    def __init__(self, expected, rel=None, abs=None):
        self.expected, self.rel, self.abs = expected, 1e-6 if rel is None else rel, 1e-12 if abs is None else abs

    def _close(self, a, b):
        if isinstance(b, (list, tuple)):
            return isinstance(a, (list, tuple)) and len(a) == len(b) and all(self._close(x, y) for x, y in zip(a, b))
        if isinstance(b, dict):
            return isinstance(a, dict) and a.keys() == b.keys() and all(self._close(a[k], b[k]) for k in b)
        if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float, complex)):
            return a == b
        if b != b or abs(b) == float("inf"):  # as pytest: NaN equals nothing, an infinity only itself
            return a == b
        return a == b or abs(a - b) <= max(self.rel * abs(b), self.abs)

    def __eq__(self, other):
        return self._close(other, self.expected)

    def __repr__(self):
        return f"approx({self.expected!r})"


class _Marks:
    def parametrize(self, names, values, **kwargs):
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)

        def mark(fn):
            sets = [dict(zip(names, v if len(names) > 1 else (v,))) for v in values]
            fn.__dict__.setdefault("_parameter_sets", []).append(sets)
            return fn
        return mark

    def __getattr__(self, name):
        return lambda *args, **kwargs: (args[0] if len(args) == 1 and callable(args[0]) and not kwargs
                                        else (lambda fn: fn))


class _Failed(AssertionError):
    pass


class pytest:
    mark = _Marks()

    @staticmethod
    def raises(expected, *args, match=None, **kwargs):
        if args:
            with _Raises(expected, match):
                args[0](*args[1:], **kwargs)
            return None
        return _Raises(expected, match)

    @staticmethod
    def approx(expected, rel=None, abs=None):
        return _Approx(expected, rel, abs)

    @staticmethod
    def fail(reason=""):
        raise _Failed(reason)


def _from_solution(into, names, declared=()):
    """``from solution import ...`` as pytest runs it: the names are the program's, builtins'
    names included (a program's ``sum`` shadows the builtin). ``names`` maps each bound name
    to the program's; None is a star import, which binds the public names, a builtin's name
    only where the task declares it (its ``test_info``): an undeclared ``sorted`` of the
    program never judges its own answers."""
    program = into["__program__"]
    if names is None:
        for name in declared:
            if name in program:
                into[name] = program[name]
        return
    for alias, name in names.items():
        if name not in program:
            raise ImportError(f"cannot import name {name!r} from 'solution'")
        into[alias] = program[name]


def _run_test(fn):
    runs = [{}]
    for sets in fn.__dict__.get("_parameter_sets", []):
        runs = [{**done, **more} for done in runs for more in sets]
    for kwargs in runs:
        fn(**kwargs)
'''
"""What the tests take from pytest, run by the judge before each test (``Task.helpers``)."""

def _collect(module: str, where: str, declared: tuple[str, ...] = ()) -> list[Record]:
    tree = _parse(module, where)
    drop: set[int] = set()
    replaced: dict[int, str] = {}
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "solution" and node.level == 0:
            drop.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
            if any(a.name == "*" for a in node.names):
                replaced[node.lineno] = f"_from_solution(globals(), None, {tuple(declared)!r})"
            else:
                bound = {a.asname or a.name: a.name for a in node.names}
                replaced[node.lineno] = f"_from_solution(globals(), {bound!r})"
        elif isinstance(node, ast.Import) and any(a.name in ("solution", "pytest") for a in node.names):
            if any(a.name == "solution" for a in node.names):
                raise RecordError(where, "imports solution as a module", "only `from solution import ...` is read")
            if len(node.names) > 1:
                raise RecordError(where, "imports pytest with other modules on one line")
            drop.add(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "pytest":
            raise RecordError(where, "imports names from pytest", "only `import pytest` is read")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            if isinstance(node, ast.AsyncFunctionDef):
                raise RecordError(where, f"{node.name} is async")
            declared = [a.arg for a in node.args.args + node.args.kwonlyargs]
            params = {n for d in node.decorator_list for n in _parametrized(d)}
            fixtures = [a for a in declared if a not in params]
            if fixtures:
                raise RecordError(where, f"{node.name} takes fixtures ({', '.join(fixtures)})",
                                  "tests that take pytest fixtures cannot be run without pytest")
            names.append(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            raise RecordError(where, f"test class {node.name}", "only test functions are collected")
    if not names:
        raise RecordError(where, "no test_* functions", "remove the record")
    lines = module.splitlines()
    body = "\n".join(replaced.get(i, "") if i in drop else line for i, line in enumerate(lines, 1)).rstrip() + "\n"
    return [{"kind": "script", "code": f"{body}\n_run_test({name})\n"} for name in names]


def _parse(module: str, where: str) -> ast.Module:
    try:
        return ast.parse(module)
    except SyntaxError as exc:
        raise RecordError(where, f"not Python ({exc.msg}, line {exc.lineno})") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # a NUL byte; nesting the parser cannot hold
        raise RecordError(where, f"cannot be parsed ({type(exc).__name__})", "remove the record") from None


def _parametrized(decorator: ast.expr) -> list[str]:
    """The parameter names a ``pytest.mark.parametrize("a, b", ...)`` decorator gives."""
    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr == "parametrize" and decorator.args):
        return []
    first = decorator.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return [n.strip() for n in first.value.split(",")]
    if isinstance(first, (ast.List, ast.Tuple)):
        return [e.value for e in first.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _declared_names(info: Any) -> tuple[str, ...]:
    """The function names a record's ``test_info`` declares (what a star import must bind
    even where a builtin has the name)."""
    if not isinstance(info, list):
        return ()
    out = []
    for d in info:
        name = d.get("function_name") if isinstance(d, dict) else None
        if not isinstance(name, str) and isinstance(d, dict) and isinstance(d.get("function_declaration"), str):
            found = re.match(r"\s*(?:async\s+)?def\s+([A-Za-z_]\w*)", d["function_declaration"])
            name = found.group(1) if found else None
        if isinstance(name, str) and name.isidentifier() and name not in out:
            out.append(name)
    return tuple(out)


def _declarations(info: Any) -> list[str]:
    if not isinstance(info, list):
        return []
    return [d["function_declaration"].strip() for d in info
            if isinstance(d, dict) and isinstance(d.get("function_declaration"), str)
            and d["function_declaration"].strip()]


def kodcode(records: list[Record], source: str = "kodcode") -> list[Record]:
    """KodCode records as ``instruct`` tasks with one ``script`` test per test function."""

    def one(r: Record, i: int, where: str) -> Record:
        question = r.get("question")
        if not isinstance(question, str) or not question.strip():
            raise RecordError(f"{where}: question", "missing or empty")
        module = r.get("test")
        if not isinstance(module, str):
            raise RecordError(f"{where}: test", "missing, or not the test module's source")
        tests = _collect(module, f"{where}: test", _declared_names(r.get("test_info")))
        imported = sorted({a.name for node in ast.walk(_parse(module, where)) if isinstance(node, ast.ImportFrom)
                           and node.module == "solution" for a in node.names} - {"*"})
        declared = _declarations(r.get("test_info"))
        shown = "\n".join(declared) if declared else ", ".join(f"`{n}`" for n in imported)
        prompt = question.strip()
        if shown:
            prompt += (f"\n\nThe tests call these from your code:\n```python\n{shown}\n```" if declared
                       else f"\n\nThe tests call {shown} from your code.")
        task: Record = {"id": f"kodcode/{r.get('question_id') or r.get('conversation_id') or i}", "prompt": prompt,
                        "language": "python", "mode": "instruct", "tests": tests, "helpers": PYTEST_HELPERS,
                        "metadata": {"source": "kodcode", "split": "train",
                                     **{k: r[k] for k in ("subset", "gpt_difficulty", "style") if r.get(k)}}}
        if len(imported) == 1:
            task["entry_point"] = imported[0]
        if isinstance(r.get("solution"), str) and r["solution"].strip():
            task["reference"] = r["solution"]
        return task

    return convert_each(records, source, one, first_key("question_id", "conversation_id"))
