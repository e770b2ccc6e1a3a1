"""Round five of held-out attacks (issue 57): forged passes and false fails in pytest-style
(KodCode) and LeetCode (DeepCoder) suites, on both backends.

Each case is a task converted by its adapter from a record in the dataset's shape and a
program judged through the sandbox as training judges it: a wrong program must not pass, a
correct one must."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conftest import BACKENDS, backend_sandbox
from grpo_code.sandbox import Sandbox
from grpo_code.tasks import adapters
from grpo_code.tasks.schema import task_from_dict


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request) -> Iterator[Sandbox]:
    yield from backend_sandbox(request)


def verdicts(sandbox: Sandbox, record: dict, program: str) -> list[str]:
    task = task_from_dict(record, "t")
    [result] = sandbox.run([task.job(program)])
    return [t.verdict.value for t in result.tests]


def kodcode(test: str, solution: str = "", info: list | None = None) -> dict:
    (task,) = adapters.ADAPTERS["kodcode"]([{"question_id": "q", "question": "Solve it.", "test": test,
                                              "solution": solution, "test_info": info or []}])
    return task


# --------------------------------------------------------------------------- forged passes


def test_a_star_import_binds_the_programs_functions_named_like_builtins(sandbox: Sandbox) -> None:
    """Under pytest, ``from solution import *`` shadows ``pow`` and ``sum`` with the program's:
    a wrong ``pow`` must fail, not be replaced by Python's."""
    test = ("from solution import *\n\ndef test_pow():\n    assert pow(2, 10) == 1024\n\n"
            "def test_sum():\n    assert sum([1, 2, 3]) == 6\n")
    info = [{"function_name": "pow", "function_declaration": "def pow(base, exp):"},
            {"function_name": "sum", "function_declaration": "def sum(xs):"}]
    task = kodcode(test, info=info)
    right = ("def pow(base, exp):\n    r = 1\n    for _ in range(exp):\n        r *= base\n    return r\n\n"
             "def sum(xs):\n    t = 0\n    for x in xs:\n        t += x\n    return t\n")
    assert verdicts(sandbox, task, right) == ["pass", "pass"]
    wrong = "def pow(base, exp):\n    return 0\n\ndef sum(xs):\n    return -1\n"
    assert verdicts(sandbox, task, wrong) == ["fail", "fail"]


def test_an_explicit_import_of_a_builtins_name_is_the_programs(sandbox: Sandbox) -> None:
    test = ("from solution import max, TimeoutError\nimport pytest\n\ndef test_max():\n    assert max([3, 9, 2]) == 9\n\n"
            "def test_own_timeout():\n    with pytest.raises(TimeoutError):\n        max([])\n")
    right = ("class TimeoutError(Exception):\n    pass\n\n_max = max\n\ndef max(xs):\n    if not xs:\n"
             "        raise TimeoutError('empty')\n    return _max(xs)\n")
    assert verdicts(sandbox, kodcode(test), right) == ["pass", "pass"]
    assert verdicts(sandbox, kodcode(test), right.replace("return _max(xs)", "return 0")) == ["fail", "pass"]


LEETCODE_TREE = '''def check(candidate):
    assert is_same_tree(candidate(root = tree_node([4, 2, 7, 1, 3, 6, 9])), tree_node([4, 7, 2, 9, 6, 3, 1]))
    assert is_same_tree(candidate(root = tree_node([2, 1, 3])), tree_node([2, 3, 1]))
    assert is_same_tree(candidate(root = tree_node([])), tree_node([]))


check(Solution().invertTree)
'''
LEETCODE_LIST = '''def check(candidate):
    assert is_same_list(candidate(head = list_node([1, 2, 3, 4, 5])), list_node([5, 4, 3, 2, 1]))
    assert is_same_list(candidate(head = list_node([1, 2])), list_node([2, 1]))
    assert candidate(head = list_node([])) is None


check(Solution().reverseList)
'''
INVERT = ("class Solution:\n    def invertTree(self, root: Optional[TreeNode]) -> Optional[TreeNode]:\n"
          "        if root is None:\n            return None\n"
          "        root.left, root.right = self.invertTree(root.right), self.invertTree(root.left)\n"
          "        return root\n")
