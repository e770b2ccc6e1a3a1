"""``grpo-code tasks``: list, show, convert, check, and their errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from conftest import BENCH
from grpo_code.cli import app

runner = CliRunner()
GOOD = {"id": "x/1", "prompt": "Write `f()` returning 1.", "entry_point": "f",
        "tests": [{"kind": "call", "fn": "f", "args": [], "expected": 1}], "reference": "def f():\n    return 1\n"}


def suite_dir(tmp_path: Path, records: list, raw: list[str] = ()) -> Path:
    d = tmp_path / "s"
    d.mkdir(exist_ok=True)
    lines = [json.dumps(r) for r in records] + list(raw)
    (d / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    return d


def test_list_and_show() -> None:
    result = runner.invoke(app, ["tasks", "list"])
    assert result.exit_code == 0 and "demo" in result.stdout
    result = runner.invoke(app, ["tasks", "show", "demo", "--split", "test"])
    assert result.exit_code == 0 and "18 tasks" in result.stdout
    result = runner.invoke(app, ["tasks", "show", "demo", "demo/001-add"])
    assert result.exit_code == 0
    assert "system" in result.stdout and "```python" in result.stdout and "def add(a, b):" in result.stdout


@pytest.mark.parametrize(
    "record, needle",
    [
        ({k: v for k, v in GOOD.items() if k != "tests"}, "tasks.jsonl:1: tests: missing"),
        (dict(GOOD, tests=[{"kind": "fuzz"}]), "tasks.jsonl:1: tests[0].kind is 'fuzz'"),
        (dict(GOOD, language="brainfuck"), "tasks.jsonl:1: language: 'brainfuck' is not supported"),
        ("{oops", "tasks.jsonl:1: not valid JSON"),
    ],
)
def test_bad_suites_exit_2_with_one_line(tmp_path: Path, record, needle: str) -> None:
    d = suite_dir(tmp_path, [] if isinstance(record, str) else [record], [record] if isinstance(record, str) else [])
    for args in (["tasks", "show", str(d)], ["tasks", "check", str(d), "--backend", "local"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines


def test_unknown_suite_and_task(tmp_path: Path) -> None:
    result = runner.invoke(app, ["tasks", "show", "no-such-suite"])
    assert result.exit_code == 2 and "unknown suite 'no-such-suite'" in result.stderr
    result = runner.invoke(app, ["tasks", "show", "demo", "demo/999"])
    assert result.exit_code == 2 and "has no task 'demo/999'" in result.stderr


def test_positional_overrides_reach_list_show_and_check(tmp_path: Path) -> None:
    """tasks.paths=[DIR] makes the suite in DIR known by name; sandbox.* is what check runs under."""
    suite_dir(tmp_path, [GOOD])
    paths = f"tasks.paths=[{tmp_path}]"
    assert runner.invoke(app, ["tasks", "show", "s"]).exit_code == 2  # not known without the path
    result = runner.invoke(app, ["tasks", "list", paths])
    assert result.exit_code == 0, result.output
    assert any(line.split("│")[1].strip() == "s" for line in result.stdout.splitlines() if line.count("│") > 2)
    result = runner.invoke(app, ["tasks", "show", "s", paths])
    assert result.exit_code == 0 and "x/1" in result.stdout and "1 tasks" in result.stdout
    result = runner.invoke(app, ["tasks", "show", "s", "x/1", paths])
    assert result.exit_code == 0 and "def f():" in result.stdout
    result = runner.invoke(app, ["tasks", "check", "s", paths, "sandbox.backend=local", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["backend"] == "local"


def test_check_fails_on_wrong_reference_and_on_tests_an_empty_program_passes(tmp_path: Path) -> None:
    wrong = dict(GOOD, id="x/wrong", reference="def f():\n    return 2\n")
    hollow = dict(GOOD, id="x/hollow", tests=[{"kind": "script", "code": "assert True"}])
    d = suite_dir(tmp_path, [GOOD, wrong, hollow])
    result = runner.invoke(app, ["tasks", "check", str(d), "--backend", "local", "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["reference"]["failed"] == ["x/wrong"]
    assert report["empty"]["broken"] == ["x/hollow"]
    assert report["reference"]["passed"] == 2 and report["tasks"] == 3


def test_check_a_solutions_file(tmp_path: Path) -> None:
    d = suite_dir(tmp_path, [GOOD])
    sols = tmp_path / "samples.jsonl"
    sols.write_text(json.dumps({"task_id": "x/1", "completion": "Sure:\n```python\ndef f():\n    return 1\n```"}) + "\n")
    result = runner.invoke(app, ["tasks", "check", str(d), "--solutions", str(sols), "--backend", "local", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["file"]["passed"] == 1
    # a failing solution fails the check
    sols.write_text(json.dumps({"task_id": "x/1", "solution": "def f():\n    return 2\n"}) + "\n")
    result = runner.invoke(app, ["tasks", "check", str(d), "--solutions", str(sols), "--backend", "local", "--json"])
    assert result.exit_code == 1, result.output
    checked = json.loads(result.stdout)["file"]
    assert checked["passed"] == 0 and checked["failed"] == ["x/1"]
    sols.write_text(json.dumps({"task_id": "x/404", "solution": ""}) + "\n")
    result = runner.invoke(app, ["tasks", "check", str(d), "--solutions", str(sols), "--backend", "local"])
    assert result.exit_code == 2 and "task_id 'x/404' is not in suite" in result.stderr


def test_check_without_references_checks_nothing_and_says_so(tmp_path: Path) -> None:
    bare = {k: v for k, v in GOOD.items() if k != "reference"}
    d = suite_dir(tmp_path, [bare, dict(bare, id="x/2")])
    result = runner.invoke(app, ["tasks", "check", str(d), "--backend", "local", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["reference"]["checked"] == report["reference"]["passed"] == 0
    assert report["reference"]["no_reference"] == ["x/1", "x/2"] and report["empty"]["failed"] == 2
    result = runner.invoke(app, ["tasks", "check", str(d), "--solutions", "reference", "--backend", "local"])
    assert result.exit_code == 0 and "no reference: none of the 2 tasks has one" in result.stdout, result.output
    assert "pass" not in result.stdout.split("reference:")[1].split("\n")[0]


def test_check_names_why_a_task_failed(tmp_path: Path) -> None:
    wrong = dict(GOOD, reference="def f():\n    return 2\n")
    d = suite_dir(tmp_path, [wrong])
    result = runner.invoke(app, ["tasks", "check", str(d), "--backend", "local", "--json"])
    assert result.exit_code == 1
    why = json.loads(result.stdout)["reference"]["failures"]["x/1"]
    assert why.startswith("test 0: fail") and "expected" in why, why


def test_convert_refuses_to_overwrite(tmp_path: Path, benchmarks: Path) -> None:
    src = str(BENCH / "humaneval" / "HumanEval.jsonl.gz")
    dst = tmp_path / "he"
    assert runner.invoke(app, ["tasks", "convert", "humaneval", src, str(dst)]).exit_code == 0
    again = runner.invoke(app, ["tasks", "convert", "humaneval", src, str(dst)])
    assert again.exit_code == 2 and "--force" in again.stderr
    assert runner.invoke(app, ["tasks", "convert", "humaneval", src, str(dst), "--force"]).exit_code == 0
    bad = runner.invoke(app, ["tasks", "convert", "leetcode", src, str(tmp_path / "x")])
    assert bad.exit_code == 2 and "unknown format 'leetcode'" in bad.stderr


def _check_json(args: list[str]) -> dict:
    result = runner.invoke(app, ["tasks", "check", *args, "--backend", "docker", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.docker
def test_demo_suite_checks_clean_over_three_repeats(docker_ready: None) -> None:
    report = _check_json(["demo", "--repeat", "3"])
    assert report["backend"] == "docker"
    assert report["reference"]["passed"] == report["tasks"] == 60
    assert report["empty"]["failed"] == 60
    assert report["reference"]["flaky"] == [] and report["empty"]["flaky"] == []
    assert report["slow"] == []


# Tasks with a test that the empty solution (a stub returning None) passes: MBPP asserts
# like `find_solution(4, 2, 7) == None`. They are the data's, and `tasks check` names them.
MBPP_SANITIZED_STUB_PASSES = ["Mbpp/160", "Mbpp/395", "Mbpp/431", "Mbpp/602", "Mbpp/626", "Mbpp/737", "Mbpp/746",
                              "Mbpp/755", "Mbpp/773", "Mbpp/781", "Mbpp/787", "Mbpp/794", "Mbpp/803", "Mbpp/804"]
MBPP_FULL_STUB_PASSES = ["Mbpp/395", "Mbpp/431", "Mbpp/452", "Mbpp/546", "Mbpp/746", "Mbpp/755", "Mbpp/761",
                         "Mbpp/954"]


@pytest.mark.docker
@pytest.mark.parametrize("fmt, src, count, stub_passes", [
    ("humaneval", BENCH / "humaneval" / "HumanEval.jsonl.gz", 164, []),
    ("mbpp", BENCH / "mbpp" / "sanitized-mbpp.json", 427, MBPP_SANITIZED_STUB_PASSES),
    ("mbpp", BENCH / "mbpp" / "mbpp.jsonl", 974, MBPP_FULL_STUB_PASSES),
])
def test_public_benchmarks_convert_and_check(docker_ready: None, benchmarks: Path, tmp_path: Path, fmt: str, src: Path,
                                             count: int, stub_passes: list[str]) -> None:
    dst = tmp_path / "suite"
    assert runner.invoke(app, ["tasks", "convert", fmt, str(src), str(dst)]).exit_code == 0
    result = runner.invoke(app, ["tasks", "check", str(dst), "--backend", "docker", "--json"])
    assert result.exit_code == (1 if stub_passes else 0), result.output
    report = json.loads(result.stdout)
    assert report["tasks"] == count
    assert report["reference"]["passed"] == count, report["reference"]["failed"][:10]
    assert report["empty"]["broken"] == stub_passes
    assert report["empty"]["failed"] == count  # the stub fails every task, though it passes some tests
    assert report["reference"]["unattested_tests"] == 0  # every Python test is judged out of process


# tests/fixtures/unreadable/: one file per adapter shape, a good record and two unreadable
# ones (record index, id, field) in each.
UNREADABLE = Path(__file__).resolve().parent / "fixtures" / "unreadable"
SHAPES = [
    ("humaneval", "humaneval", ["Own/0"], [(1, "Own/1", "prompt"), (2, "Own/2", "test")]),
    ("mbpp", "mbpp", ["Mbpp/601"], [(1, "602", "test_list"), (2, "six hundred three", "task_id")]),
    ("stdio", "stdio", ["sum-two"], [(1, "no-text", "prompt"), (2, "short", "input_output.outputs")]),
    ("call", "call", ["double"], [(1, "nameless", "fn_name"), (2, "flat", "inputs")]),
    ("evalplus", "evalplus", ["HumanEval/900"],
     [(1, "HumanEval/901", "base_input"), (2, "HumanEval/902", "canonical_solution")]),
    ("codecontests", "codecontests", ["9100_A. Plus One"],
     [(1, "9100_B. Broken Groups", "private_tests"), (2, "9100_C. Broken Limit", "time_limit")]),
    ("apps", "apps", ["apps/91001"], [(1, "91002", "input_output"), (2, "91003", "input_output.inputs[0]")]),
    # MapCoder's shape: the multi-line string argument (apps/90102) is resolved; the
    # ambiguous one (90103) is skipped with its reason.
    ("apps", "apps_mapcoder", ["apps/90101", "apps/90102"],
     [(2, "90103", "test_list[0].input"), (3, "90104", "test_list[1]")]),
]


@pytest.mark.parametrize("fmt, name, good, bad", SHAPES, ids=[s[1] for s in SHAPES])
def test_convert_lists_every_unreadable_record_and_skips_them_on_request(
        tmp_path: Path, fmt: str, name: str, good: list[str], bad: list[tuple[int, str, str]]) -> None:
    src, dst = str(UNREADABLE / f"{name}.jsonl"), tmp_path / "out"
    total = len(good) + len(bad)
    listed = [f"  record {i} (id {rid}), {field}: " for i, rid, field in bad]

    refused = runner.invoke(app, ["tasks", "convert", fmt, src, str(dst)])
    assert refused.exit_code == 2, refused.output
    lines = refused.stderr.strip().splitlines()
    assert lines[0] == f"{len(bad)} of {total} records cannot be read:"
    assert [line[:len(want)] for line, want in zip(lines[1:-1], listed, strict=True)] == listed
    assert lines[-1].startswith(f"error: {len(bad)} of {total} records of {src} cannot be read")
    assert "nothing was written" in lines[-1] and "pass --skip-invalid" in lines[-1]
    assert not dst.exists()

    result = runner.invoke(app, ["tasks", "convert", fmt, src, str(dst), "--skip-invalid"])
    assert result.exit_code == 0, result.output
    assert [line[:len(want)] for line, want in zip(result.stderr.splitlines()[1:], listed, strict=True)] == listed
    assert f"wrote {len(good)} tasks" in result.stdout and f"skipped {len(bad)} unreadable records" in result.stdout
    assert [json.loads(line)["id"] for line in (dst / "tasks.jsonl").read_text().splitlines()] == good
    skipped = yaml.safe_load((dst / "suite.yaml").read_text())["skipped"]
    assert [(s["index"], s["id"], s["field"]) for s in skipped] == bad
    assert all(s["reason"] and s["reason"] in result.stderr for s in skipped)

    shown = runner.invoke(app, ["tasks", "show", str(dst)])
    assert shown.exit_code == 0, shown.output
    assert f"{len(good)} tasks (hash" in shown.stdout and f"{len(bad)} records skipped at conversion" in " ".join(
        shown.stdout.split())  # the title may wrap
    listing = runner.invoke(app, ["tasks", "list", f"tasks.paths=[{tmp_path}]"])
    assert listing.exit_code == 0, listing.output
    row = next(line.split("│") for line in listing.stdout.splitlines() if line.startswith("│ out "))
    assert [cell.strip() for cell in row[2:4]] == [str(len(good)), str(len(bad))]


def test_convert_with_no_readable_record_writes_nothing(tmp_path: Path) -> None:
    src = tmp_path / "broken.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ({"question": "q"}, {"question": "r", "inputs": 3,
                                                                                  "outputs": ["3\n"]})))
    for extra in ([], ["--skip-invalid"]):
        result = runner.invoke(app, ["tasks", "convert", "stdio", str(src), str(tmp_path / "out"), *extra])
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert lines[1].startswith("  record 0 (id -), input_output: no stdin/stdout pairs")
        assert lines[2].startswith("  record 1 (id -), inputs: is int, expected a list")
        assert lines[-1].startswith(f"error: none of the 2 records of {src} can be read")
        assert not (tmp_path / "out").exists()


def test_convert_skips_a_record_whose_id_an_earlier_one_has(tmp_path: Path) -> None:
    record = {"id": "twin", "question": "Print the input.", "inputs": ["a\n"], "outputs": ["a\n"]}
    src = tmp_path / "twins.jsonl"
    src.write_text(json.dumps(record) + "\n" + json.dumps(record) + "\n")
    assert runner.invoke(app, ["tasks", "convert", "stdio", str(src), str(tmp_path / "no")]).exit_code == 2
    result = runner.invoke(app, ["tasks", "convert", "stdio", str(src), str(tmp_path / "s"), "--skip-invalid"])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load((tmp_path / "s" / "suite.yaml").read_text())["skipped"] == [
        {"index": 1, "id": "twin", "field": "id", "reason": "'twin' is also the id of record 0"}]
