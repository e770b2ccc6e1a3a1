"""Round six (a red team on the toolchain languages), on docker. Each job here got a forged
attested pass or an ``infra_error`` before its fix:

- a program read its tests' sources left in the work directory while it ran (TypeScript's
  ``test_<i>.ts``, C++'s ``judge.cpp``, Go's script tests during its call tests): the work
  directory is emptied once the job's builds are sealed (native.run_with_runner);
- Perl's syntax check runs ``BEGIN`` blocks, and one put a FIFO where the executor then read
  the build's output: a build's output is opened without blocking and must be a regular file;
- a Java build filled the work directory's inodes, and the executor's next write failed:
  each build starts from an empty work directory, and sources that do not fit are the
  program's ``compile_error``;
- regular expressions the executor runs on the program's text took quadratic time (Rust's
  ``fn main`` and ``use`` lines, Go's comments and imports, Java's class headers): they are
  linear now.
After each, the pool serves a right program. Also a false fail: Ruby's and Racket's harnesses
report integers of any size as JSON numbers, which the executor could not read past 4300
digits."""

from __future__ import annotations

import pytest

from conftest import need_image
from grpo_code.config import SandboxConfig
from grpo_code.sandbox import Job, Limits, Sandbox, Status, Verdict
from grpo_code.sandbox.types import CallTest, IoTest, ScriptTest


def add_calls(fn: str = "add") -> tuple[CallTest, ...]:
    return (CallTest(fn=fn, args=(2, 3), expected=5), CallTest(fn=fn, args=(10, 1), expected=11))


TS_READS_TESTS = """declare var require: any;
function add(a: number, b: number): number {
    const fs = require('fs');
    let src = '';
    for (const f of fs.readdirSync('.')) if (/^test_\\d+\\.ts$/.test(f)) src += fs.readFileSync(f, 'utf8');
    const re = /candidate\\(\\s*(-?\\d+)\\s*,\\s*(-?\\d+)\\s*\\)\\s*,\\s*(-?\\d+)\\s*\\)/g;
    let m;
    while ((m = re.exec(src)) !== null) if (Number(m[1]) === a && Number(m[2]) === b) return Number(m[3]);
    return a - b;
}
"""
TS_TEST = ('declare var require: any;\nconst assert = require("node:assert");\n\nfunction test() {\n'
           '    let candidate = add;\n    assert.deepEqual(candidate(2, 3), 5);\n    assert.deepEqual(candidate(10, 1), 11);\n}\n\ntest();\n')
CPP_READS_JUDGE = """#include <bits/stdc++.h>
using namespace std;
int add(int a, int b) {
    for (const char* f : {"judge.cpp", "tests.cpp"}) {
        ifstream in(f);
        if (!in) continue;
        stringstream ss; ss << in.rdbuf(); string s = ss.str();
        regex re("add\\\\((-?\\\\d+), (-?\\\\d+)\\\\) == (-?\\\\d+)");
        for (sregex_iterator it(s.begin(), s.end(), re), end; it != end; ++it)
            if (stoi((*it)[1]) == a && stoi((*it)[2]) == b) return stoi((*it)[3]);
    }
    return a - b;
}
"""
GO_READS_SCRIPT = """package main

import (
	"os"
	"regexp"
	"strconv"
)

func Add(a int, b int) int {
	src, _ := os.ReadFile("/tmp/script/test0_test.go")
	re := regexp.MustCompile(`Equal\\((-?\\d+), Add\\((-?\\d+), (-?\\d+)\\)\\)`)
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		x, _ := strconv.Atoi(m[2]); y, _ := strconv.Atoi(m[3]); e, _ := strconv.Atoi(m[1])
		if x == a && y == b { return e }
	}
	return a - b
}
"""
GO_SCRIPT = ('import (\n\t"testing"\n\t"github.com/stretchr/testify/assert"\n)\n\nfunc TestAdd(t *testing.T) {\n'
             '\tassert := assert.New(t)\n\tassert.Equal(5, Add(2, 3))\n\tassert.Equal(11, Add(10, 1))\n}\n')
WRONG_JAVA = "class Solution {\n    public int add(int a, int b) { return a - b; }\n}\n"

CPP_INCBIN_JUDGE = """#include <bits/stdc++.h>
using namespace std;
asm(".section .rodata\\n.globl grpo_judge_src\\ngrpo_judge_src:\\n.incbin \\"judge.cpp\\"\\n.byte 0\\n.text\\n");
extern "C" const char grpo_judge_src[];
int add(int a, int b) {
    string s(grpo_judge_src);
    regex re("add\\\\((-?\\\\d+), (-?\\\\d+)\\\\) == (-?\\\\d+)");
    for (sregex_iterator it(s.begin(), s.end(), re), end; it != end; ++it)
        if (stoi((*it)[1]) == a && stoi((*it)[2]) == b) return stoi((*it)[3]);
    return a - b;
}
"""
CPP_ASSERTS = ScriptTest("int main() {\n    assert(add(2, 3) == 5);\n    assert(add(10, 1) == 11);\n}\n")
CPP_DECLARED = "#include <bits/stdc++.h>\nusing namespace std;\nint add(int a, int b);\n"

