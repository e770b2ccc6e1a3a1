"""The package's shape: modules import each other without cycles, layers do not reach into
the sandbox's backends, and no module grows past what one can read in a sitting.

Imports are read from the source (every ``import``, also those inside functions: a lazy
import in a cycle is still a cycle, only one that fails later)."""

from __future__ import annotations

import ast
from pathlib import Path

from ast_scans import assigned_attributes

PACKAGE = Path(__file__).resolve().parent.parent / "grpo_code"
MAX_LINES = 500
BACKENDS = {f"grpo_code.sandbox.{m}" for m in
            ("api", "docker_backend", "engine", "local_backend", "ray_backend", "node", "pool", "worker", "image")}
"""The sandbox's backends and what drives them: the rest of the package goes through the
``grpo_code.sandbox`` facade (``Sandbox``), its types and its fingerprint."""


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports (``from pkg import sub`` names the submodule)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                if f"{module}.{alias.name}" in known:
                    found.add(f"{module}.{alias.name}")
                elif module in known:
                    found.add(module)
    found.discard(name)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_inside_the_package() -> None:
    found = cycles(graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def packages(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph between the package's top-level parts (``grpo_code.tasks``,
    ``grpo_code.verify``, a module such as ``grpo_code.train``): a part imports another when
    any of its modules imports any of the other's."""
    def part(name: str) -> str:
        return ".".join(name.split(".")[:2])

    out: dict[str, set[str]] = {part(name): set() for name in edges}
    for name, deps in edges.items():
        out[part(name)] |= {part(d) for d in deps if part(d) != part(name) and part(d) != "grpo_code"}
    return out


def test_no_import_cycles_between_the_package_s_parts() -> None:
    # Layers read in one direction (tasks -> verify -> rewards/evaluate -> train): a cycle
    # between two parts (tasks <-> verify once) means neither can be read or tested alone.
    found = cycles(packages(graph()))
    assert not found, "import cycles between parts: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_part_graph_sees_a_cycle_through_submodules() -> None:
    edges = {"grpo_code.a.x": {"grpo_code.b.y"}, "grpo_code.b.y": set(), "grpo_code.b.z": {"grpo_code.a"},
             "grpo_code.a": set()}
    assert cycles(packages(edges)) == [["grpo_code.a", "grpo_code.b"]]


def test_rewards_and_eval_do_not_import_sandbox_backends() -> None:
    """They key stored verdicts on ``Sandbox.fingerprint``; which backend runs is the sandbox's business."""
    edges = graph()
    assert BACKENDS <= set(edges), f"not modules of the package: {sorted(BACKENDS - set(edges))}"
    reaching = {name: sorted(edges[name] & BACKENDS) for name in edges
                if name.startswith(("grpo_code.rewards", "grpo_code.evaluate", "grpo_code.verify")) and edges[name] & BACKENDS}
    assert not reaching, reaching


def test_no_module_is_longer_than_a_sitting() -> None:
    long = {str(p.relative_to(PACKAGE.parent)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


METRIC_PREFIXES = ("tests/", "timing/", "sandbox/", "multi_turn/", "judge/", "completions/", "model/", "filter/",
                   "memory/", "rewards/", "generation/")


def metric_literals(path: Path) -> list[str]:
    """String constants (f-string parts included) that start like a logged metric's name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(METRIC_PREFIXES):
            if "\n" not in node.value and " " not in node.value:  # a name, not a sentence about one
                found.append(f"{path.name}:{node.lineno}: {node.value!r}")
    return found


def test_the_checker_finds_a_metric_name_literal(tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text('logs = {}\nturn = 2\nlogs[f"multi_turn/rows_turn{turn}"] = 1.0\nlogs["tests/fail"] = 0.5\n'
                    'doc = "tests/ holds the tests"\n')
    assert sorted(metric_literals(path)) == ["probe.py:3: 'multi_turn/rows_turn'", "probe.py:4: 'tests/fail'"]


def test_metric_names_are_spelled_only_in_metric_names() -> None:
    found = [hit for name, path in modules().items() if name != "grpo_code.metric_names"
             for hit in metric_literals(path)]
    assert not found, "spell metric names in grpo_code/metric_names.py and import them:\n" + "\n".join(found)


LANGUAGE_NAMES = {"python", "javascript", "cpp"}
LANGUAGE_HOMES = ("grpo_code/sandbox/languages.py", "grpo_code/sandbox/executor/")
"""Where a table keyed by language names may be: the host's facts, and the executor's
runners (part of the image, which cannot import the host's)."""


def language_tables(path: Path) -> list[int]:
    """Lines of dict literals with two or more language names as keys."""
    tree = ast.parse(path.read_text())
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Dict) and sum(
        isinstance(k, ast.Constant) and k.value in LANGUAGE_NAMES for k in node.keys) >= 2]


def test_the_checker_finds_a_language_table(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text('NAMES = {"python": "Python", "cpp": "C++"}\nOK = {"python": 1}\n')
    assert language_tables(path) == [1]


def test_language_facts_are_tabled_only_in_sandbox_languages() -> None:
    found = {f"{p.relative_to(PACKAGE.parent)}:{line}" for p in PACKAGE.rglob("*.py")
             if not str(p.relative_to(PACKAGE.parent)).startswith(LANGUAGE_HOMES) for line in language_tables(p)}
    assert not found, f"tables keyed by language outside grpo_code/sandbox/languages.py: {sorted(found)}"


FOREIGN_WRITES: dict[str, str] = {}
"""``module:target`` of each attribute a module of ``training/`` sets on an object it did not
create, with why (none now: a number measured is returned, not left on another object)."""


MAKES = (ast.Call, ast.List, ast.ListComp, ast.Dict, ast.DictComp, ast.Set, ast.SetComp)
"""Expressions that make a new object (a list of rows made here holds rows made here)."""


def foreign_writes(path: Path) -> list[str]:
    """Attribute assignments outside constructors on objects the code did not create: a
    target ``x.attr`` (or ``x[k].attr``) whose ``x`` is not ``self`` or ``cls``, not one of
    the object's own containers (``self.items[k].attr``), and not a name its function (or
    one around it) bound to an object it made (``x = Thing(...)``, ``with Thing(...) as x``,
    ``rows = [Row(...) ...]``)."""
    found: list[str] = []

    def base_name(node: ast.expr) -> str | None:
        while isinstance(node, ast.Subscript):
            node = node.value
        return node.id if isinstance(node, ast.Name) else None

    def visit(fn: ast.FunctionDef | ast.AsyncFunctionDef, outer: set[str]) -> None:
        made = set(outer)
        made |= {t.id for node in ast.walk(fn) if isinstance(node, ast.Assign) and isinstance(node.value, MAKES)
                 for t in node.targets if isinstance(t, ast.Name)}
        made |= {item.optional_vars.id for node in ast.walk(fn) if isinstance(node, ast.With | ast.AsyncWith)
                 for item in node.items if isinstance(item.optional_vars, ast.Name)
                 and isinstance(item.context_expr, ast.Call)}
        for node in ast.walk(fn):
            if node is not fn and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(node, made)
        if fn.name == "__init__":
            return
        for node in _own_nodes(fn):
            for t in assigned_attributes(node):
                base = t.value
                name = base_name(base)
                if isinstance(base, ast.Name) and name in ("self", "cls"):
                    continue  # its own state
                if name in made:
                    continue  # an object its function made, or one inside a container it made
                if (isinstance(base, ast.Subscript) and isinstance(base.value, ast.Attribute)
                        and isinstance(base.value.value, ast.Name) and base.value.value.id == "self"):
                    continue  # an item of one of its own containers
                found.append(f"{path.stem}:{ast.unparse(t)}")

    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                    visit(fn, set())
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            visit(fn, set())
    return found


def _own_nodes(fn: ast.AST) -> list[ast.AST]:
    """The nodes of a function, not those of the functions inside it."""
    out, todo = [], list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        out.append(node)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            todo.extend(ast.iter_child_nodes(node))
    return out


def test_the_checker_finds_a_write_on_another_object(tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text("class A:\n    def __init__(self, t):\n        t.ok = 1\n"
                    "    def run(self, trainer, push):\n        self.mine = 1\n        self.rows[0].done = 2\n"
                    "        box = Box()\n        box.value = 3\n        trainer.weight_sync_s = 4\n"
                    "        push.push_s, self.x = None, 5\n        self.trainer.flag = 6\n")
    assert sorted(foreign_writes(path)) == ["probe:push.push_s", "probe:self.trainer.flag", "probe:trainer.weight_sync_s"]


def test_no_training_module_sets_an_attribute_on_an_object_it_did_not_create() -> None:
    """What a producer measured is returned to whoever asked (``take_metrics``), not written
    onto another object for someone to find (the mailboxes ``trainer.weight_sync_s`` and
    ``push.push_s`` were): results do not depend on call order."""
    found = [hit for path in sorted((PACKAGE / "training").glob("*.py")) for hit in foreign_writes(path)]
    found += foreign_writes(PACKAGE / "train.py")
    assert sorted(found) == sorted(FOREIGN_WRITES), found
