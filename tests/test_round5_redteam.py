"""Our own red-team round on issue 57's changes (pytest-style and LeetCode tests), on both
backends: each case is a test file in the dataset's shape and programs with the verdicts
real pytest gives them (pytest 9.2 run on the same files). A wrong program never passes;
a correct one passes wherever pytest passes it, except where noted as not supported."""

from __future__ import annotations

import json
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
    [result] = sandbox.run([task_from_dict(record, "t").job(program)])
    return [t.verdict.value for t in result.tests]


def kodcode(test: str) -> dict:
    (task,) = adapters.ADAPTERS["kodcode"]([{"question_id": "q", "question": "Solve it.", "test": test}])
    return task


def leetcode(check: str) -> dict:
    (task,) = adapters.ADAPTERS["deepcoder"]([{"id": "lc", "problem": "Solve it.",
                                               "tests": json.dumps({"functional": check})}])
    return task


# --------------------------------------------------------------------------- forged passes

FORGES = {
    # pytest.fail is a BaseException under pytest: a test's `except Exception` cannot swallow it
    "pytest.fail caught": (
        "from solution import withdraw\nimport pytest\n\ndef test_overdraw():\n    try:\n        withdraw(100, 500)\n"
        "        pytest.fail('expected an error')\n    except Exception:\n        pass\n",
        "def withdraw(balance, amount):\n    if amount > balance:\n        raise ValueError('no')\n"
        "    return balance - amount\n",
        "def withdraw(balance, amount):\n    return balance - amount\n"),
    # "DID NOT RAISE" the same way
    "did not raise caught": (
        "from solution import withdraw\nimport pytest\n\ndef test_overdraw():\n    try:\n"
        "        with pytest.raises(ValueError):\n            withdraw(100, 500)\n    except Exception:\n"
        "        pass\n    assert True\n",
        "def withdraw(balance, amount):\n    if amount > balance:\n        raise ValueError('no')\n"
        "    return balance - amount\n",
        "def withdraw(balance, amount):\n    return balance - amount\n"),
    # the judge's own refusal to send an argument is no TypeError of the program's
    "judge's TypeError": (
        "from solution import total\nimport pytest\n\ndef test_rejects():\n    with pytest.raises(TypeError):\n"
        "        total(object())\n",
        None,
        "def total(xs):\n    return 0\n"),
    # the helpers keep their own builtins: the program's max never runs inside approx
    "approx with the program's max": (
        "from solution import max\nimport pytest\n\ndef test_max():\n    assert max([1.5, 2.5, 0.25]) == "
        "pytest.approx(2.5)\n",
        "import builtins\ndef max(xs):\n    return builtins.max(xs)\n",
        "def max(*args):\n    if len(args) == 2 and all(isinstance(a, float) for a in args):\n        return 1e300\n"
        "    return 0.0\n"),
    # a star import never replaces what runs the test (an exception class named like the runner)
    "star import of the runner's name": (
        "from solution import *\n\ndef test_add():\n    assert add(1, 2) == 3\n",
        "def add(a, b):\n    return a + b\n",
        "def add(a, b):\n    return 0\n\nclass _run_test(Exception):\n    pass\n\nclass __run_test__(Exception):\n"
        "    pass\n\nclass pytest(Exception):\n    pass\n\nclass _from_solution(Exception):\n    pass\n"),
    # a program function posing as the test module's fixture is never taken for it
    "fixture hijack": (
        "import pytest\nfrom solution import my_sort\n\n@pytest.fixture\ndef data():\n    return [3, 1, 2]\n\n"
        "def test_sort(data):\n    assert my_sort(data) == [1, 2, 3]\n",
        "def my_sort(xs):\n    return sorted(xs)\n",
        "def my_sort(xs):\n    return list(xs)\n\ndef _fake():\n    return [1, 2, 3]\n_fake._fixture_name = 'data'\n"
        "_fake._fixture_autouse = True\n"),
}


@pytest.mark.parametrize("name", list(FORGES))
def test_no_forged_pass(sandbox: Sandbox, name: str) -> None:
    test, right, wrong = FORGES[name]
    task = kodcode(test)
    if right is not None:
        assert set(verdicts(sandbox, task, right)) == {"pass"}, name
    assert "pass" not in verdicts(sandbox, task, wrong), name


# --------------------------------------------------------------------------- false fails

