"""JavaScript and C++ suites: the bundled demo-js / demo-cpp, the humaneval adapter on
HumanEval-X and MultiPL-E style files (tests/fixtures), and extraction of their programs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import REPO, need_image
from grpo_code.cli import app
from grpo_code.errors import SuiteError
from grpo_code.tasks import adapters, load_suite
from grpo_code.tasks.extract import build_program, continuation
from grpo_code.tasks.suite import suite_from_records

runner = CliRunner()
FIXTURES = REPO / "tests" / "fixtures"


@pytest.mark.parametrize("suite, language", [("demo-js", "javascript"), ("demo-cpp", "cpp")])
def test_bundled_suites_load_with_references_and_both_splits(suite: str, language: str) -> None:
    s = load_suite(suite)
    assert len(s) >= 10 and s.language == language
    assert all(t.language == language and t.reference for t in s.tasks)
    assert set(s.splits) == {"train", "test"}
    kinds = {test.kind for t in s.tasks for test in t.tests}
    # no script tests: their asserts would run inside the program's process (unattested)
    assert kinds == {"io", "call"}


def test_humaneval_adapter_reads_humaneval_x_and_multipl_e_records() -> None:
    js = {t["id"]: t for t in adapters.convert("humaneval", str(FIXTURES / "humaneval_javascript.jsonl"),
                                                 language="javascript")}
    assert js["JavaScript/0"]["entry_point"] == "countEven"  # from the prompt's last declaration
    assert js["HumanEval_2_max_gap"]["entry_point"] == "max_gap"  # from `let candidate = ...`
    assert js["JavaScript/0"]["reference"].startswith("/* Return how many")
    assert all(t["mode"] == "complete" and t["language"] == "javascript" for t in js.values())
    cpp = {t["id"]: t for t in adapters.convert("humaneval", str(FIXTURES / "humaneval_cpp.jsonl"), language="cpp")}
    assert cpp["CPP/1"]["entry_point"] == "starts_with"
    multipl_e = cpp["HumanEval_2_count_upper"]
    # every assert of the fixtures converts: call tests, judged outside the program's process
    assert multipl_e["tests"][0] == {"kind": "call", "fn": "count_upper", "args": ["aBC"], "expected": 2}
    assert all(t["kind"] == "call" for task in [*js.values(), *cpp.values()] for t in task["tests"])
    assert cpp["CPP/2"]["tests"][0]["abs_tol"] == 1e-4  # the tolerance of the test's issame
    assert cpp["CPP/4"]["tests"][0]["expected"] == {"a": 2, "b": 2}  # a map<char,int>, by the return type
    # a test with a loop stays one script test (unattested), with MultiPL-E's leading `}` dropped
    looped = dict(next(r for r in adapters.read_records(str(FIXTURES / "humaneval_cpp.jsonl"))
                       if r.get("name") == "HumanEval_2_count_upper"))
    looped["tests"] = "}\nint main() {\n    for (int i = 0; i < 2; i++) assert(count_upper(\"A\") == 1);\n}\n"
    [script] = adapters.humaneval([looped], language="cpp")[0]["tests"]
    assert script["kind"] == "script" and script["code"].startswith("int main() {")
    with pytest.raises(SuiteError, match="pass --language javascript"):
        adapters.convert("humaneval", str(FIXTURES / "humaneval_javascript.jsonl"), language="cpp")


def test_brace_language_continuations_keep_the_closing_brace() -> None:
    assert continuation("  return x;\n}\n\nint main() {}\n", "cpp") == "  return x;\n}\n"
    assert continuation("    return 1\nprint(2)\n") == "    return 1\n"
    records = adapters.convert("humaneval", str(FIXTURES / "humaneval_cpp.jsonl"), language="cpp")
    suite = suite_from_records("fixture", records, "fixture")
    t = suite.get("CPP/0")
    raw = build_program(t, "    return 0;\n}\n\nint main() { return 0; }\n", "raw")
    assert raw.program == t.prompt + "    return 0;\n}\n"
    chat = build_program(t, "```cpp\nint sum_squares(vector<int> nums) {\n    return 0;\n}\n```", "chat")
    assert chat.program.startswith("#include<stdio.h>\n#include<vector>\nusing namespace std;\nint sum_squares")


def _check(args: list[str]) -> dict:
    result = runner.invoke(app, ["tasks", "check", *args, "--backend", "docker", "--workers", "2", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.docker
@pytest.mark.parametrize("suite", ["demo-js", "demo-cpp"])
def test_demo_suites_check_clean(docker_ready: None, suite: str) -> None:
    need_image("javascript" if suite == "demo-js" else "cpp")
    report = _check([suite])
    assert report["backend"] == "docker"
    assert report["reference"]["passed"] == report["tasks"] >= 10, report["reference"]
    assert report["empty"]["failed"] == report["tasks"], report["empty"]
    assert report["reference"]["unattested_tests"] == 0, report["reference"]  # the demo trains on attested rewards
    assert report["slow"] == []


@pytest.mark.docker
@pytest.mark.parametrize("language", ["javascript", "cpp"])
def test_converted_fixture_checks_clean_and_wrong_solutions_fail(docker_ready: None, tmp_path: Path,
                                                                  language: str) -> None:
    need_image(language)
    dst = tmp_path / "suite"
    src = FIXTURES / f"humaneval_{language}.jsonl"
    result = runner.invoke(app, ["tasks", "convert", "humaneval", str(src), str(dst), "--language", language])
    assert result.exit_code == 0, result.output
    report = _check([str(dst)])
    tasks = {"javascript": 7, "cpp": 11}[language]
    assert report["reference"]["passed"] == report["empty"]["failed"] == report["tasks"] == tasks, report
    # every assert became a call test: nothing is judged inside the program's process
    assert report["reference"]["unattested_tests"] == 0 and report["reference"]["unattested_tasks"] == []
    # a plausible wrong answer per task: every one must fail (console.assert included)
    records = [json.loads(line) for line in (dst / "tasks.jsonl").read_text().splitlines()]
    wrong = {"javascript": "  return 0;\n}\n", "cpp": "    return {};\n}\n"}[language]
    samples = tmp_path / "wrong.jsonl"
    samples.write_text("".join(json.dumps({"task_id": r["id"], "solution": r["prompt"] + wrong}) + "\n"
                               for r in records))
    result = runner.invoke(app, ["tasks", "check", str(dst), "--solutions", str(samples), "--backend", "docker",
                                 "--json"])
    assert result.exit_code == 1, result.output  # its solutions fail
    report = json.loads(result.stdout)["file"]
    assert report["passed"] == 0 and report["checked"] == tasks and not report["infra_errors"]
