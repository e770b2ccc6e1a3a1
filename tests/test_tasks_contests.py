"""CodeContests and APPS adapters (grpo_code/tasks/contests.py), the stdio fix for one-string
tests, and refusing records of another known format (issue #18).

Fixtures: tests/fixtures/{codecontests,codecontests_rllm,apps,apps_mapcoder}.jsonl, small
problems written for these tests in each dataset's record shape.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grpo_code.cli import app
from grpo_code.errors import SuiteError
from grpo_code.tasks import adapters
from grpo_code.tasks.contests import apps, case_insensitive, codecontests, needs_checker
from grpo_code.tasks.records import UnreadableRecordsError

FIXTURES = Path(__file__).resolve().parent / "fixtures"
UNREADABLE = FIXTURES / "unreadable"
runner = CliRunner()


def fixture(name: str) -> list[dict]:
    return adapters.read_records(str(FIXTURES / f"{name}.jsonl"))


def by_id(tasks: list[dict]) -> dict[str, dict]:
    return {t["id"]: t for t in tasks}


# ----------------------------------------------------------------- codecontests


def test_codecontests_keeps_groups_limits_and_the_python3_reference() -> None:
    tasks = by_id(adapters.convert("codecontests", str(FIXTURES / "codecontests.jsonl")))
    assert list(tasks) == ["9001_A. Twice the Sum", "9001_B. Even or Odd", "9001_C. Nobody at Home"]
    a = tasks["9001_A. Twice the Sum"]
    assert a["mode"] == "instruct" and a["language"] == "python"
    assert a["metadata"]["test_groups"] == {"public": 1, "private": 2, "generated": 2}
    # public, private, generated, in that order
    assert [t["stdin"] for t in a["tests"]] == ["3\n1 2 3\n", "1\n-5\n", "2\n0 0\n", "4\n1 1 1 1\n", "2\n1000 -1000\n"]
    assert all(t["kind"] == "io" and "ignore_case" not in t for t in a["tests"])
    assert a["limits"] == {"timeout_s": 2.5, "memory_mb": 245}  # 256,000,000 bytes, rounded up to MiB
    assert a["reference"].startswith("n = int(input())")  # the PYTHON3 one, not C++ (2) or Python 2 (1)
    assert a["metadata"]["source"] == "codecontests"
    assert {k: a["metadata"][k] for k in ("difficulty", "platform", "tags", "rating", "contest")} == {
        "difficulty": "A", "platform": "codeforces", "tags": ["implementation", "math"], "rating": 800,
        "contest": "9001A"}
    assert "needs_checker" not in a["metadata"] and "split" not in a["metadata"]
    assert a["prompt"].endswith("reads the input from standard input and prints the answer to standard output.")

    b = tasks["9001_B. Even or Odd"]
    assert b["metadata"]["test_groups"] == {"public": 1, "private": 2, "generated": 0}
    assert len(b["tests"]) == 3 and all(t["ignore_case"] is True for t in b["tests"])
    assert b["limits"] == {"timeout_s": 1.0, "memory_mb": 256}

    c = tasks["9001_C. Nobody at Home"]
    assert c["metadata"]["needs_checker"] is True
    assert "limits" not in c  # time_limit null, memory_limit_bytes 0: the suite's defaults apply
    assert not any("ignore_case" in t for t in c["tests"])


def test_codecontests_selects_test_groups() -> None:
    records = fixture("codecontests")
    public = codecontests(records, tests="public")
    assert [len(t["tests"]) for t in public] == [1, 1, 1]
    assert public[0]["metadata"]["test_groups"] == {"public": 1}
    mixed = codecontests(records, tests="generated, public")  # kept in dataset order whatever the option's
    assert mixed[0]["metadata"]["test_groups"] == {"public": 1, "generated": 2}
    assert [t["stdout"] for t in mixed[0]["tests"]] == ["12\n", "8\n", "0\n"]
    with pytest.raises(SuiteError, match=r"codecontests\[1\] \(9001_B. Even or Odd\): generated_tests: no tests in groups generated"):
        codecontests(records, tests="generated")
    with pytest.raises(SuiteError, match="unknown test group 'hidden'"):
        codecontests(records, tests="public,hidden")
    assert codecontests(records, split="valid")[0]["metadata"]["split"] == "valid"
    assert codecontests([dict(records[0], split="train")])[0]["metadata"]["split"] == "train"
    tol = codecontests(records[:1], float_tol=1e-6)[0]["tests"][0]
    assert tol["compare"] == "tokens" and tol["float_tol"] == 1e-6


def test_codecontests_rllm_copy() -> None:
    tasks = adapters.convert("codecontests", str(FIXTURES / "codecontests_rllm.jsonl"))
    assert [t["id"] for t in tasks] == ["codecontests/0", "codecontests/1"]
    assert [t["metadata"]["test_groups"] for t in tasks] == [{"tests": 2}, {"tests": 3}]  # dict, then JSON text
    assert tasks[1]["tests"][0] == {"kind": "io", "stdin": "3 9\n", "stdout": "9\n"}
    assert "reference" not in tasks[0] and "limits" not in tasks[0]
    listed = {"problem": "Echo.", "id": "p7",
              "tests": json.dumps([{"input": "a\n", "output": "a\n", "type": "stdin_stdout"}])}
    assert codecontests([listed])[0]["id"] == "p7"
    functional = dict(listed, tests=[{"input": "1", "output": "2", "testtype": "functional"}])
    with pytest.raises(SuiteError, match=r"\[0\] \(p7\): tests\[0\]: is a 'functional' test"):
        codecontests([functional])
    with pytest.raises(SuiteError, match="not split into groups, so --tests public cannot select"):
        codecontests([listed], tests="public")


@pytest.mark.parametrize("change, needle", [
    (lambda r: r.pop("description"), r"\[0\] \(9001_A. Twice the Sum\): description: missing"),
    (lambda r: r.update(public_tests={"input": "3\n1 2 3\n", "output": ["12\n"]}), r"public_tests.input: is str, expected a list"),
    (lambda r: r.update(private_tests={"input": [1], "output": ["1\n"]}), r"private_tests.input\[0\]: is int"),
    (lambda r: r.update(generated_tests={"input": ["1\n"], "output": []}), r"generated_tests: 1 inputs but 0 outputs"),
    (lambda r: r.update(public_tests="{oops"), r"public_tests: not valid JSON"),
    (lambda r: r.update(time_limit={"seconds": "2"}), r"time_limit: .* is not \{seconds, nanos\}"),
    (lambda r: r.update(memory_limit_bytes="256MB"), r"memory_limit_bytes: '256MB' is not a number of bytes"),
    (lambda r: r.update(solutions=["print(1)"]), r"solutions: expected \{language"),
])
def test_codecontests_errors_name_record_and_field(change, needle: str) -> None:
    record = fixture("codecontests")[0]
    change(record)
    with pytest.raises(SuiteError, match=needle):
        codecontests([record])


def test_codecontests_limits_stay_in_range() -> None:
    record = dict(fixture("codecontests")[0], time_limit={"seconds": 900, "nanos": 0}, memory_limit_bytes=1000)
    assert codecontests([record])[0]["limits"] == {"timeout_s": 600.0, "memory_mb": 16}


@pytest.mark.parametrize("statement, expected", [
    ("If there are multiple answers, print any of them.", True),
    ("If there are several possible answers, you may output any.", True),
    ("If there are many solutions, output any one of them.", True),
    ("You can print any valid answer.", True),
    ("Do not print any extra spaces.", False),
    ("Determine whether any of them is prime.", False),
    ("If any of the numbers is negative, print -1.", False),
])
def test_needs_checker_phrasings(statement: str, expected: bool) -> None:
    assert needs_checker(statement) is expected


@pytest.mark.parametrize("statement, expected", [
    ('You can output "YES" and "NO" in any case (for example, "yEs" is a positive response).', True),
    ("Print YES or NO. You can print each letter in any case (upper or lower).", True),
    ('Print "Yes" or "No"; the checker is case-insensitive.', True),
    ("Print YES or NO, each letter in any letter case.", True),
    ("Print YES or NO.", False),
    ("In any case, print the answer modulo 10^9+7.", False),
])
def test_yes_no_in_any_case(statement: str, expected: bool) -> None:
    assert case_insensitive(statement) is expected


# ----------------------------------------------------------------- apps


def test_apps_stdin_and_call_problems() -> None:
    tasks = by_id(adapters.convert("apps", str(FIXTURES / "apps.jsonl")))
    rev = tasks["apps/90001"]
    assert rev["tests"] == [{"kind": "io", "stdin": "abc\n", "stdout": "cba\n"},
                            {"kind": "io", "stdin": "hello\n", "stdout": "olleh\n"}]  # lists of lines joined
    assert rev["reference"] == "print(input()[::-1])\n"  # the first of the solutions
    assert rev["metadata"] == {"source": "apps", "split": "test", "difficulty": "introductory",
                               "url": "https://example.com/problems/reverse-a-line"}
    vowels = tasks["apps/90002"]
    assert vowels["entry_point"] == "count_vowels"
    assert vowels["tests"][0] == {"kind": "call", "fn": "count_vowels", "args": ["hello"], "expected": 2}
    assert "def count_vowels(s):" in vowels["prompt"] and "call_style" not in vowels["metadata"]
    assert apps(fixture("apps"), split="train")[0]["metadata"]["split"] == "train"


def test_apps_class_solution_becomes_script_tests() -> None:
    record = {"problem_id": 7, "question": "Best profit of one trade.", "solutions": "",
              "starter_code": "class Solution:\n    def maxProfit(self, prices: List[int]) -> int:\n        ",
              "input_output": json.dumps({"fn_name": "maxProfit", "inputs": [[[7, 1, 5, 3]], [[]]],
                                          "outputs": [[4], [0]]})}
    task = apps([record])[0]
    assert task["metadata"]["call_style"] == "method" and task["entry_point"] == "Solution"
    assert task["tests"][0] == {"kind": "script", "code": "assert Solution().maxProfit([7, 1, 5, 3]) == 4\n"}
    assert "reference" not in task  # solutions "" means none
    bad = dict(record, input_output={"fn_name": "maxProfit", "inputs": [[1.0]], "outputs": [[math.nan]]})
    with pytest.raises(SuiteError, match=r"apps\[0\] \(7\): tests\[0\].expected: nan cannot be written"):
        apps([bad])


@pytest.mark.parametrize("change, needle", [
    (lambda r: r.update(input_output=""), r"apps\[0\] \(90002\): input_output: empty"),
    (lambda r: r.update(input_output="{"), r"input_output: not valid JSON"),
    (lambda r: r.update(input_output={"fn_name": "f", "inputs": [1], "outputs": [[2]]}), r"input_output.inputs\[0\]: is int"),
    (lambda r: r.update(input_output={"inputs": ["1\n"], "outputs": ["1\n", "2\n"]}), r"1 inputs but 2 outputs"),
    (lambda r: r.update(input_output={"inputs": [3], "outputs": ["1\n"]}), r"input_output.inputs\[0\]: is int"),
    (lambda r: r.pop("question"), r"question: missing or empty"),
    (lambda r: r.update(solutions="print(1)"), r"solutions: not valid JSON"),
])
def test_apps_errors_name_record_and_field(change, needle: str) -> None:
    record = fixture("apps")[1]
    change(record)
    with pytest.raises(SuiteError, match=needle):
        apps([record])


def test_mapcoder_apps_records() -> None:
    tasks = by_id(adapters.convert("apps", str(FIXTURES / "apps_mapcoder.jsonl")))
    join = tasks["apps/90003"]
    # arguments one per line, written with str(): literals where str() gives the line back, else strings
    assert [t["args"] for t in join["tests"]] == [[["a", "b"], "-"], [["x"], ", "], [["12", "ab", "cd"], "+"]]
    assert [t["expected"] for t in join["tests"]] == ["a-b", "x", "12+ab+cd"]
    assert join["entry_point"] == "join_words" and join["metadata"]["difficulty"] == "introductory"
    product = tasks["apps/90004"]
    assert product["tests"][1] == {"kind": "io", "stdin": "-4 5\n", "stdout": "-20\n"}


@pytest.mark.parametrize("starter, line, args", [
    ("def f(a, b, c):", "12\nTrue\n'quoted'", [12, True, "'quoted'"]),
    ("def f(a, b):", "1,2\n[1,2]", ["1,2", [1, 2]]),
    ("def f(text):", "two\nlines", ["two\nlines"]),  # one parameter: newlines belong to the string
    ("def f():", "", []),
    ("class Solution:\n    def g(self, xs, k=1):", "[3, 4]", [[3, 4]]),
])
def test_mapcoder_arguments(starter: str, line: str, args: list) -> None:
    record = {"id": 1, "description": "d", "starter_code": starter, "sample_io": [],
              "test_list": [{"input": line, "output": [0]}]}
    test = apps([record])[0]["tests"][0]
    if test["kind"] == "call":
        assert test["args"] == args
    else:
        assert test["code"] == f"assert Solution().g({', '.join(map(repr, args))}) == 0\n"


@pytest.mark.parametrize("starter, line, args", [
    # more lines than parameters: the one parameter whose neighbours all read as non-string
    # literals takes the extra lines (a literal's str() is one line, a string's is not)
    ("def f(page, k):", "first\nsecond\n1", ["first\nsecond", 1]),
    ("def f(n, text):", "3\nab\ncd\n", [3, "ab\ncd\n"]),
    ("def f(n, text, xs):", "2\nab\ncd\n[1, 2]", [2, "ab\ncd", [1, 2]]),
    ("def f(a: int, b):", "1\n2\n3", [1, "2\n3"]),  # an annotation says which one is not a string
    ("class Solution:\n    def g(self, s: str, k: List[int]):", "x\ny\n[1]", ["x\ny", [1]]),
])
def test_mapcoder_string_argument_holding_newlines(starter: str, line: str, args: list) -> None:
    test_mapcoder_arguments(starter, line, args)


@pytest.mark.parametrize("starter, line, why", [
    ("def f(a, b):", "1\n2\n3", "`a` or `b` could each take them"),
    ("def f(prefix, text):", "a\nab\nb", "another one's line reads as a string too"),
    ("def f(a, b, c):", "1\n2", "2 lines for a function of 3 required parameters"),
])
def test_mapcoder_ambiguous_inputs_are_unreadable(starter: str, line: str, why: str) -> None:
    record = {"id": 5, "description": "d", "starter_code": starter, "sample_io": [],
              "test_list": [{"input": line, "output": [0]}]}
    with pytest.raises(UnreadableRecordsError, match=r"apps\[0\] \(5\): test_list\[0\].input: .*" + re.escape(why)):
        apps([record])


def test_mapcoder_file_with_a_multiline_string_argument_converts_the_rest() -> None:
    """The issue's case: apps/90102's string argument holds newlines and is resolved,
    90103's cannot be (two string parameters), 90104 is malformed; the others convert."""
    result = adapters.convert_all("apps", str(UNREADABLE / "apps_mapcoder.jsonl"))
    tasks = by_id(list(result.tasks))
    assert list(tasks) == ["apps/90101", "apps/90102"] and result.indices == (0, 1)
    assert [t["args"] for t in tasks["apps/90102"]["tests"]] == [["first\nsecond\nthird", 1], ["only", 0], ["a\nb", 5]]
    assert [(p.index, p.id, p.field) for p in result.skipped] == [(2, "90103", "test_list[0].input"),
                                                                   (3, "90104", "test_list[1]")]
    assert "which lines are whose cannot be told" in result.skipped[0].reason
    with pytest.raises(UnreadableRecordsError) as info:  # the strict path names both
        adapters.convert("apps", str(UNREADABLE / "apps_mapcoder.jsonl"))
    assert "2 of 4 records cannot be read: apps_mapcoder.jsonl[2] (90103): test_list[0].input: " in str(info.value)
    assert "; apps_mapcoder.jsonl[3] (90104): test_list[1]: expected" in str(info.value)
    assert "--skip-invalid" in info.value.hint
    assert info.value.conversion == result


