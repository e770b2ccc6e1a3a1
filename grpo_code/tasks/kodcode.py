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
``helpers``, trusted code the judge runs before each test, from ``pytest_shims.py``):
``pytest.raises`` (as a context manager, with ``match``, or called with a function),
``pytest.approx``, ``pytest.fail``, ``pytest.mark.parametrize`` (each parameter set called
in turn), other marks (ignored), the module's own fixtures and ``capsys``. Every ``from
solution import`` (at the top or inside a function) binds the program's names as pytest
would. A test that takes another builtin fixture (``tmp_path``, ``monkeypatch``, ...), a
parametrized fixture, or a module that uses ``solution`` as a module object cannot be run
so: the record is unreadable, with the reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from grpo_code.tasks.records import Record, RecordError, convert_each, first_key
from grpo_code.tasks.schema import char_column

SHIMS = (Path(__file__).with_name("pytest_shims.py")).read_text()
PYTEST_HELPERS = (
    "def _pytest_shims(source):\n"
    "    import builtins\n"
    "    shims = {'__builtins__': builtins, '__name__': 'pytest_shims'}\n"
    "    builtins.exec(builtins.compile(source, '<pytest shims>', 'exec'), shims)\n"
    "    return shims['pytest'], shims['_run_test'], shims['_from_solution']\n"
    "\n"
    f"pytest, __run_test__, __from_solution__ = _pytest_shims({SHIMS!r})\n"
    "del _pytest_shims\n"
)
"""What the tests take from pytest (``pytest_shims.py``), run by the judge before each test
(``Task.helpers``) in a namespace of its own: nothing the test imports from the program
runs inside ``raises`` or ``approx``."""

def _collect(module: str, where: str, declared: tuple[str, ...] = ()) -> list[Record]:
    tree = _parse(module, where)
    drop: set[int] = set()
    replaced: dict[int, str] = {}
    names: list[str] = []
    needed: dict[str, list[str]] = {}
    fixtures: dict[str, list[str]] = {}
    lines = module.splitlines()
    for node in ast.walk(tree):  # inside a test function too: pytest runs those imports as well
        if isinstance(node, ast.ImportFrom) and node.module == "solution" and node.level == 0:
            line = lines[node.lineno - 1]
            if line[:node.col_offset].strip() or line[_end_col(line, node):].strip().strip(";").strip():
                raise RecordError(where, f"line {node.lineno}: a solution import shares its line with other code",
                                  "put `from solution import ...` on a line of its own")
            drop.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
            indent = line[:node.col_offset]
            if any(a.name == "*" for a in node.names):
                replaced[node.lineno] = f"{indent}__from_solution__(globals(), None, {tuple(declared)!r})"
            else:
                bound = {a.asname or a.name: a.name for a in node.names}
                replaced[node.lineno] = f"{indent}__from_solution__(globals(), {bound!r})"
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "solution" and node.level == 0:
            continue
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
            args = [a.arg for a in node.args.args + node.args.kwonlyargs]
            params = {n for d in node.decorator_list for n in _parametrized(d)}
            needed[node.name] = [a for a in args if a not in params]
            names.append(node.name)
        elif isinstance(node, ast.FunctionDef) and any(_is_fixture(d) for d in node.decorator_list):
            for d in node.decorator_list:
                if isinstance(d, ast.Call) and any(k.arg == "params" for k in d.keywords):
                    raise RecordError(where, f"fixture {node.name} is parametrized (params=)",
                                      "parametrized fixtures cannot be run without pytest")
            fixtures[_fixture_name(node)] = [a.arg for a in node.args.args + node.args.kwonlyargs]
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            raise RecordError(where, f"test class {node.name}", "only test functions are collected")
    if not names:
        raise RecordError(where, "no test_* functions", "remove the record")
    for owner, wanted in [*needed.items(), *fixtures.items()]:
        missing = [a for a in wanted if a not in fixtures and a not in GIVEN_FIXTURES]
        if missing:
            raise RecordError(where, f"{owner} takes fixtures ({', '.join(missing)})",
                              f"only the module's own fixtures and {', '.join(GIVEN_FIXTURES)} are given without pytest")
    body = "\n".join(replaced.get(i, "") if i in drop else line for i, line in enumerate(lines, 1)).rstrip() + "\n"
    # The runner's names are dunders: no program name can be one (the judge leaves them out),
    # so no import from the program replaces what runs the test.
    return [{"kind": "script", "code": f"{body}\n__run_test__({name})\n"} for name in names]


def _end_col(line: str, node: ast.AST) -> int:
    """A node's end column as a character index (the parser counts UTF-8 bytes)."""
    if node.end_lineno != node.lineno:
        return len(line)
    return char_column(line, node.end_col_offset)


GIVEN_FIXTURES = ("capsys", "capfd")
"""pytest's own fixtures a test may take here (what the program printed during the test)."""


def _is_fixture(decorator: ast.expr) -> bool:
    """``@pytest.fixture`` or ``@pytest.fixture(...)``."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr == "fixture"


def _fixture_name(node: ast.FunctionDef) -> str:
    for d in node.decorator_list:
        if isinstance(d, ast.Call) and _is_fixture(d):
            for k in d.keywords:
                if k.arg == "name" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str):
                    return k.value.value
    return node.name


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
