"""C++ checkers in testlib's style (docs/sandbox.md, Checkers): compiled once, run by the
judge after the program, their exit code deciding; a program can neither forge their
verdict nor turn a broken checker into a pass."""

from __future__ import annotations

import base64
import os
import re
import shutil
from pathlib import Path

import pytest

from conftest import BACKENDS, backend_sandbox
from grpo_code.errors import SandboxError
from grpo_code.sandbox import IoTest, Job, Limits, native_checker

HEADER = (Path(__file__).parent / "fixtures" / "testlib" / "testlib.h").read_text()

# Any pair i < j with a[i] + a[j] == target is right: several answers per input.
PAIR = r'''#include <vector>
#include "testlib.h"
int main(int argc, char *argv[]) {
    registerTestlibCmd(argc, argv);
    int n = inf.readInt();
    std::vector<long long> a(n);
    for (auto &x : a) x = inf.readLong();
    long long target = inf.readLong();
    int i = ouf.readInt(), j = ouf.readInt();
    if (!ouf.seekEof()) quitf(_pe, "extra output after the pair");
    if (i < 1 || j > n || i >= j) quitf(_wa, "indices %d %d out of order or range", i, j);
    if (a[i - 1] + a[j - 1] != target) quitf(_wa, "a[%d] + a[%d] != %lld", i, j, target);
    ensuref(ans.readInt() >= 1, "the jury's answer is broken");
    quitf(_ok, "a right pair");
}
'''
STDIN = "4\n1 4 2 3\n5\n"  # (1, 2) and (3, 4) are both right
PROGRAMS = {
    "python": {"first": "print(1, 2)", "second": "print(3, 4)", "wrong": "print(1, 3)", "extra": "print(1, 2, 3)"},
    "javascript": {"first": "console.log('1 2')", "second": "console.log('3 4')", "wrong": "console.log('1 3')",
                   "extra": "console.log('1 2 3')"},
    "cpp": {k: f'#include <cstdio>\nint main() {{ std::puts("{v}"); }}\n'
            for k, v in {"first": "1 2", "second": "3 4", "wrong": "1 3", "extra": "1 2 3"}.items()},
}


def pair_checker(source: str = PAIR) -> dict:
    return {"language": "cpp", "source": source, "headers": {"testlib.h": HEADER}}


def judged(sandbox, program: str, source: str = PAIR, language: str = "python", answer: str = "1 2\n"):
    job = Job(program, [IoTest(STDIN, answer, checker="pair")], language=language,
              limits=Limits(timeout_s=5, memory_mb=256), checkers={"pair": pair_checker(source)})
    [result] = sandbox.run([job])
    return result.tests[0]


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request):
    if request.param == "local" and shutil.which("g++") is None:
        pytest.skip("the local backend compiles checkers with this machine's g++, and it has none")
    yield from backend_sandbox(request, ("python", "javascript", "cpp"))


@pytest.mark.parametrize("language", ["python", "javascript", "cpp"])
def test_a_testlib_checker_accepts_every_right_answer_and_names_what_is_wrong(sandbox, language):
    if language != "python" and sandbox.backend == "local":
        pytest.skip("JavaScript and C++ programs are judged on docker here (the local backend's own tests cover them)")
    programs = PROGRAMS[language]
    assert judged(sandbox, programs["first"], language=language).verdict == "pass"
    assert judged(sandbox, programs["second"], language=language).verdict == "pass"  # not the jury's answer
    wrong = judged(sandbox, programs["wrong"], language=language)
    assert (wrong.verdict, wrong.message) == ("fail", "checker: wrong answer a[1] + a[3] != 5")
    extra = judged(sandbox, programs["extra"], language=language)
    assert (extra.verdict, extra.message) == ("fail", "checker: wrong output format extra output after the pair")


def test_a_broken_checker_fails_the_reference_and_says_it_is_the_checker(sandbox):
    # testlib's _fail (3): here the jury's answer file is unreadable to the checker.
    broken = judged(sandbox, "print(1, 2)", answer="")
    assert broken.verdict == "fail" and "the checker failed (the task's checker, not the program)" in broken.message
    crashed = judged(sandbox, "print(1, 2)", source='#include "testlib.h"\nint main() { *(volatile int *)0 = 1; }\n')
    assert crashed.verdict == "fail" and "killed by signal 11" in crashed.message


def test_the_checker_runs_alone_undumpable_with_its_three_files_only(sandbox):
    """What the checker process sees: not dumpable (no program could trace it or read its
    memory), no descriptor but its three files and stdio (not the judge's channel), no
    file it may write. It accepts only if all hold (on docker: the local backend runs as
    this machine's user, root here, for whom an execute-only file is readable)."""
    dumpable = "1" if sandbox.backend == "local" and os.geteuid() == 0 else "0"
    source = r'''#include <cstdio>
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include "testlib.h"
int main(int argc, char *argv[]) {
    registerTestlibCmd(argc, argv);
    if (prctl(PR_GET_DUMPABLE) != DUMPABLE) quitf(_wa, "dumpable");
    int fds = 0;
    DIR *d = opendir("/proc/self/fd");
    while (readdir(d)) fds++;
    // ., .., 0-2, the binary, input, output, answer, the three FILEs opened, the DIR itself
    if (fds != 2 + 3 + 1 + 3 + 3 + 1) quitf(_wa, "%d descriptors", fds - 2);
    struct rlimit r;
    getrlimit(RLIMIT_FSIZE, &r);
    if (r.rlim_cur != 0) quitf(_wa, "may write files");
    quitf(_ok, "alone");
}
'''
    outcome = judged(sandbox, "print(1, 2)", source=f"#define DUMPABLE {dumpable}\n{source}")
    assert (outcome.verdict, outcome.message) == ("pass", "")