CORRECT = {
    "numpy values": (
        "from solution import mean, normalize\nimport numpy as np\nimport pytest\n\n"
        "def test_eq():\n    assert mean([1, 2, 3]) == 2.0\n\n"
        "def test_approx():\n    assert mean([1, 2, 4]) == pytest.approx(7 / 3)\n\n"
        "def test_allclose():\n    assert np.allclose(normalize([1, 3]), [0.25, 0.75])\n\n"
        "def test_array_equal():\n    np.testing.assert_array_equal(normalize([1, 1]), np.array([0.5, 0.5]))\n\n"
        "def test_shape():\n    assert normalize([1, 1, 2]).shape == (3,)\n",
        "import numpy as np\n\ndef mean(xs):\n    return np.mean(xs)\n\n"
        "def normalize(xs):\n    a = np.asarray(xs, dtype=float)\n    return a / a.sum()\n"),
    "standard-library values": (
        "from solution import parse_date, gap, evens, keys_of, weekday\n"
        "from datetime import date, timedelta\n\n"
        "def test_date():\n    assert parse_date('2024-02-29') == date(2024, 2, 29)\n\n"
        "def test_timedelta():\n    assert gap('2024-01-01', '2024-01-31') == timedelta(days=30)\n\n"
        "def test_range():\n    assert evens(6) == range(0, 6, 2)\n\n"
        "def test_keys():\n    assert keys_of({'a': 1, 'b': 2}) == {'a', 'b'}\n\n"
        "def test_date_argument():\n    assert weekday(date(2024, 1, 1)) == 'Monday'\n",
        "from datetime import datetime\n\n"
        "def parse_date(s):\n    return datetime.strptime(s, '%Y-%m-%d').date()\n\n"
        "def gap(a, b):\n    return parse_date(b) - parse_date(a)\n\n"
        "def evens(n):\n    return range(0, n, 2)\n\n"
        "def keys_of(d):\n    return d.keys()\n\ndef weekday(d):\n    return d.strftime('%A')\n"),
    "exception attributes": (
        "from solution import main, read_config, lookup, pair\nimport errno\nimport pytest\n\n"
        "def test_exit_code():\n    with pytest.raises(SystemExit) as excinfo:\n        main(['--bad'])\n"
        "    assert excinfo.value.code == 2\n\n"
        "def test_exit_one():\n    with pytest.raises(SystemExit) as excinfo:\n        main([])\n"
        "    assert excinfo.value.code == 1\n\n"
        "def test_missing_file():\n    with pytest.raises(FileNotFoundError) as excinfo:\n"
        "        read_config('/nonexistent/cfg.ini')\n    assert excinfo.value.errno == errno.ENOENT\n"
        "    assert excinfo.value.filename == '/nonexistent/cfg.ini'\n\n"
        "def test_keyerror():\n    with pytest.raises(KeyError, match=\"^'x'$\") as excinfo:\n        lookup({}, 'x')\n"
        "    assert str(excinfo.value) == \"'x'\" and excinfo.value.args[0] == 'x'\n\n"
        "def test_args():\n    with pytest.raises(ValueError) as excinfo:\n        pair()\n"
        "    assert excinfo.value.args == ('bad', 3)\n",
        "import argparse, sys\n\ndef main(argv):\n    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('--name')\n    args = parser.parse_args(argv)\n    if not args.name:\n"
        "        sys.exit(1)\n    return 0\n\ndef read_config(path):\n    with open(path) as f:\n        return f.read()\n\n"
        "def lookup(d, k):\n    return d[k]\n\ndef pair():\n    raise ValueError('bad', 3)\n"),
    "except with the program's class": (
        "from solution import parse_age, InvalidAgeError, AgeError\n\n"
        "def test_invalid():\n    try:\n        parse_age('-3')\n        assert False, 'no error'\n"
        "    except InvalidAgeError as e:\n        assert 'negative' in str(e)\n\n"
        "def test_base():\n    try:\n        parse_age('-3')\n    except AgeError:\n        pass\n\n"
        "def test_valid():\n    assert parse_age('7') == 7\n",
        "class AgeError(Exception):\n    pass\n\nclass InvalidAgeError(AgeError, ValueError):\n    pass\n\n"
        "def parse_age(s):\n    n = int(s)\n    if n < 0:\n        raise InvalidAgeError('negative age')\n    return n\n"),
    "generators": (
        "from solution import fib\nimport itertools\n\n"
        "def test_next():\n    g = fib()\n    assert [next(g), next(g), next(g)] == [0, 1, 1]\n\n"
        "def test_islice():\n    assert list(itertools.islice(fib(), 6)) == [0, 1, 1, 2, 3, 5]\n\n"
        "def test_zip():\n    assert [x for _, x in zip(range(4), fib())] == [0, 1, 1, 2]\n",
        "def fib():\n    a, b = 0, 1\n    while True:\n        yield a\n        a, b = b, a + b\n"),
    "module objects that answer any attribute": (
        "from solution import get_setting\n\ndef test_get():\n    assert get_setting('debug') is False\n",
        "from unittest import mock\n_backend = mock.MagicMock()\n\nclass Settings:\n"
        "    def __init__(self, data):\n        self._data = data\n    def __getattr__(self, name):\n"
        "        return self._data[name]\n\nsettings = Settings({'debug': False})\n\n"
        "def get_setting(name):\n    return getattr(settings, name)\n"),
    "an import inside the test function": (
        "def test_local():\n    from solution import double\n    assert double(2) == 4\n",
        "def double(x):\n    return 2 * x\n"),
    "capsys of the test's own print": (
        "from solution import greet\n\ndef test_print(capsys):\n    print(greet('Ann'))\n"
        "    assert capsys.readouterr().out == 'Hello, Ann\\n'\n",
        "def greet(name):\n    return f'Hello, {name}'\n"),
}