def test_file_level_errors_stop_at_once() -> None:
    """Records of another format, or an option a record cannot take, are about the file:
    they are not collected as unreadable records (every record would be)."""
    with pytest.raises(SuiteError, match="use the evalplus adapter") as info:
        adapters.convert_all("humaneval", str(UNREADABLE / "evalplus.jsonl"))
    assert not isinstance(info.value, UnreadableRecordsError)
    with pytest.raises(SuiteError, match="cannot select from them") as info:
        adapters.convert_all("codecontests", str(FIXTURES / "codecontests_rllm.jsonl"), tests="public")
    assert not isinstance(info.value, UnreadableRecordsError)


# ----------------------------------------------------------------- stdio and wrong adapters


def test_stdio_single_string_is_one_test() -> None:
    one = adapters.stdio([{"question": "q", "inputs": "1 2\n", "outputs": "3\n"}])[0]
    assert one["tests"] == [{"kind": "io", "stdin": "1 2\n", "stdout": "3\n"}]
    nested = adapters.stdio([{"question": "q", "input_output": {"inputs": "1\n", "outputs": "2\n"}}])[0]
    assert len(nested["tests"]) == 1
    looks_like_json = adapters.stdio([{"question": "q", "inputs": "[1, 2]\n", "outputs": "3\n"}])[0]
    assert looks_like_json["tests"] == [{"kind": "io", "stdin": "[1, 2]\n", "stdout": "3\n"}]
    listed = adapters.stdio([{"question": "q", "inputs": json.dumps(["1\n", "2\n"]), "outputs": ["1\n", "2\n"]}])[0]
    assert len(listed["tests"]) == 2
    with pytest.raises(SuiteError, match=r"stdio\[0\]: inputs: is int, expected a list"):
        adapters.stdio([{"question": "q", "inputs": 5, "outputs": ["5\n"]}])
    with pytest.raises(SuiteError, match=r"stdio\[0\]: public_tests.output: is dict"):
        adapters.stdio([{"description": "q", "public_tests": {"input": ["1\n"], "output": {"a": 1}}}])