REVERSE = ("class Solution:\n    def reverseList(self, head: Optional[ListNode]) -> Optional[ListNode]:\n"
           "        prev = None\n        while head:\n            head.next, prev, head = prev, head, head.next\n"
           "        return prev\n")


def leetcode(check: str, solution: str) -> dict:
    import json

    (task,) = adapters.ADAPTERS["deepcoder"]([{"id": "lc", "problem": "Solve it.", "solutions": solution,
                                               "tests": json.dumps({"functional": check})}])
    return task


def test_leetcode_comparators_are_the_tasks_never_the_programs(sandbox: Sandbox) -> None:
    task = leetcode(LEETCODE_TREE, INVERT)
    forged = ("def is_same_tree(p, q):\n    return True\n\nis_same_list = is_same_tree\n\n"
              "class Solution:\n    def invertTree(self, root):\n        return root\n")
    assert verdicts(sandbox, task, forged) == ["fail", "fail", "pass"]
    # a node whose truth value is False does not pass for an empty tree, nor equals all
    lying = ("class Solution:\n    def invertTree(self, root):\n        return Any()\n"
             "class Any:\n    val = 0\n    def __bool__(self):\n        return False\n"
             "    def __eq__(self, other):\n        return True\n")
    assert "pass" not in verdicts(sandbox, task, lying)


# --------------------------------------------------------------------------- false fails


def test_a_leetcode_answer_written_as_the_prompt_asks_passes(sandbox: Sandbox) -> None:
    """TreeNode and class Solution only, as LeetCode's judge takes it: the task supplies
    ListNode/TreeNode and the tests' builders and comparators."""
    assert verdicts(sandbox, leetcode(LEETCODE_TREE, INVERT), INVERT) == ["pass"] * 3
    assert verdicts(sandbox, leetcode(LEETCODE_LIST, REVERSE), REVERSE) == ["pass"] * 3
    # the program's own TreeNode, with the old one-argument constructor
    own = "class TreeNode:\n    def __init__(self, x):\n        self.val = x\n        self.left = self.right = None\n\n"
    assert verdicts(sandbox, leetcode(LEETCODE_TREE, INVERT), own + INVERT) == ["pass"] * 3
    wrong = REVERSE.replace("return prev", "return head")
    assert verdicts(sandbox, leetcode(LEETCODE_LIST, REVERSE), wrong) == ["fail", "fail", "pass"]


def test_a_leetcode_answer_that_changes_its_argument_in_place_is_seen(sandbox: Sandbox) -> None:
    check = ("def check(candidate):\n    root = tree_node([1, 2, 5, 3, 4, None, 6])\n    candidate(root)\n"
             "    assert is_same_tree(root, tree_node([1, None, 2, None, 3, None, 4, None, 5, None, 6]))\n\n\n"
             "check(Solution().flatten)\n")
    flatten = ("class Solution:\n    def flatten(self, root: Optional[TreeNode]) -> None:\n        nodes = []\n"
               "        def walk(n):\n            if n:\n                nodes.append(n)\n                walk(n.left)\n"
               "                walk(n.right)\n        walk(root)\n        for a, b in zip(nodes, nodes[1:] + [None]):\n"
               "            a.left, a.right = None, b\n")
    task = leetcode(check, flatten)
    assert verdicts(sandbox, task, flatten) == ["pass"]
    assert verdicts(sandbox, task, flatten.replace("a.left, a.right = None, b", "pass")) == ["fail"]