FORGERS = {
    "typescript reads test_<i>.ts": Job(TS_READS_TESTS, (ScriptTest(TS_TEST),), language="typescript"),
    "c++ reads judge.cpp": Job(CPP_READS_JUDGE, (ScriptTest("int main() {\n    assert(add(2, 3) == 5);\n"
                                                            "    assert(add(10, 1) == 11);\n}\n"),),
                               language="cpp", helpers="#include <bits/stdc++.h>\nusing namespace std;\nint add(int a, int b);\n"),
    # round six, second pass: the judge's source was on disk while the program compiled
    "c++ embeds judge.cpp at compile time": Job(CPP_INCBIN_JUDGE, (CPP_ASSERTS,), language="cpp",
                                                helpers=CPP_DECLARED),
    "go reads its script test during the calls": Job(GO_READS_SCRIPT, (ScriptTest(GO_SCRIPT), *add_calls("Add")),
                                                     language="go"),
}
HOSTILE = {
    "perl's BEGIN puts a FIFO where the check's output is read": Job(
        'BEGIN { use POSIX (); unlink "main.pl"; POSIX::mkfifo("main.pl", 0600); }\n'
        "sub add { my ($a, $b) = @_; return $a - $b; }\n", add_calls(), language="perl"),
    "java's io build fills the work directory's inodes": Job(
        WRONG_JAVA + "".join(f"class C{i}{{}}\n" for i in range(8400)),
        (IoTest("", ""), CallTest(fn="add", args=(2, 3), expected=5)), language="java",
        limits=Limits(timeout_s=2.0, memory_mb=512)),
    "rust: 60000 blank lines before the function": Job(
        "\n" * 60000 + "fn add(a: i64, b: i64) -> i64 { a - b }\n", add_calls(), language="rust"),
    "go: an unclosed comment opened 60000 times": Job(
        "package main\n\nfunc add(a int, b int) int { return a - b }\n" + "/*a" * 60000, add_calls(), language="go"),
    "go: a program that leaves no room for the build cache": Job(
        "package main\n\nfunc add(a int, b int) int { return a - b }\n/*" + "x" * (48 << 20) + "*/\n",
        add_calls(), language="go"),
    "java: 50000 lines of 'public' in a comment": Job(
        WRONG_JAVA + "/*\n" + "public\n" * 50000 + "*/\n", add_calls(), language="java"),
}
PROGRAMS_OWN = {Verdict.FAIL, Verdict.COMPILE_ERROR, Verdict.TIMEOUT, Verdict.RUNTIME_ERROR}
RIGHT = {
    "typescript": "function add(a: number, b: number): number {\n    return a + b;\n}\n",
    "cpp": "int add(int a, int b) { return a + b; }\n",
    "go": "package main\n\nfunc Add(a int, b int) int { return a + b }\n",
    "perl": "sub add { my ($a, $b) = @_; return $a + $b; }\n",
    "java": "class Solution {\n    public int add(int a, int b) { return a + b; }\n}\n",
    "rust": "fn add(a: i64, b: i64) -> i64 { a + b }\n",
}


@pytest.fixture(scope="module")
def sandbox(docker_ready):
    for language in ("typescript", "cpp", "go", "perl", "java", "rust"):
        need_image(language)
    sb = Sandbox(SandboxConfig(backend="docker", workers=2, timeout_s=2.0, memory_mb=256))
    yield sb
    sb.close()


def then_right(job: Job) -> Job:
    fn = "Add" if job.language == "go" else "add"
    return Job(RIGHT[job.language], add_calls(fn), language=job.language)


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(FORGERS))
def test_a_program_cannot_read_its_tests_from_the_work_directory(sandbox, name):
    result, after = sandbox.run([FORGERS[name], then_right(FORGERS[name])])
    assert result.status is Status.FAIL and result.passed == 0, result
    assert after.status is Status.PASS, after


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_build_or_text_is_the_programs_verdict(sandbox, name):
    result, after = sandbox.run([HOSTILE[name], then_right(HOSTILE[name])])
    assert result.status is Status.FAIL and result.error is None, result  # not Status.INFRA_ERROR
    assert all(t.verdict in PROGRAMS_OWN for t in result.tests), result
    assert after.status is Status.PASS, after


@pytest.mark.docker
def test_an_integer_of_any_size_returned_by_ruby_is_read(sandbox):
    need_image("ruby")
    big = {"$i": hex(2**20000)}
    [result] = sandbox.run([Job("def p2(n)\n  2**n\nend\n",
                                (CallTest(fn="p2", args=(20000,), expected=big), CallTest(fn="p2", args=(20000,), expected=5),
                                 CallTest(fn="p2", args=(400000,), expected=5), CallTest(fn="p2", args=(10,), expected=1024)),
                                language="ruby")])
    assert [t.verdict for t in result.tests] == [Verdict.PASS, Verdict.FAIL, Verdict.FAIL, Verdict.PASS], result
    assert result.error is None and all(t.attested for t in result.tests)


@pytest.mark.docker
@pytest.mark.parametrize("language, program", [("ruby", "def ident(n)\n  n * 1\nend\n"),
                                               ("racket", "#lang racket\n(define (ident n) (* n 1))\n")])
def test_ruby_and_racket_take_arguments_of_any_size(sandbox, language, program):
    need_image(language)
    tests = tuple(CallTest(fn="ident", args=({"$i": hex(v)},), expected={"$i": hex(v)}) for v in (2**70, -(3**90)))
    [result] = sandbox.run([Job(program, tests + (CallTest(fn="ident", args=(7,), expected=7),), language=language)])
    assert result.status is Status.PASS and all(t.attested for t in result.tests), result


@pytest.mark.docker
def test_a_recorded_integer_of_any_size_comes_back_in_the_suites_form(sandbox):
    need_image("ruby")
    [result] = sandbox.run([Job("def p2(n)\n  2**n\nend\n", (CallTest(fn="p2", args=(20000,)),), language="ruby",
                                record=True)])
    assert result.status is Status.PASS and result.error is None, result
    assert result.tests[0].value == {"$i": hex(2**20000)}
