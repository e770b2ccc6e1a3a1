"""LiveCodeBench, TACO, PrimeIntellect and DeepCoder records (grpo_code/tasks/rl_sets.py).

The records are written here in each dataset's shape (field names and encodings as the
public releases have them), small enough to read."""

from __future__ import annotations

import base64
import json
import os
import pickle
import re
import shutil
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grpo_code.cli import app
from grpo_code.errors import SuiteError
from grpo_code.tasks import adapters
from grpo_code.tasks.packed import restricted_unpickle
from grpo_code.tasks.records import UnreadableRecordsError, detect_format
from grpo_code.tasks.rl_sets import (
    JUDGE_PRELUDE,
    deepcoder,
    livecodebench,
    primeintellect,
    taco,
)

runner = CliRunner()


def packed(value: object) -> str:
    """LiveCodeBench's private tests: base64 of zlib of a pickle (of the JSON text)."""
    return base64.b64encode(zlib.compress(pickle.dumps(value))).decode()


def lcb_leetcode(date: str = "2024-03-02T00:00:00", private: object = None) -> dict:
    cases = [{"input": "[2, 7, 11, 15]\n9", "output": "[0, 1]", "testtype": "functional"}]
    hidden = [{"input": "[3, 2, 4]\n6", "output": "[1, 2]", "testtype": "functional"},
              {"input": "[3, 3]\n6", "output": "[0, 1]", "testtype": "functional"}]
    return {"question_title": "two-sum", "question_content": "Return the indices of the two numbers that add up "
            "to target.", "platform": "leetcode", "question_id": "3001", "contest_id": "weekly-contest-385",
            "contest_date": date, "difficulty": "easy",
            "starter_code": "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        ",
            "public_test_cases": json.dumps(cases),
            "private_test_cases": packed(json.dumps(hidden)) if private is None else private,
            "metadata": json.dumps({"func_name": "twoSum"})}


def lcb_atcoder() -> dict:
    cases = [{"input": "3\n1 2 3\n", "output": "6\n", "testtype": "stdin"}]
    hidden = [{"input": "2\n10 20\n", "output": "30\n", "testtype": "stdin"}]
    return {"question_title": "Sum", "question_content": "Print the sum of the N integers.", "platform": "atcoder",
            "question_id": "abc342_a", "contest_id": "abc342", "contest_date": "2024-02-24T00:00:00",
            "difficulty": "easy", "starter_code": "", "public_test_cases": json.dumps(cases),
            "private_test_cases": json.dumps(hidden), "metadata": "{}"}


LEETCODE_CHECK = '''def check(candidate):
    assert candidate(nums=[2, 1, 3], k=2) == 1
    assert candidate(nums=[1, 1, 1], k=1) == 0
    assert candidate(nums=[5], k=9) == 1


check(Solution().minOperations)
'''
# DeepCoder's LeetCode copy: a method using List without an import, tests as a check script.
DEEPCODER_LEETCODE = {
    "problem": "Return how many elements of nums are smaller than k.",
    "solutions": ["class Solution:\n    def minOperations(self, nums: List[int], k: int) -> int:\n"
                  "        return sum(1 for x in nums if x < k)\n"],
    "tests": json.dumps({"functional": LEETCODE_CHECK}),
}