@pytest.mark.parametrize("name", list(CORRECT))
def test_no_false_fail(sandbox: Sandbox, name: str) -> None:
    test, right = CORRECT[name]
    assert set(verdicts(sandbox, kodcode(test), right)) == {"pass"}, name


@pytest.mark.docker
def test_sortedcontainers_values_in_the_image(docker_ready) -> None:
    """LeetCode's judge has sortedcontainers, and so has the Python image (docs/sandbox.md);
    its sorted list reaches the test as a list."""
    from conftest import need_image
    from grpo_code.config import SandboxConfig

    need_image("python")
    test = ("from solution import sorted_items\n\ndef test_sortedlist():\n"
            "    assert sorted_items([3, 1, 2]) == [1, 2, 3]\n")
    right = "from sortedcontainers import SortedList\n\ndef sorted_items(xs):\n    return SortedList(xs)\n"
    with Sandbox(SandboxConfig(backend="docker", workers=1)) as docker:
        assert verdicts(docker, kodcode(test), right) == ["pass"]


INVERT_CHECK = ("def check(candidate):\n"
                "    assert is_same_tree(candidate(root = tree_node([4, 2, 7, 1, 3, 6, 9])), "
                "tree_node([4, 7, 2, 9, 6, 3, 1]))\n"
                "    assert is_same_tree(candidate(root = tree_node([2, 1, 3])), tree_node([2, 3, 1]))\n\n\n"
                "check(Solution().invertTree)\n")
INVERT = ("class Solution:\n    def invertTree(self, root: Optional[TreeNode]) -> Optional[TreeNode]:\n"
          "        if root is None:\n            return None\n"
          "        root.left, root.right = self.invertTree(root.right), self.invertTree(root.left)\n"
          "        return root\n")
LEETCODE_PROGRAMS = {
    "own TreeNode with __slots__": ("class TreeNode:\n    __slots__ = ('val', 'left', 'right')\n"
                                    "    def __init__(self, val=0, left=None, right=None):\n"
                                    "        self.val, self.left, self.right = val, left, right\n\n" + INVERT),
    "a subclass of TreeNode": ("class Node(TreeNode):\n    pass\n\nclass Solution:\n    def invertTree(self, root):\n"
                               "        if root is None:\n            return None\n"
                               "        return Node(root.val, self.invertTree(root.right), self.invertTree(root.left))\n"),
    "a statement continued after the future import": ("from __future__ import annotations; LIMITS = (1,\n    2)\n"
                                                       + INVERT),
    "a backslash after the future import": "from __future__ import annotations; import sys, \\\n    os\n" + INVERT,
}


@pytest.mark.parametrize("name", list(LEETCODE_PROGRAMS))
def test_leetcode_answers_pytest_would_pass(sandbox: Sandbox, name: str) -> None:
    assert verdicts(sandbox, leetcode(INVERT_CHECK), LEETCODE_PROGRAMS[name]) == ["pass", "pass"], name
