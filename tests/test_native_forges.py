"""Forged passes of native tests (issue 40, holes 5 and 6), on docker.

A C++ ``script`` test without the task's declarations runs its asserts inside the
program's process (JavaScript's, and C++ ones with declarations, run in a judge of their
own: tests/test_native_judge.py), and a program can forge the harness's "completed" report: JavaScript through node's shared
Buffer pool (it holds the harness's payload, nonce included), C++ through a static
initializer that reads the nonce from fd 4 before ``main``. Against such a test the forge
must not earn a reward (the result is unattested, and an unattested pass is a fail for the
verifier). Against the same asserts converted to ``call`` tests by the humaneval adapter
the forge fails outright: the process holds only arguments, its report is a returned
value, and the comparison happens outside it. A right program passes the converted tests.
"""

from __future__ import annotations

import pytest

from conftest import need_image
from grpo_code.config import RewardsConfig, RewardTestsConfig, SandboxConfig
from grpo_code.rewards import reward_of, reward_verifier
from grpo_code.sandbox import Sandbox
from grpo_code.tasks import adapters
from grpo_code.tasks.extract import Extraction
from grpo_code.tasks.suite import suite_from_records

pytestmark = pytest.mark.docker

RECORDS = {
    "javascript": {
        "task_id": "JavaScript/90",
        "prompt": "/* Return the distinct numbers of nums in ascending order.\n  >>> uniqueSorted([5, 3, 5])\n"
                  "  [3, 5]\n  */\nconst uniqueSorted = (nums) => {\n",
        "canonical_solution": "  return [...new Set(nums)].sort((a, b) => a - b);\n}\n\n",
        "test": "const testUniqueSorted = () => {\n"
                "  console.assert(JSON.stringify(uniqueSorted([5, 3, 5])) === JSON.stringify([3, 5]))\n"
                "  console.assert(JSON.stringify(uniqueSorted([])) === JSON.stringify([]))\n"
                "  console.assert(JSON.stringify(uniqueSorted([10, 9, 10])) === JSON.stringify([9, 10]))\n"
                "}\n\ntestUniqueSorted()\n",
    },
    "cpp": {
        "task_id": "CPP/90",
        "prompt": "/*\nReturn the distinct numbers of nums in ascending order.\n>>> unique_sorted({5, 3, 5})\n{3, 5}\n*/\n"
                  "#include<stdio.h>\n#include<vector>\n#include<algorithm>\nusing namespace std;\n"
                  "vector<int> unique_sorted(vector<int> nums){\n",
        "canonical_solution": "    sort(nums.begin(), nums.end());\n"
                              "    nums.erase(unique(nums.begin(), nums.end()), nums.end());\n    return nums;\n}\n",
        "test": "#undef NDEBUG\n#include<assert.h>\nbool issame(vector<int> a,vector<int>b){\n"
                "    if (a.size()!=b.size()) return false;\n    for (int i=0;i<a.size();i++)\n    {\n"
                "    if (a[i]!=b[i]) return false;\n    }\n    return true;\n}\nint main(){\n"
                "    assert (issame(unique_sorted({5, 3, 5}) , {3, 5}));\n"
                "    assert (issame(unique_sorted({}) , {}));\n"
                "    assert (issame(unique_sorted({10, 9, 10}) , {9, 10}));\n}\n",
    },
}

# Wrong answers (an empty list) that forge the harness's "completed" report before any test runs.
FORGES = {
    "javascript": "  return [];\n}\n"
                  "const pool = Buffer.from(Buffer.allocUnsafe(1).buffer).toString('latin1');\n"
                  "const found = /\"nonce\":\\s*\"([0-9a-f]+)\"/.exec(pool);\n"
                  "if (found) {\n"
                  "  require('fs').writeSync(3, '{\"nonce\":\"' + found[1] + '\",\"event\":\"completed\"}\\n');\n"
                  "  process.reallyExit(0);\n"
                  "}\n",
    "cpp": "    return {};\n}\n"
           "#include <unistd.h>\n#include <string>\n"
           "static int forged = [] {\n"
           "    char buf[80] = {0};\n"
           "    long n = pread(4, buf, 64, 0);\n"
           "    std::string nonce(buf, n > 0 ? n : 0);\n"
           "    nonce = nonce.substr(0, nonce.find('\\n'));\n"
           "    std::string line = \"{\\\"nonce\\\":\\\"\" + nonce + \"\\\",\\\"event\\\":\\\"completed\\\"}\\n\";\n"
           "    write(3, line.data(), line.size());\n"
           "    _exit(0);\n"
           "    return 0;\n"
           "}();\n",
}


@pytest.fixture(scope="module")
def sandbox(docker_ready):
    for language in RECORDS:
        need_image(language)
    sb = Sandbox(SandboxConfig(backend="docker", workers=2, timeout_s=5.0, memory_mb=256, compile_timeout_s=20.0))
    yield sb
    sb.close()


def _suite(language: str, script: bool):
    [record] = adapters.humaneval([RECORDS[language]], language=language)
    if script:  # the asserts as one script test, as the adapter wrote them before conversion
        record["tests"] = [{"kind": "script", "code": RECORDS[language]["test"]}]
    return suite_from_records("forges", [record], "forges")


def judged_task(verifier):
    [task] = verifier.tasks.values()
    return task


def _handle(verifier, body: str):
    task = judged_task(verifier)
    return verifier.submit_extraction(task, Extraction(task.prompt + body, "solution"))


def _judge(sandbox, language: str, script: bool, body: str):
    suite = _suite(language, script)
    [task] = suite.tasks
    verifier = reward_verifier(RewardsConfig(), sandbox, suite)
    handle = _handle(verifier, body)
    raw = verifier.result(handle)
    judged = verifier.judged(handle)
    return raw, judged, reward_of(judged, task, RewardsConfig())


@pytest.mark.parametrize("language", sorted(RECORDS))
def test_a_forged_script_pass_earns_no_reward(sandbox, language):
    raw, judged, reward = _judge(sandbox, language, True, FORGES[language])
    assert raw.status.value != "infra_error", raw
    [test] = raw.tests
    # Whatever the harness saw, the verdict rests on the program's own process...
    assert test.verdict.value != "pass" or not test.attested, test
    # ...so it is no pass for the reward, nor for eval.
    assert reward == 0.0 and not judged.passed, (judged, raw)
    if test.verdict.value == "pass":  # the forge worked: trusting such passes is the hack the key opts into
        trusting = reward_verifier(RewardsConfig(tests=RewardTestsConfig(trust_unattested=True)), sandbox,
                                   _suite(language, True))
        assert reward_of(trusting.judged(_handle(trusting, FORGES[language])), judged_task(trusting),
                         RewardsConfig()) == 1.0


@pytest.mark.parametrize("language", sorted(RECORDS))
def test_a_forge_fails_the_converted_call_tests(sandbox, language):
    raw, judged, reward = _judge(sandbox, language, False, FORGES[language])
    assert [t.verdict.value for t in raw.tests] == ["fail"] * 3, raw
    assert all(t.attested for t in raw.tests)
    assert reward == 0.0 and not judged.passed


@pytest.mark.parametrize("language", sorted(RECORDS))
def test_a_right_program_passes_the_converted_call_tests(sandbox, language):
    raw, judged, reward = _judge(sandbox, language, False, RECORDS[language]["canonical_solution"])
    assert [t.kind for t in _suite(language, False).tasks[0].tests] == ["call"] * 3
    assert [t.verdict.value for t in raw.tests] == ["pass"] * 3, raw
    assert all(t.attested for t in raw.tests)
    assert reward == 1.0 and judged.passed