HUMANEVAL_PLUS = {"task_id": "HumanEval/0", "prompt": "def f(x):\n", "entry_point": "f", "canonical_solution": "    return x\n",
                  "test": "def check(f):\n    assert f(1) == 1\n", "base_input": [[1]], "plus_input": [[2]], "atol": 0}
MBPP_PLUS = {"task_id": "Mbpp/2", "prompt": '"""Return x."""\n', "entry_point": "f", "canonical_solution": "def f(x):\n    return x\n",
             "base_input": [[1]], "plus_input": [[2]], "atol": 0, "assertion": "assert f(1) == 1\n"}
MBPP = {"task_id": 11, "text": "Return x.", "code": "def f(x):\n    return x\n", "test_list": ["assert f(1) == 1"]}


@pytest.mark.parametrize("fmt, record, needle", [
    ("humaneval", HUMANEVAL_PLUS, r"humaneval\[0\] \(HumanEval/0\): HumanEval\+ \(evalplus\) records: use the evalplus adapter "
                                  r"\(`grpo-code tasks convert evalplus ...`\)"),
    ("mbpp", MBPP_PLUS, r"mbpp\[0\] \(Mbpp/2\): MBPP\+ \(evalplus\) records: use the evalplus adapter"),
    ("stdio", MBPP_PLUS, r"MBPP\+ \(evalplus\) records"),
    ("humaneval", MBPP, r"mbpp records, not humaneval: use the mbpp adapter \(`grpo-code tasks convert mbpp ...`\)"),
    ("mbpp", {k: v for k, v in HUMANEVAL_PLUS.items() if "input" not in k}, r"humaneval records, not mbpp"),
    ("call", {"name": "x", "description": "d", "public_tests": {"input": [], "output": []}},
     r"codecontests records, not call: use the codecontests adapter"),
    ("codecontests", fixture("apps")[0], r"apps records, not codecontests: use the apps adapter"),
    ("apps", fixture("codecontests")[0], r"codecontests records, not apps: use the codecontests adapter"),
    ("apps", HUMANEVAL_PLUS, r"HumanEval\+ \(evalplus\) records"),
])
def test_records_of_another_known_format_name_the_adapter(fmt: str, record: dict, needle: str) -> None:
    with pytest.raises(SuiteError, match=needle):
        adapters.ADAPTERS[fmt]([dict(record)], source=fmt)


