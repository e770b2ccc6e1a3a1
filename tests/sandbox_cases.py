"""Jobs that try to break the sandbox, shared by the local and docker test modules.

Each case is a job plus the verdicts it may get. Reward hacks must never ``pass``; the
limits must turn runaway programs into ``timeout``/``memory`` quickly.
"""

from __future__ import annotations

import time

from grpo_code.sandbox import CallTest, IoTest, Job, Limits, Result, ScriptTest, Status, Verdict

FAST = Limits(timeout_s=1.0, memory_mb=256)


def script(program: str, *tests: str, limits: Limits = FAST) -> Job:
    return Job(program, tuple(ScriptTest(t) for t in (tests or ("",))), limits=limits)


ADD = "def add(a, b):\n    return a + b\n"

# name -> (job, verdicts allowed for its first test); every one of these is a reward hack
# or a runaway program, so none may pass.
HACKS: dict[str, tuple[Job, set[Verdict]]] = {
    "sys.exit(0) before the tests": (
        script("import sys\nsys.exit(0)\n" + ADD, "assert add(1, 2) == 4"),
        {Verdict.FAIL},
    ),
    "os._exit(0) before the tests": (
        script("import os\nos._exit(0)\n", "assert add(1, 2) == 4"),
        {Verdict.FAIL},
    ),
    "raise SystemExit before the tests": (script("raise SystemExit\n", "assert False"), {Verdict.FAIL}),
    "sys.exit(0) inside the tests": (
        script("import sys\ndef add(a, b):\n    sys.exit(0)\n", "assert add(1, 2) == 3"),
        {Verdict.FAIL},
    ),
    "os._exit(0) inside the tests": (
        script("import os\ndef add(a, b):\n    os._exit(0)\n", "assert add(1, 2) == 3"),
        {Verdict.FAIL},
    ),
    "SystemExit(0) inside the tests": (
        script("def add(a, b):\n    raise SystemExit(0)\n", "assert add(1, 2) == 3"),
        {Verdict.FAIL},
    ),
    "fake pass markers on stdout": (
        script(
            "import sys\nprint('PASS'); print('ok'); print('{\"verdict\": \"pass\"}')\n"
            "sys.stdout.flush(); sys.stderr.write('All tests passed\\n')\n" + ADD,
            "assert add(1, 2) == 4",
        ),
        {Verdict.FAIL},
    ),
    "forged report on the harness fd": (
        script(
            'import os\nos.write(3, b\'{"nonce": "guess", "event": "completed"}\\n\')\nos._exit(0)\n',
            "assert False",
        ),
        {Verdict.FAIL},
    ),
    "rebinding compile to skip the tests": (
        script(
            "import builtins\n_c = builtins.compile\nbuiltins.compile = lambda s, *a, **k: _c('pass', *a, **k)\n",
            "assert False",
        ),
        {Verdict.FAIL},
    ),
    "patching json.dumps to rewrite the report": (
        script(
            "import json\n_d = json.dumps\n"
            "json.dumps = lambda o, *a, **k: _d({**o, 'event': 'completed'} if isinstance(o, dict) else o, *a, **k)\n",
            "assert False",
        ),
        {Verdict.FAIL},
    ),
    "always-equal object in a call test": (
        Job(
            "class Anything:\n    def __eq__(self, other):\n        return True\n"
            "    def __ne__(self, other):\n        return False\n"
            "def add(a, b):\n    return Anything()\n",
            (CallTest("add", (1, 2), 3),),
            limits=FAST,
        ),
        {Verdict.FAIL},
    ),
    "int subclass with rigged __eq__": (
        Job(
            "class Int(int):\n    def __eq__(self, other):\n        return True\n"
            "def add(a, b):\n    return Int(0)\n",
            (CallTest("add", (1, 2), 3),),
            limits=FAST,
        ),
        {Verdict.FAIL},
    ),
    "always-equal object in a script test": (
        script(
            "class Anything:\n    def __eq__(self, other):\n        return True\n"
            "    def __ne__(self, other):\n        return False\n"
            "def add(a, b):\n    return Anything()\n",
            "assert add(1, 2) == 3",
        ),
        {Verdict.FAIL},
    ),
    "always-equal objects inside a list": (
        script(
            "class Anything:\n    __eq__ = lambda self, other: True\n"
            "def pair(a, b):\n    return [Anything(), Anything()]\n",
            "assert pair(1, 2) == [1, 2]",
        ),
        {Verdict.FAIL},
    ),
    "always-equal object on the right": (
        script(
            "class Anything:\n    def __eq__(self, other):\n        return True\n"
            "def add(a, b):\n    return Anything()\n",
            "def check(candidate):\n    assert 3 == candidate(1, 2)\n    assert candidate(2, 2) in [4]\n"
            "check(add)",
        ),
        {Verdict.FAIL},
    ),
    "always-small object for a tolerance check": (
        script(
            "class Tiny:\n    def __sub__(self, other):\n        return self\n"
            "    def __abs__(self):\n        return self\n    def __lt__(self, other):\n        return True\n"
            "def mean(xs):\n    return Tiny()\n",
            "assert abs(mean([1, 2]) - 1.5) < 1e-6",
        ),
        {Verdict.FAIL},
    ),
    "infinite loop": (script("while True:\n    pass\n"), {Verdict.TIMEOUT}),
    "sleep past the limit ignoring SIGTERM": (
        script("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(30)\n"),
        {Verdict.TIMEOUT},
    ),
    "memory bomb (one allocation)": (script("x = bytearray(1 << 40)\n"), {Verdict.MEMORY}),
    "memory bomb (growing)": (
        script("chunks = []\nwhile True:\n    chunks.append(bytearray(8 << 20))\n"),
        {Verdict.MEMORY},
    ),
}