PYTEST_SHIMS = '''import pytest
from solution import parse, Invalid, Empty, Box, apply, twice


def test_own_exception():
    with pytest.raises(Invalid):
        parse("x")


def test_own_base_exception():
    with pytest.raises(Invalid):
        parse("")


def test_excinfo():
    with pytest.raises(ValueError) as excinfo:
        parse("x")
    assert excinfo.type is Invalid
    assert "bad" in str(excinfo.value)
    assert excinfo.typename == "Invalid"
    excinfo.match("bad")
    assert isinstance(excinfo.value, Invalid)
    assert excinfo.value.code == 7 and excinfo.value.field == "text"


def test_isinstance_of_own_class():
    box = Box(3)
    assert isinstance(box, Box)
    assert not isinstance(3, Box)
    assert box.value == 3


def test_callback():
    assert apply(lambda x: x * 2, [1, 2, 3]) == [2, 4, 6]


def test_decorated():
    @twice
    def inc(x):
        return x + 1
    assert inc(1) == 3
'''
SHIMMED = '''class Invalid(ValueError):
    code = 7

    def __init__(self, message, field="text"):
        super().__init__(message)
        self.field = field


class Empty(Invalid):
    pass


class Box:
    def __init__(self, value):
        self.value = value


def parse(text):
    if not text:
        raise Empty("nothing")
    raise Invalid(f"bad input {text!r}")


def apply(fn, xs):
    return [fn(x) for x in xs]


def twice(fn):
    def run(x):
        return fn(fn(x))
    return run
'''


def test_kodcode_pytest_shims_take_the_programs_classes_and_callbacks(sandbox: Sandbox) -> None:
    task = kodcode(PYTEST_SHIMS, SHIMMED)
    assert verdicts(sandbox, task, SHIMMED) == ["pass"] * 6
    wrong = (SHIMMED.replace("raise Invalid(f", "raise ValueError(f").replace("return [fn(x) for x in xs]", "return xs")
             .replace("return fn(fn(x))", "return fn(x)"))
    assert verdicts(sandbox, task, wrong) == ["runtime_error", "pass", "fail", "pass", "fail", "fail"]


def test_a_program_starting_with_a_form_feed_keeps_its_future_import(sandbox: Sandbox) -> None:
    program = "\x0cfrom __future__ import annotations\n\nclass Solution:\n" + INVERT.split("class Solution:\n", 1)[1]
    assert verdicts(sandbox, leetcode(LEETCODE_TREE, INVERT), program) == ["pass"] * 3


FIXTURES = '''import pytest
from solution import greet, Counter

LOG = []


@pytest.fixture
def name():
    return "Ada"


@pytest.fixture(name="counter")
def make_counter(name):
    LOG.append("set up " + name)
    yield Counter(len(name))
    LOG.append("torn down")


@pytest.fixture(autouse=True)
def always():
    LOG.append("autouse")


def test_prints(capsys, name):
    greet(name)
    out, err = capsys.readouterr()
    assert out == "Hello, Ada!\\n" and err == ""
    greet("Bo")
    assert capsys.readouterr().out == "Hello, Bo!\\n"


def test_fixture_chain(counter):
    assert counter.value == 3
    assert LOG == ["autouse", "set up Ada"]
'''
GREET = ("def greet(name):\n    print(f'Hello, {name}!')\n\n"
         "class Counter:\n    def __init__(self, value):\n        self.value = value\n")


def test_kodcode_fixtures_of_the_module_and_capsys_run_as_under_pytest(sandbox: Sandbox) -> None:
    task = kodcode(FIXTURES, GREET)
    assert verdicts(sandbox, task, GREET) == ["pass", "pass"]
    assert verdicts(sandbox, task, GREET.replace("Hello", "Hi")) == ["fail", "pass"]
    # printing the expected text by itself, outside the test's capture, does not pass
    assert verdicts(sandbox, task, GREET.replace("print(f'Hello, {name}!')", "pass")
                    + "print('Hello, Ada!')\n") == ["fail", "pass"]