def test_stdio_and_call_still_read_contest_records() -> None:
    assert len(adapters.stdio(fixture("codecontests"))[0]["tests"]) == 5
    assert adapters.call(fixture("apps")[1:], unwrap_outputs=True)[0]["tests"][0]["expected"] == 2


# ----------------------------------------------------------------- suites, CLI, local sandbox


def test_converted_fixtures_validate_as_suites() -> None:
    """Round trip through suite validation: needs the ``ignore_case`` io field in
    grpo_code/sandbox/types.py (added with issue #18's comparison options)."""
    from grpo_code.tasks.suite import suite_from_records

    for fmt, name in (("codecontests", "codecontests"), ("codecontests", "codecontests_rllm"),
                      ("apps", "apps"), ("apps", "apps_mapcoder")):
        records = adapters.convert(fmt, str(FIXTURES / f"{name}.jsonl"))
        suite = suite_from_records(name, records, name)
        assert [t.to_dict() for t in suite.tasks] == records


def test_cli_convert_codecontests(tmp_path: Path) -> None:
    dst = tmp_path / "cc"
    result = runner.invoke(app, ["tasks", "convert", "codecontests", str(FIXTURES / "codecontests.jsonl"), str(dst),
                                 "--tests", "public,private", "--split", "valid"])
    assert result.exit_code == 0, result.output
    assert "wrote 3 tasks" in result.stdout and "valid 3" in result.stdout
    assert "1 tasks accept any of several answers" in result.stdout
    rows = [json.loads(line) for line in (dst / "tasks.jsonl").read_text().splitlines()]
    assert [r["metadata"]["test_groups"] for r in rows][0] == {"public": 1, "private": 2}
    assert {r["metadata"]["split"] for r in rows} == {"valid"}
    for args, needle in ((["codecontests", "--tests", "hidden"], "unknown test group 'hidden'"),
                         (["stdio", "--tests", "public"], "--tests does not apply to stdio"),
                         (["humaneval", "--split", "train"], "--split does not apply to humaneval")):
        bad = runner.invoke(app, ["tasks", "convert", args[0], str(FIXTURES / "codecontests.jsonl"),
                                  str(tmp_path / "x"), *args[1:]])
        assert bad.exit_code == 2, bad.output
        assert bad.stderr.count("\n") == 1 and needle in bad.stderr