def write_suite(tmp_path: Path, tasks: list[dict], name: str) -> Path:
    suite = tmp_path / name
    suite.mkdir()
    (suite / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return suite


def check(suite: Path, *extra: str) -> dict:
    result = runner.invoke(app, ["tasks", "check", str(suite), "--backend", "local", "--json", *extra])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


# --------------------------------------------------------------------------- livecodebench


def test_livecodebench_reads_functional_and_stdin_problems_and_the_packed_private_tests() -> None:
    leet, atc = livecodebench([lcb_leetcode(), lcb_atcoder()])
    assert leet["id"] == "lcb/3001" and leet["entry_point"] == "Solution"
    assert [t["fn"] for t in leet["tests"]] == ["Solution.twoSum"] * 3
    assert leet["tests"][1] == {"kind": "call", "fn": "Solution.twoSum", "args": [[3, 2, 4], 6], "expected": [1, 2]}
    assert leet["public_tests"] == leet["tests"][:1]
    assert leet["prelude"] == JUDGE_PRELUDE and leet["limits"] == {"timeout_s": 6}
    assert leet["metadata"]["contest_date"] == "2024-03-02T00:00:00" and leet["metadata"]["platform"] == "leetcode"
    assert "class Solution" in leet["prompt"]
    assert [t["kind"] for t in atc["tests"]] == ["io", "io"] and atc["tests"][1]["stdin"] == "2\n10 20\n"


def test_livecodebench_window_keeps_contests_from_since_to_until() -> None:
    records = [lcb_leetcode(date=d) for d in ("2024-01-31T00:00:00", "2024-02-01T00:00:00", "2024-05-01T00:00:00")]
    for i, r in enumerate(records):
        r["question_id"] = str(i)
    kept = livecodebench(records, since="2024-02-01", until="2024-05-01")
    assert [t["id"] for t in kept] == ["lcb/1", "lcb/2"]
    with pytest.raises(SuiteError, match="YYYY-MM-DD"):
        livecodebench(records, since="Feb 2024")


class _Runs:
    """A pickle that would run a command when loaded by pickle.loads."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_private_test_pickle_that_would_run_code_is_never_loaded(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    evil = lcb_leetcode(private=packed(_Runs(marker)))
    with pytest.raises(UnreadableRecordsError) as info:
        livecodebench([evil, lcb_atcoder()])
    assert not marker.exists()
    (skipped,) = info.value.conversion.skipped
    assert skipped.field == "private_test_cases" and "posix.system" in skipped.reason
    assert [t["id"] for t in info.value.conversion.tasks] == ["lcb/abc342_a"]
    for value in (b"\x80\x04K\x01\x85\x94.", pickle.dumps(b"bytes"), pickle.dumps({1: "a"}), b"not a pickle"):
        with pytest.raises(pickle.UnpicklingError):
            restricted_unpickle(value)
    assert restricted_unpickle(pickle.dumps([{"input": "1", "n": 2, "x": None}])) == [{"input": "1", "n": 2, "x": None}]


def test_livecodebench_big_ints_read_whole() -> None:
    record = lcb_leetcode()
    big = "9" * 5000
    record["public_test_cases"] = json.dumps([{"input": f"[{big}]\n1", "output": big, "testtype": "functional"}])
    (task,) = livecodebench([record])
    assert task["tests"][0]["args"][0][0] == {"$i": hex(10 ** 5000 - 1)}  # the codec's form of a big int
    json.dumps(task)  # writable, past Python's 4300-digit limit


def test_livecodebench_programs_are_judged_as_its_grader_judges_them(tmp_path: Path) -> None:
    suite = write_suite(tmp_path, livecodebench([lcb_leetcode(), lcb_atcoder()]), "lcb")
    right = {"lcb/3001": "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
                         "        seen = {}\n        for i, x in enumerate(nums):\n"
                         "            if target - x in seen:\n                return (seen[target - x], i)\n"
                         "            seen[x] = i\n",
             "lcb/abc342_a": "input()\nprint(sum(map(int, input().split())))\n"}
    wrong = {"lcb/3001": "class Solution:\n    def twoSum(self, nums, target):\n        return [0, 1]\n",
             "lcb/abc342_a": "print(6)\n"}
    for programs, passed in ((right, 2), (wrong, 0)):
        path = tmp_path / "solutions.jsonl"
        path.write_text("".join(json.dumps({"task_id": k, "solution": v}) + "\n" for k, v in programs.items()))
        assert check(suite, "--solutions", str(path))["file"]["passed"] == passed


# --------------------------------------------------------------------------- deepcoder


def test_deepcoders_leetcode_shape_converts_and_its_reference_passes(tmp_path: Path) -> None:
    records = [dict(DEEPCODER_LEETCODE, id=i) for i in range(3)]
    tasks = deepcoder(records)
    assert len(tasks) == 3
    task = tasks[0]
    assert task["entry_point"] == "Solution" and len(task["tests"]) == 3
    assert task["tests"][0]["code"] == ("candidate = Solution().minOperations\n"
                                        "assert candidate(nums=[2, 1, 3], k=2) == 1\n")
    assert "def minOperations(self, nums: List[int], k: int) -> int:" in task["prompt"]
    report = check(write_suite(tmp_path, tasks[:1], "leetcode"))
    assert report["reference"]["passed"] == report["empty"]["failed"] == 1, report


def test_other_adapters_point_deepcoder_records_to_deepcoder() -> None:
    for fmt in ("humaneval", "call", "apps"):
        with pytest.raises(SuiteError, match="use the deepcoder adapter"):
            adapters.ADAPTERS[fmt]([DEEPCODER_LEETCODE])
    # codecontests reads rllm's stdin/stdout records, and says which adapter reads the rest
    with pytest.raises(UnreadableRecordsError, match=r"tests: a LeetCode check script .*convert deepcoder"):
        adapters.ADAPTERS["codecontests"]([DEEPCODER_LEETCODE])


def test_deepcoder_reads_its_lcb_primeintellect_taco_and_codeforces_records() -> None:
    records = [
        {"problem": "Add two numbers.", "tests": [{"input": "1\n2", "output": "3", "testtype": "functional"}],
         "metadata": {"func_name": "add"}, "starter_code": "class Solution:\n    def add(self, a, b):\n        "},
        {"problem": "Double it.", "tests": [{"type": "function_call", "fn_name": "double", "input": [4],
                                             "output": [8]}]},
        {"problem": "Echo.", "tests": {"inputs": ["x\n"], "outputs": ["x\n"]}, "solutions": ["print(input())"]},
        {"problem": "Echo.", "tests": [{"input": "y\n", "output": "y\n"}]},
    ]
    lcb, pi, tc, cf = deepcoder(records)
    assert lcb["tests"][0] == {"kind": "call", "fn": "Solution.add", "args": [1, 2], "expected": 3}
    assert pi["tests"][0] == {"kind": "call", "fn": "double", "args": [4], "expected": 8}
    assert tc["tests"][0]["kind"] == "io" and tc["reference"] == "print(input())"
    assert cf["tests"][0] == {"kind": "io", "stdin": "y\n", "stdout": "y\n"}
    assert all(t["prelude"] == JUDGE_PRELUDE for t in (lcb, pi, tc, cf))


# --------------------------------------------------------------------------- taco, primeintellect


TACO = {"question": "Print the square of N.", "solutions": json.dumps(["n = int(input())\nprint(n * n)\n"]),
        "starter_code": "", "input_output": json.dumps({"inputs": ["3\n", "5\n"], "outputs": ["9\n", "25\n"]}),
        "difficulty": "EASY", "raw_tags": "['Math']", "name": None, "source": "codechef", "tags": "['Mathematics']",
        "skill_types": "[]", "url": "https://www.codechef.com/problems/SQ", "Expected Auxiliary Space": None,
        "time_limit": "1 seconds", "date": "2021-01-01", "picture_num": "0", "memory_limit": "256 megabytes",
        "Expected Time Complexity": None}

PRIME = {"source": "taco", "task_type": "verifiable_code", "problem_id": "vfc_1", "in_source_id": "x1",
         "prompt": "Solve the following coding problem using the programming language python:\n\nReturn n + 1.",
         "gold_standard_solution": "```python\ndef inc(n):\n    return n + 1\n```",
         "verification_info": json.dumps({"language": "python", "test_cases": [
             {"type": "function_call", "fn_name": "inc", "input": [1], "output": [2]},
             {"type": "function_call", "fn_name": "inc", "input": [41], "output": [42]}]}),
         "metadata": json.dumps({"difficulty": "EASY", "time_limit": "2 seconds", "memory_limit": None})}


def test_taco_and_primeintellect_keep_limits_and_references(tmp_path: Path) -> None:
    (t,) = taco([TACO])
    assert t["limits"] == {"timeout_s": 1.0, "memory_mb": 256} and t["metadata"]["source"] == "taco"
    (p,) = primeintellect([PRIME])
    assert p["tests"][1] == {"kind": "call", "fn": "inc", "args": [41], "expected": 42}
    assert p["reference"] == "def inc(n):\n    return n + 1\n" and p["limits"] == {"timeout_s": 2.0}
    report = check(write_suite(tmp_path, [t, p], "mixed"))
    assert report["reference"]["passed"] == report["empty"]["failed"] == 2, report


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize("record, fmt", [
    (lcb_leetcode(), "livecodebench"), (TACO, "taco"), (PRIME, "primeintellect"), (DEEPCODER_LEETCODE, "deepcoder"),
    ({"problem": "p", "tests": {"inputs": ["1"], "outputs": ["1"]}}, "codecontests"),
    ({"task_id": "HumanEval/0", "prompt": "def f():\n", "entry_point": "f", "test": ""}, "humaneval"),
])
def test_detect_format_names_the_adapter(record: dict, fmt: str) -> None:
    assert detect_format([record]) == fmt


def test_detect_format_says_when_it_cannot_tell(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match=r"cannot tell the format .*fields: answer, question_text"):
        detect_format([{"question_text": "x", "answer": 1}])
    src = tmp_path / "leetcode.json"
    src.write_text(json.dumps([DEEPCODER_LEETCODE]))
    result = runner.invoke(app, ["tasks", "convert", "auto", str(src), str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "format: deepcoder" in result.output and "wrote 1 tasks" in result.output


# --------------------------------------------------------------------------- kodcode


KODCODE_TEST = '''import pytest
from solution import safe_div


def test_divides():
    assert safe_div(6, 3) == 2
    assert safe_div(1, 3) == pytest.approx(0.3333333)


def test_by_zero():
    with pytest.raises(ValueError, match="zero"):
        safe_div(1, 0)


@pytest.mark.parametrize("a, b, q", [(8, 2, 4), (9, 3, 3)])
def test_table(a, b, q):
    assert safe_div(a, b) == q
'''
KODCODE = {"question_id": "Prefill_1", "subset": "Prefill", "style": "instruct", "gpt_difficulty": "easy",
           "question": "Write a function safe_div(a, b) that returns a / b and raises ValueError('division by "
                       "zero') when b is 0.",
           "solution": "def safe_div(a, b):\n    if b == 0:\n        raise ValueError('division by zero')\n"
                       "    return a / b\n",
           "test": KODCODE_TEST,
           "test_info": [{"function_name": "safe_div", "parameter_list": "(a, b)",
                          "function_declaration": "def safe_div(a, b):", "docstring": None}]}


def test_kodcode_collects_each_test_function_and_runs_it_without_pytest(tmp_path: Path) -> None:
    (task,) = adapters.ADAPTERS["kodcode"]([KODCODE])
    assert [t["code"].rsplit("\n", 2)[-2] for t in task["tests"]] == [
        "__run_test__(test_divides)", "__run_test__(test_by_zero)", "__run_test__(test_table)"]
    assert "from solution import" not in task["tests"][0]["code"] and "import pytest" not in task["tests"][0]["code"]
    assert task["entry_point"] == "safe_div" and "def safe_div(a, b):" in task["prompt"]
    assert detect_format([KODCODE]) == "kodcode"
    suite = write_suite(tmp_path, [task], "kodcode")
    report = check(suite)
    assert report["reference"]["passed"] == report["empty"]["failed"] == 1, report
    programs = {
        # right but for the message: test_by_zero fails on match
        "wrong message": "def safe_div(a, b):\n    if b == 0:\n        raise ValueError('no')\n    return a / b\n",
        # wrong on one parameter set only: test_table fails
        "one set": "def safe_div(a, b):\n    if b == 0:\n        raise ValueError('zero')\n"
                   "    return 3 if a == 9 else a / b + (a == 8)\n",
        # the SWE-smith hack: make the test module fail to import, hoping no test runs
        "no import": "raise SystemExit(0)\n",
        "exit in call": "import os\ndef safe_div(a, b):\n    os._exit(0)\n",
        # patch the test runner the module would import
        "fake pytest": "import sys, types\npytest = types.SimpleNamespace(raises=lambda *a, **k: None, approx=lambda x: "
                       "x)\nsys.modules['pytest'] = pytest\ndef safe_div(a, b):\n    return 0\n",
        # an object that equals everything
        "lying eq": "class Any:\n    def __eq__(self, other):\n        return True\ndef safe_div(a, b):\n"
                    "    if b == 0:\n        raise ValueError('zero')\n    return Any()\n",
    }
    for name, program in programs.items():
        path = tmp_path / "solutions.jsonl"
        path.write_text(json.dumps({"task_id": "kodcode/Prefill_1", "solution": program}) + "\n")
        assert check(suite, "--solutions", str(path))["file"]["passed"] == 0, name


@pytest.mark.parametrize("test, reason", [
    ("import solution\ndef test_a():\n    assert solution.f() == 1\n", "imports solution as a module"),
    ("from solution import f\ndef test_a(tmp_path):\n    f()\n", "takes fixtures (tmp_path)"),
    ("import pytest\nfrom solution import f\n@pytest.fixture(params=[1, 2])\ndef n(request):\n    return request.param\n"
     "def test_a(n):\n    f()\n", "fixture n is parametrized"),
    ("from solution import f\nclass TestF:\n    def test_a(self):\n        assert f()\n", "test class TestF"),
    ("from solution import f\n", "no test_* functions"),
    ("def test_a(:\n", "not Python"),
])
def test_kodcode_records_it_cannot_run_are_unreadable(test: str, reason: str) -> None:
    with pytest.raises(UnreadableRecordsError, match=re.escape(reason)):
        adapters.ADAPTERS["kodcode"]([dict(KODCODE, test=test)])


def test_the_prelude_goes_first_or_after_the_future_imports() -> None:
    from grpo_code.tasks.schema import task_from_dict, with_prelude

    assert with_prelude("from typing import *", "x = 1\n") == "from typing import *\nx = 1\n"
    program = '"""Doc."""\nfrom __future__ import annotations\nfrom __future__ import division\nx: List[int] = []\n'
    assert with_prelude("P", program).splitlines()[2] == "from __future__ import division; P"
    record = {"id": "t", "prompt": "p", "tests": [{"kind": "call", "fn": "f", "args": [], "expected": 1}],
              "prelude": "from typing import *"}
    task = task_from_dict(record, "t")
    assert task.job("def f() -> List[int]:\n    return 1\n").program.startswith("from typing import *\ndef f()")
    assert task_from_dict(task.to_dict(), "t") == task
    for bad in ({"prelude": "import a\nimport b"}, {"prelude": "x", "language": "javascript"}):
        with pytest.raises(SuiteError, match="prelude"):
            task_from_dict({**record, **bad}, "t")


# --------------------------------------------------------------------------- codeforces


def cf_record(**change) -> dict:
    record = {"id": "1999/A", "contest_id": "1999", "index": "A", "title": "A. Double",
              "description": "Given n, print 2n.", "input_format": "One integer n (1 <= n <= 100).",
              "output_format": "Print 2n.", "interaction_format": None, "note": None,
              "examples": [{"input": "3\n", "output": "6\n"}],
              "official_tests": [{"input": "3\n", "output": "6\n"}, {"input": "100\n", "output": "200\n"}],
              "official_tests_complete": True, "time_limit": 1.0, "memory_limit": 256.0, "input_mode": "stdio",
              "generated_checker": None, "executable": True, "rating": 800, "tags": ["math"]}
    return {**record, **change}


GUESS_INTERACTOR = '''import sys
n = int(test_input)
for _ in range(12):
    words = input().split()
    if words[0] == "!":
        sys.exit(0 if int(words[1]) == n else 1)
    g = int(words[1])
    print("<" if n < g else ">" if n > g else "=")
sys.exit(1)
'''


def test_codeforces_problems_interactive_ones_included(tmp_path: Path) -> None:
    plain, checked, interactive = adapters.ADAPTERS["codeforces"]([
        cf_record(),
        cf_record(id="1999/B", generated_checker="#include \"testlib.h\"\nint main() {}"),
        cf_record(id="1999/C", interaction_format="Guess n with at most 12 queries.", interactor=GUESS_INTERACTOR,
                  official_tests=[{"input": "777", "output": ""}, {"input": "1", "output": ""}]),
    ])
    assert plain["limits"] == {"timeout_s": 1.0, "memory_mb": 256} and len(plain["tests"]) == 2
    assert "Example 1\nInput:\n3\nOutput:\n6" in plain["prompt"] and plain["public_tests"][0]["stdout"] == "6\n"
    assert checked["metadata"]["needs_checker"] is True
    assert interactive["tests"][0] == {"kind": "io", "stdin": "777", "interactor": "interactor"}
    assert detect_format([cf_record()]) == "codeforces"
    suite = write_suite(tmp_path, [plain, interactive], "cf")
    programs = {"cf/1999/A": "print(2 * int(input()))\n",
                "cf/1999/C": "lo, hi = 1, 1000\nwhile True:\n    m = (lo + hi) // 2\n    print('?', m, flush=True)\n"
                             "    r = input()\n    if r == '=':\n        print('!', m, flush=True)\n        break\n"
                             "    lo, hi = (lo, m - 1) if r == '<' else (m + 1, hi)\n"}
    path = tmp_path / "solutions.jsonl"
    path.write_text("".join(json.dumps({"task_id": k, "solution": v}) + "\n" for k, v in programs.items()))
    assert check(suite, "--solutions", str(path))["file"]["passed"] == 2
    path.write_text(json.dumps({"task_id": "cf/1999/C", "solution": "print('! 500', flush=True)\n"}) + "\n")
    assert check(suite, "--solutions", str(path))["file"]["passed"] == 0


TESTLIB = Path(__file__).parent / "fixtures" / "testlib" / "testlib.h"
ANY_DIVISOR = r'''#include "testlib.h"
int main(int argc, char *argv[]) {
    registerTestlibCmd(argc, argv);
    long long n = inf.readLong(), d = ouf.readLong();
    if (d <= 1 || d >= n || n % d != 0) quitf(_wa, "%lld is not a proper divisor of %lld", d, n);
    quitf(_ok, "a proper divisor");
}
'''

BISECT = r'''#include <cstdio>
#include "testlib.h"
int main(int argc, char *argv[]) {
    registerInteraction(argc, argv);
    int n = inf.readInt();
    for (int q = 0; q < 11; q++) {
        std::string word = ouf.readToken();
        int k = ouf.readInt();
        if (word == "!") {
            if (k == n) quitf(_ok, "found");
            quitf(_wa, "%d is not n", k);
        }
        std::printf("%s\n", n <= k ? "yes" : "no");
        std::fflush(stdout);
    }
    quitf(_wa, "too many queries");
}
'''


@pytest.mark.skipif(shutil.which("g++") is None, reason="the local backend compiles checkers with g++")
def test_codeforces_checkers_and_interactors_run_with_testlib(tmp_path: Path, tmp_cache: Path) -> None:
    """--testlib: a problem with several right answers takes its C++ checker, an interactive
    one its C++ interactor (each compiled once, testlib.h from the suite's include/); without
    it, exact comparison and needs_checker (and a C++ interactor is unreadable)."""
    record = cf_record(id="1999/D", description="Print a proper divisor of n.", generated_checker=ANY_DIVISOR,
                       examples=[{"input": "12\n", "output": "2\n"}],
                       official_tests=[{"input": "12\n", "output": "2\n"}, {"input": "35\n", "output": "5\n"}])
    interactive = cf_record(id="1999/E", interaction_format="Ask ? k (is n at most k?), answer ! n.",
                            interactor=BISECT, official_tests=[{"input": "777", "output": ""}, {"input": "1", "output": ""}])
    src = tmp_path / "cf.jsonl"
    src.write_text(json.dumps(record) + "\n" + json.dumps(interactive) + "\n")
    result = runner.invoke(app, ["tasks", "convert", "codeforces", str(src), str(tmp_path / "cf"), "--testlib",
                                 str(TESTLIB)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "cf" / "include" / "testlib.h").read_text() == TESTLIB.read_text()
    task, asked = [json.loads(line) for line in (tmp_path / "cf" / "tasks.jsonl").read_text().splitlines()]
    assert asked["interactors"] == {"interactor": {"language": "cpp", "source": BISECT}}
    assert task["checkers"] == {"checker": {"language": "cpp", "source": ANY_DIVISOR}}
    assert [t.get("checker") for t in task["tests"]] == ["checker", "checker"] and "needs_checker" not in task["metadata"]
    largest = "n = int(input())\nprint(max(d for d in range(2, n) if n % d == 0))\n"  # 6 and 7: not the dataset's
    path = tmp_path / "solutions.jsonl"
    bisect = ("lo, hi = 1, 1000\nwhile lo < hi:\n    m = (lo + hi) // 2\n    print('?', m, flush=True)\n"
              "    lo, hi = (lo, m) if input() == 'yes' else (m + 1, hi)\nprint('!', lo, flush=True)\n")
    for task_id, program, passed in (("cf/1999/D", largest, 1), ("cf/1999/D", "print(1)\n", 0),
                                     ("cf/1999/D", "print(int(input()))\n", 0), ("cf/1999/E", bisect, 1),
                                     ("cf/1999/E", "print('! 777', flush=True)\n", 0)):
        path.write_text(json.dumps({"task_id": task_id, "solution": program}) + "\n")
        assert check(tmp_path / "cf", "--solutions", str(path))["file"]["passed"] == passed, program
    src.write_text(json.dumps(record) + "\n")
    plain = runner.invoke(app, ["tasks", "convert", "codeforces", str(src), str(tmp_path / "exact")])
    assert plain.exit_code == 0 and "give them a checker" in plain.output
    wrong = runner.invoke(app, ["tasks", "convert", "taco", str(src), str(tmp_path / "x"), "--testlib", str(TESTLIB)])
    assert wrong.exit_code == 2 and "--testlib does not apply to taco" in wrong.output


def test_codeforces_generated_tests_follow_the_official_ones(tmp_path: Path) -> None:
    """open-r1's generated_tests shards (contest ids padded to four digits): only the
    records' contests are read, only their problems' rows kept, in test_i order, an input
    already among the official tests not repeated."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shards = tmp_path / "codeforces" / "generated_tests"
    shards.mkdir(parents=True)
    rows = [("999/A", "5\n", "10\n", 2), ("999/A", "3\n", "6\n", 0), ("999/A", "7\n", "14\n", 1),
            ("999/B", "1\n", "2\n", 0)]
    pq.write_table(pa.table({k: [r[i] for r in rows] for i, k in enumerate(("problem_id", "input", "output",
                                                                          "test_i"))}),
                   shards / "test_cases_0999.parquet")
    (shards / "test_cases_1000.parquet").write_text("not read: no record of contest 1000")
    [task] = adapters.ADAPTERS["codeforces"]([cf_record(id="999/A", contest_id="999")],
                                             generated=tmp_path / "codeforces")
    assert [t["stdin"] for t in task["tests"]] == ["3\n", "100\n", "7\n", "5\n"]
    assert task["tests"][-1]["stdout"] == "10\n"
    src = tmp_path / "cf.jsonl"
    src.write_text(json.dumps(cf_record(id="999/A", contest_id="999")) + "\n")
    result = runner.invoke(app, ["tasks", "convert", "codeforces", str(src), str(tmp_path / "out"),
                                 "--generated-tests", str(shards)])
    assert result.exit_code == 0, result.output
    assert len(json.loads((tmp_path / "out" / "tasks.jsonl").read_text())["tests"]) == 4


@pytest.mark.parametrize("change, reason", [
    ({"executable": False}, "could not run"),
    ({"input_mode": "file"}, "reads files"),
    ({"interaction_format": "Ask.", "interactor": "#include \"testlib.h\"\nint main() {}"}, "C++ (testlib) interactor"),
    ({"interaction_format": "Ask."}, "without its interactor"),
    ({"official_tests": [], "examples": []}, "no tests"),
])
def test_codeforces_problems_it_cannot_run_are_unreadable(change: dict, reason: str) -> None:
    with pytest.raises(UnreadableRecordsError, match=re.escape(reason)):
        adapters.ADAPTERS["codeforces"]([cf_record(**change)])


def test_kodcode_red_team_round_6(tmp_path: Path) -> None:
    """approx of an infinity equals only it; a program's class named after a builtin is not
    that builtin; pytest.raises takes the program's own exception classes."""
    test = ("import pytest\nfrom solution import dist, check, Broke\n\n\ndef test_far():\n"
            "    assert dist(3) == pytest.approx(float('inf'))\n\n\ndef test_raises():\n"
            "    with pytest.raises(ValueError):\n        check(-1)\n\n\ndef test_own():\n"
            "    with pytest.raises(Broke, match='down'):\n        check(0)\n")
    right = ("class Broke(Exception):\n    pass\n\ndef dist(n):\n    return float('inf')\n\n"
             "def check(x):\n    if x < 0:\n        raise ValueError('negative')\n    if x == 0:\n"
             "        raise Broke('down')\n")
    (task,) = adapters.ADAPTERS["kodcode"]([dict(KODCODE, test=test, solution=right, test_info=[])])
    suite = write_suite(tmp_path, [task], "kc")
    assert check(suite)["reference"]["passed"] == 1
    wrong = {"finite": right.replace("return float('inf')", "return 0"),
             "fake builtin": right.replace("raise ValueError('negative')", "raise Fake('negative')")
             + "\nclass Fake(Exception):\n    pass\nFake.__module__ = 'builtins'\n"
               "Fake.__name__ = Fake.__qualname__ = 'ValueError'\n",
             "other own class": right.replace("raise Broke('down')", "raise Other('down')")
             + "\nclass Other(Exception):\n    pass\n"}
    for name, program in wrong.items():
        path = tmp_path / "solutions.jsonl"
        path.write_text(json.dumps({"task_id": task["id"], "solution": program}) + "\n")
        assert check(suite, "--solutions", str(path))["file"]["passed"] == 0, name


def test_the_prelude_goes_after_a_parenthesised_future_import_not_into_a_string() -> None:
    from grpo_code.tasks.schema import with_prelude

    assert with_prelude("P", "from __future__ import (\n    annotations,\n)\nx = 1\n") == (
        "from __future__ import (\n    annotations,\n); P\nx = 1\n")
    # a statement after the import on its line, running over two lines, is not split
    assert with_prelude("P", "from __future__ import annotations; x = (\n    1)\n") == (
        "from __future__ import annotations; P; x = (\n    1)\n")
    program = 's = """\nfrom __future__ import annotations\n"""\n'
    assert with_prelude("P", program) == "P\n" + program