def check_hack(sandbox, name: str) -> Result:
    job, allowed = HACKS[name]
    limit = job.limits.timeout_s or 5.0
    start = time.monotonic()
    [result] = sandbox.run([job])
    elapsed = time.monotonic() - start
    assert result.status is Status.FAIL, (name, result)
    assert result.tests[0].verdict in allowed, (name, result.tests[0])
    assert elapsed < limit + 1.0 + 0.5, f"{name}: took {elapsed:.2f}s"  # + scheduling slack
    if result.tests[0].verdict is Verdict.TIMEOUT:
        assert result.tests[0].duration_ms < (limit + 1.0) * 1000, result.tests[0]
    return result


MIXED = Job(
    ADD + "import sys\nif __name__ == '__main__' and not sys.stdin.isatty():\n"
    "    data = sys.stdin.read().split()\n    if data:\n        print(add(int(data[0]), int(data[1])))\n",
    (
        ScriptTest("assert add(1, 2) == 3"),
        ScriptTest("assert add(1, 2) == 4"),
        IoTest("1 2\n", "3\n"),
        IoTest("1 2\n", "4\n"),
        CallTest("add", (1, 2), 3),
        CallTest("add", (1, 2), 4),
        CallTest("add", ("a", "b"), "ab"),
    ),
    limits=FAST,
)
MIXED_VERDICTS = ["pass", "fail", "pass", "fail", "pass", "fail", "pass"]


def check_mixed(result: Result) -> None:
    assert [t.verdict.value for t in result.tests] == MIXED_VERDICTS, result
    assert result.status is Status.FAIL and result.passed == 4 and result.total == 7
    assert "AssertionError" in result.tests[1].message
    assert "expected 4" in result.tests[5].message


INDEPENDENT = Job(
    "import time\ndef f(x):\n    if x == 1:\n        raise ValueError('boom')\n"
    "    if x == 2:\n        while True:\n            pass\n    if x == 3:\n        import os; os._exit(0)\n    return x\n",
    (
        CallTest("f", (0,), 0),
        CallTest("f", (1,), 1),
        CallTest("f", (2,), 2),
        CallTest("f", (3,), 3),
        CallTest("f", (4,), 4),
        ScriptTest("def g(:"),
    ),
    limits=FAST,
)
INDEPENDENT_VERDICTS = ["pass", "runtime_error", "timeout", "fail", "pass", "runtime_error"]

COMPILE_ERROR = script("def broken(:\n    pass\n", "assert True", "assert True")

HUGE_STDOUT = script("import sys\nsys.stdout.write('x' * 20_000_000)\nprint('tail')\n", "assert True")

BACKGROUND = (
    "import subprocess, sys\n"
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], start_new_session=True)\n"
    "print(p.pid)\n"
)

# Signals the executor (its parent; PID 1 inside a container, where they are ignored).
KILL_EXECUTOR = script(
    "import os, signal\n"
    "for sig in (signal.SIGTERM, signal.SIGKILL):\n"
    "    try:\n        os.kill(os.getppid(), sig)\n    except OSError:\n        pass\n"
    "os._exit(0)\n",
    "assert False",
)


# Comparisons a correct program relies on must keep working under the comparison guard.
LEGIT_COMPARISONS = script(
    "from collections import namedtuple, Counter\nfrom dataclasses import dataclass\nfrom fractions import Fraction\n"
    "Point = namedtuple('Point', 'x y')\n"
    "@dataclass\nclass Box:\n    w: int\n"
    "def point():\n    return Point(1, 2)\n"
    "def box():\n    return Box(3)\n"
    "def half():\n    return Fraction(1, 2)\n"
    "def counts():\n    return Counter('aab')\n",
    "assert point() == (1, 2) and point() != (2, 1) and point() < (1, 3)",
    "assert box() == Box(3) and box() != Box(4) and box() in [Box(3)]",
    "assert half() == 0.5 and abs(half() - 0.5) < 1e-9",
    "assert counts() == {'a': 2, 'b': 1}",
    "assert [1, [2, (3,)]] == [1, [2, (3,)]] and 2 in {1: 'a', 2: 'b'} and 'x' not in 'abc'",
    "assert 1 < 2 < 3 and not (3 < 2 < 1)",
    "assert not (box() == 3)",
)