def _check(tmp_path: Path, fmt: str, name: str, *extra: str) -> dict:
    dst = tmp_path / name
    assert runner.invoke(app, ["tasks", "convert", fmt, str(FIXTURES / f"{name}.jsonl"), str(dst)]).exit_code == 0
    result = runner.invoke(app, ["tasks", "check", str(dst), "--backend", "local", "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_fixture_references_pass_and_empty_programs_fail(tmp_path: Path) -> None:
    for fmt, name in (("codecontests", "codecontests"), ("apps", "apps")):
        report = _check(tmp_path, fmt, name)
        assert report["reference"]["passed"] == report["tasks"] == report["empty"]["failed"], report


def test_mapcoder_and_rllm_conversions_judge_right_answers(tmp_path: Path) -> None:
    """These shapes carry no solutions: right programs from a file must pass every converted test."""
    solutions = {
        "apps_mapcoder": {"apps/90003": "def join_words(words, sep):\n    return sep.join(words)\n",
                          "apps/90004": "a, b = map(int, input().split())\nprint(a * b)\n"},
        "codecontests_rllm": {"codecontests/0": "print(len(set(input().strip())))\n",
                              "codecontests/1": "print(max(map(int, input().split())))\n"},
    }
    for fmt, name in (("apps", "apps_mapcoder"), ("codecontests", "codecontests_rllm")):
        path = tmp_path / f"{name}-solutions.jsonl"
        path.write_text("".join(json.dumps({"task_id": k, "solution": v}) + "\n" for k, v in solutions[name].items()))
        report = _check(tmp_path, fmt, name, "--solutions", str(path))
        assert report["file"]["passed"] == report["tasks"] == 2, report


def test_yes_no_reference_needs_ignore_case(tmp_path: Path) -> None:
    """9001_B's reference prints lower-case yes/no: it passes only because its tests ignore case."""
    task = by_id(codecontests(fixture("codecontests")))["9001_B. Even or Odd"]
    for test in task["tests"]:
        del test["ignore_case"]
    suite = tmp_path / "strict"
    suite.mkdir()
    (suite / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    result = runner.invoke(app, ["tasks", "check", str(suite), "--backend", "local", "--json"])
    assert result.exit_code == 1 and json.loads(result.stdout)["reference"]["failed"] == [task["id"]]


def test_method_style_script_tests_judge_a_solution_class(tmp_path: Path) -> None:
    record = {"problem_id": 11, "question": "Return the k smallest words, sorted.", "solutions": "",
              "starter_code": "class Solution:\n    def smallest(self, words: List[str], k: int) -> List[str]:\n        ",
              "input_output": json.dumps({"fn_name": "smallest", "inputs": [[["b", "a"], 1], [["z", "y", "x"], 2]],
                                          "outputs": [[["a"]], [["x", "y"]]]})}
    suite = tmp_path / "method"
    suite.mkdir()
    (suite / "tasks.jsonl").write_text(json.dumps(apps([record])[0]) + "\n")
    program = "class Solution:\n    def smallest(self, words, k):\n        return sorted(words)[:{}]\n"
    for stop, passed in (("k", 1), ("k + 1", 0)):
        path = tmp_path / "solutions.jsonl"
        path.write_text(json.dumps({"task_id": "apps/11", "solution": program.format(stop)}) + "\n")
        result = runner.invoke(app, ["tasks", "check", str(suite), "--backend", "local", "--json", "--solutions", str(path)])
        assert json.loads(result.stdout)["file"]["passed"] == passed, result.output


PERMUTATION_CHECKER = '''
def check(input, expected, output):
    n = int(input.split()[0])
    got = output.split()
    if expected.split() == ["-1"]:
        return got == ["-1"], "there is no such permutation"
    p = [int(x) for x in got]
    assert sorted(p) == list(range(1, n + 1)), "not a permutation of 1..n"
    assert all(x != i for i, x in enumerate(p, 1)), "some p_i == i"
    return True
'''


def test_several_valid_answers_are_judged_by_a_checker_and_yes_in_any_case() -> None:
    """The acceptance case of issue #18: a converted CodeContests problem that accepts any
    of several answers, given a checker as a suite author would, and a YES/NO problem."""
    from grpo_code.config import SandboxConfig
    from grpo_code.sandbox import Sandbox
    from grpo_code.tasks.suite import suite_from_records

    tasks = by_id(codecontests(fixture("codecontests")))
    perm = tasks["9001_C. Nobody at Home"]
    assert perm["metadata"]["needs_checker"]
    perm["checkers"] = {"derangement": PERMUTATION_CHECKER}
    for test in perm["tests"]:
        test["checker"] = "derangement"
    yes_no = tasks["9001_B. Even or Odd"]
    suite = suite_from_records("cc", [perm, yes_no], "fixture")
    perm_task, yes_task = suite.get(perm["id"]), suite.get(yes_no["id"])
    shifted_right = "n = int(input())\nprint(-1 if n == 1 else ' '.join(str((i - 2) % n + 1) for i in range(1, n + 1)))\n"
    answers = [
        (perm_task, perm["reference"], "pass"),
        (perm_task, shifted_right, "pass"),  # another valid answer: an exact comparison fails it
        (perm_task, "n = int(input())\nprint(' '.join(map(str, range(1, n + 1))))\n", "fail"),
        (perm_task, "print(-1)\n", "fail"),
        (yes_task, "for _ in range(int(input())):\n    print('Yes' if int(input()) % 2 == 0 else 'No')\n", "pass"),
        (yes_task, "for _ in range(int(input())):\n    print('Yes')\n", "fail"),
    ]
    with Sandbox(SandboxConfig(backend="local", workers=2)) as sandbox:
        results = sandbox.run([task.job(program) for task, program, _ in answers])
    assert [r.status.value for r in results] == [want for _, _, want in answers], [
        r.tests[0].message for r in results]
    exact = suite_from_records("cc", [{**perm, "tests": [{k: v for k, v in t.items() if k != "checker"}
                                                         for t in perm["tests"]]}], "fixture")
    with Sandbox(SandboxConfig(backend="local", workers=1)) as sandbox:
        [without] = sandbox.run([exact.tasks[0].job(shifted_right)])
    assert without.status.value == "fail"  # why the checker is needed