@pytest.mark.docker
def test_programs_cannot_forge_the_checker_s_verdict(sandbox):
    """A wrong answer with testlib's own words, a program that leaves a process behind to
    signal or trace the checker, one that floods its output: each fails."""
    if sandbox.backend == "local":
        pytest.skip("attacks that signal every process run on docker only")
    attacks = {
        "says ok": "print('ok a right pair')\nimport sys\nprint('1 3', file=sys.stderr)\n",
        "left behind": (
            "import os, signal, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    end = time.time() + 3\n"
            "    while time.time() < end:\n"
            "        for p in os.listdir('/proc'):\n"
            "            if p.isdigit() and int(p) != os.getpid():\n"
            "                try:\n"
            "                    os.kill(int(p), signal.SIGSTOP)\n"
            "                except OSError:\n"
            "                    pass\n"
            "    os._exit(0)\n"
            "print(1, 3)\n"),
        "flood": "import sys\nsys.stdout.write('1 3 ' * 10**6)\n",
        "a NUL inside a number": "import sys\nsys.stdout.write('1\\x00 2')\n",  # the right pair with junk in a token
    }
    for name, program in attacks.items():
        outcome = judged(sandbox, program)
        assert outcome.verdict in ("fail", "timeout", "output_limit"), (name, outcome)


def test_a_checker_compiles_once_and_a_broken_one_is_a_loud_error(sandbox, tmp_cache):
    native_checker._BINARIES.clear()
    assert judged(sandbox, "print(1, 2)").verdict == "pass"
    [cached] = list((tmp_cache / "checkers").iterdir())
    assert cached.name == native_checker.key(pair_checker())
    stamp = cached.stat().st_mtime_ns
    native_checker._BINARIES.clear()  # a new process: the binary comes from the cache
    assert judged(sandbox, "print(3, 4)").verdict == "pass"
    assert cached.stat().st_mtime_ns == stamp and len(list((tmp_cache / "checkers").iterdir())) == 1
    with pytest.raises(SandboxError, match=re.escape("a C++ checker or interactor does not compile: ") + ".*no_such_name"):
        judged(sandbox, "print(1, 2)", source='#include "testlib.h"\nint main() { no_such_name(); }\n')


def test_c_plus_plus_checkers_are_for_io_tests_and_well_formed():
    from grpo_code.sandbox import CallTest

    with pytest.raises(SandboxError, match="judges io tests only"):
        Job("def f(): return 1", [CallTest("f", [], 1, checker="pair")], checkers={"pair": pair_checker()})
    for bad, why in (({"language": "rust", "source": "x"}, "language is 'rust'"),
                     ({"language": "cpp", "source": ""}, "source must be"),
                     ({"language": "cpp", "source": "x", "headers": {"../x.h": ""}}, "not a plain file name"),
                     ({"language": "cpp", "source": "x", "flags": "-O3"}, "unknown keys")):
        with pytest.raises(SandboxError, match=why):
            Job("print(1)", [IoTest("", "1\n", checker="c")], checkers={"c": bad})


def test_a_suite_gives_its_include_folder_to_its_cpp_checkers_and_hashes_it(tmp_path):
    import json

    from grpo_code.tasks.suite import load_suite_dir

    suite = tmp_path / "cf"
    (suite / "include").mkdir(parents=True)
    (suite / "include" / "testlib.h").write_text(HEADER)
    task = {"id": "t", "prompt": "p", "tests": [{"kind": "io", "stdin": STDIN, "stdout": "1 2\n", "checker": "pair"}],
            "checkers": {"pair": {"language": "cpp", "source": PAIR}}, "interactors": {"own": {
                "language": "cpp", "source": "int main() {}", "headers": {"testlib.h": "// its own"}}}}
    (suite / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    [loaded] = load_suite_dir(suite).tasks
    assert loaded.checkers["pair"] == pair_checker()
    assert loaded.interactors["own"]["headers"] == {"testlib.h": "// its own"}  # a task's own headers win
    (suite / "include" / "testlib.h").write_text(HEADER + "// changed\n")
    assert load_suite_dir(suite).tasks[0].content_hash != loaded.content_hash


def test_binaries_kept_in_memory_are_bounded_and_compiled_once(tmp_cache, monkeypatch):
    """A large suite's checkers (about 1 MB of base64 each) do not pile up in the host's
    memory: the last few stay, the others are read from the cache again, never recompiled."""
    compiled = []

    def compiler(files: dict) -> bytes:
        compiled.append(files["checker.cpp"])
        return files["checker.cpp"].encode() * 100

    monkeypatch.setattr(native_checker, "KEPT_BINARIES", 3)
    native_checker._BINARIES.clear()
    checkers = [{"language": "cpp", "source": f"int main() {{ return {i}; }}"} for i in range(8)]
    for _ in range(2):
        for checker in checkers:
            assert base64.b64decode(native_checker.binary(checker, compiler)) == checker["source"].encode() * 100
    assert len(native_checker._BINARIES) == 3 and len(compiled) == 8
