"""Eval: pass@k statistics, samples files, resumable model evals, bad input."""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import math
import threading
from concurrent.futures import Future
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from conftest import BENCH
from grpo_code import generation
from grpo_code.cli import app
from grpo_code.config import SandboxConfig, load_config
from grpo_code.errors import GrpoCodeError
from grpo_code.evaluate import (
    EvalError,
    EvalRequest,
    EvalSettings,
    EvalSummary,
    Hooks,
    TaskCount,
    bootstrap_ci,
    eval_model,
    pass_at_k,
    print_results,
    run,
    score_samples,
    slug,
)
from grpo_code.evaluate.summary import SummaryFormatError
from grpo_code.generation.base import Sampling, model_prompt_style, prompt_style, seeded_chunks, torch_dtype
from grpo_code.sandbox import Sandbox, harness_fingerprint, image
from grpo_code.sandbox.types import Job, Result, Status, TestResult, Verdict
from grpo_code.tasks import load_suite
from grpo_code.tasks.prompts import Prompt, render

runner = CliRunner()
HUMANEVAL = BENCH / "humaneval" / "HumanEval.jsonl.gz"


@pytest.mark.parametrize("n, c, k", [(5, 0, 1), (5, 5, 3), (10, 3, 1), (10, 3, 5), (6, 2, 6), (4, 1, 2)])
def test_pass_at_k_matches_the_combinatorial_definition(n: int, c: int, k: int) -> None:
    # P(at least one correct among k drawn without replacement from n with c correct)
    draws = list(itertools.combinations([1] * c + [0] * (n - c), k))
    expected = sum(any(d) for d in draws) / len(draws)
    assert pass_at_k(n, c, k) == pytest.approx(expected)
    assert pass_at_k(n, c, 1) == pytest.approx(c / n)


def test_bootstrap_interval_brackets_the_mean_and_is_deterministic() -> None:
    values = [0.0] * 30 + [1.0] * 10
    lo, hi = bootstrap_ci(values)
    assert lo < 0.25 < hi and (lo, hi) == bootstrap_ci(values)
    assert bootstrap_ci([1.0] * 5) == (1.0, 1.0)


def _samples(tmp_path: Path, records: list[dict]) -> Path:
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _eval_samples(path: Path, suite: str, out: Path, *extra: str):
    return runner.invoke(app, ["eval", "--samples", str(path), "--tasks", suite, "--out", str(out), "--k", "1",
                               "--sandbox", "local", *extra])


def test_samples_file_local_backend(tmp_path: Path) -> None:
    demo = load_suite("demo").split("test")
    records = [{"task_id": t.id, "solution": t.reference} for t in demo.tasks]
    records += [{"task_id": t.id, "completion": "I don't know."} for t in demo.tasks]
    result = _eval_samples(_samples(tmp_path, records), "demo", tmp_path / "out", "--k", "1,2")
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["pass_at_k"]["1"] == pytest.approx(0.5) and summary["pass_at_k"]["2"] == 1.0
    assert summary["n"] == 2 and summary["tasks"] == 18 and summary["verdicts"]["no_code"] == 18
    assert summary["tasks_in_suite"] == 60 and len(summary["missing_tasks"]) == 42  # --split all: every task
    assert "pass@k over 18/60 tasks" in result.stdout and "42 of 60 tasks have no samples" in result.stderr
    assert summary["suite_hash"] == demo.content_hash()
    assert set(summary) >= {"pass_at_k", "ci95", "n", "tasks", "suite_hash"}
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 36


@pytest.mark.parametrize("records, needle", [
    ([{"task_id": "HumanEval/0", "solution": ""}], "task_id 'HumanEval/0' is not in suite 'demo'"),
    ([{"task_id": "demo/001-add"}], "needs a 'completion' or 'solution' string"),
])
def test_bad_samples_are_one_line_errors(tmp_path: Path, records, needle: str) -> None:
    result = _eval_samples(_samples(tmp_path, records), "demo", tmp_path / "out")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and needle in result.stderr
    assert not (tmp_path / "out" / "summary.json").exists()


def test_k_larger_than_n_is_skipped_and_refused_when_no_k_is_left(tmp_path: Path) -> None:
    path = _samples(tmp_path, [{"task_id": "demo/001-add", "solution": "def add(a, b):\n    return a + b\n"}])
    result = _eval_samples(path, "demo", tmp_path / "out", "--k", "1,5", "--split", "1-1")
    assert result.exit_code == 0 and "note: pass@5 skipped" in result.stderr
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["pass_at_k"] == {"1": 1.0}
    result = _eval_samples(path, "demo", tmp_path / "out2", "--k", "5", "--split", "1-1")
    assert result.exit_code == 2 and "k=5 is larger than n=1" in result.stderr
    result = runner.invoke(app, ["eval", "smollm2-135m-instruct", "--n", "2", "--k", "4", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "k=4 is larger than n=2" in result.stderr


def test_missing_model_is_a_user_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["eval", "./no/such/model", "--n", "1", "--k", "1", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "model './no/such/model' not found" in result.stderr


@pytest.mark.docker
def test_humaneval_references_pass_and_swapped_references_fail(docker_ready: None, benchmarks: Path, tmp_path: Path) -> None:
    suite = f"humaneval:{HUMANEVAL}"
    tasks = load_suite(suite).tasks
    right = [{"task_id": t.id, "solution": t.reference} for t in tasks]
    swapped = [{"task_id": t.id, "solution": tasks[(i + 1) % len(tasks)].reference} for i, t in enumerate(tasks)]
    bodies = [{"task_id": t.id, "completion": t.reference[len(t.prompt):]} for t in tasks]  # HumanEval's own format
    for records, expected, name in ((right, 1.0, "right"), (swapped, 0.0, "swapped"), (bodies, 1.0, "bodies")):
        out = tmp_path / name
        result = runner.invoke(app, ["eval", "--samples", str(_samples(tmp_path, records)), "--tasks", suite,
                                     "--out", str(out), "--k", "1", "--sandbox", "docker"])
        assert result.exit_code == 0, result.output
        summary = json.loads((out / "summary.json").read_text())
        assert summary["pass_at_k"]["1"] == expected and summary["tasks"] == 164, name


class JudgingSandbox:
    """Fails every test until ``fixed``, then passes them all; counts the jobs it runs."""

    def __init__(self) -> None:
        self.config = SandboxConfig()
        self.fixed = False
        self.jobs = 0

    def fingerprint(self, language: str) -> str:
        return harness_fingerprint(language, self.config)

    def submit(self, job: Job) -> Future:
        self.jobs += 1
        tests = tuple(TestResult(Verdict.PASS if self.fixed else Verdict.FAIL) for _ in job.tests)
        passed = len(tests) if self.fixed else 0
        fut: Future = Future()
        fut.set_result(Result(Status.PASS if self.fixed else Status.FAIL, passed, len(tests), tests, 1.0))
        return fut


def test_resume_reruns_verdicts_of_another_harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite = load_suite("demo")
    path = _samples(tmp_path, [{"task_id": t.id, "solution": t.reference} for t in suite.tasks[:2]])
    out, sb = tmp_path / "out", JudgingSandbox()

    def pass_at_1() -> float:
        return score_samples(path, suite, [1], out, sb).pass_at_k[1]

    assert pass_at_1() == 0.0 and sb.jobs == 2  # a harness bug fails correct solutions
    assert pass_at_1() == 0.0 and sb.jobs == 2  # same harness: the records are reused
    sb.fixed = True
    monkeypatch.setattr(image, "executor_hash", lambda: "0" * 16)  # the fix
    assert pass_at_1() == 1.0 and sb.jobs == 4
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["harness"] for r in records[2:]] == [harness_fingerprint("python", sb.config)] * 2
    # the limits are part of the harness
    sb.config = dataclasses.replace(sb.config, timeout_s=1.0)
    assert pass_at_1() == 1.0 and sb.jobs == 6
    # records written before the fingerprint existed are run again
    (out / "results.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "harness"}) + "\n"
                                               for r in records[2:]))
    sb.config = SandboxConfig()
    assert pass_at_1() == 1.0 and sb.jobs == 8
    # records written before verdicts were keyed by the program run (and before first_failure)
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    (out / "results.jsonl").write_text("".join(
        json.dumps({k: v for k, v in r.items() if k not in ("program_sha", "first_failure")}) + "\n"
        for r in records[-2:]))
    assert pass_at_1() == 1.0 and sb.jobs == 10
    assert pass_at_1() == 1.0 and sb.jobs == 10


def test_resume_reruns_verdicts_of_a_changed_test_and_says_so(tmp_path: Path) -> None:
    suite = load_suite("demo")
    task = suite.tasks[0]
    path = _samples(tmp_path, [{"task_id": task.id, "solution": task.reference}])
    out, sb, notes = tmp_path / "out", JudgingSandbox(), []

    def pass_at_1(s) -> float:
        hooks = Hooks(note=lambda text: notes.append(text) if "another version" in text else None)
        return score_samples(path, s, [1], out, sb, hooks=hooks).pass_at_k[1]

    assert pass_at_1(suite) == 0.0 and sb.jobs == 1  # a broken test fails the right solution
    sb.fixed = True
    assert pass_at_1(suite) == 0.0 and sb.jobs == 1 and not notes  # same tests: the verdict is reused
    fixed_test = dataclasses.replace(task.tests[0], expected=[task.tests[0].expected])  # another expected value
    fixed = dataclasses.replace(suite, tasks=(dataclasses.replace(task, tests=(fixed_test, *task.tests[1:])),
                                              *suite.tasks[1:]))
    assert pass_at_1(fixed) == 1.0 and sb.jobs == 2  # the test was fixed: the sample runs again
    assert notes == ["1 results were judged against another version of their task (its tests, checkers, limits or "
                     "prompt changed since) and run again"]


# ------------------------------------------------------------------ resumable model evals


class FakeGenerator:
    """Deterministic in (prompt, seed): answers the reference for even seeds, prose otherwise."""

    style = "chat"
    name = "fake"

    def __init__(self, suite, fail_after: int | None = None):
        self.by_prompt = {t.prompt: t.reference for t in suite.tasks}
        self.calls = 0
        self.fail_after = fail_after

    def generate(self, prompts: list[Prompt], sampling: Sampling, seed: int = 0, progress=None) -> list[list[str]]:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise KeyboardInterrupt  # the user pressed Ctrl-C mid-eval
        self.calls += 1
        out = []
        for p in prompts:
            ref = next(r for q, r in self.by_prompt.items() if q in p.messages[-1]["content"])
            out.append([f"```python\n{ref}```" if (seed + i + len(ref)) % 3 else "no idea" for i in range(sampling.n)])
        return out

    def close(self) -> None:
        pass


def _settings(suite, **kw) -> EvalSettings:
    base = dict(model="fake", suite=suite.name, suite_hash=suite.content_hash(), split="test", n=3,
                temperature=0.8, top_p=1.0, max_new_tokens=64, seed=7, backend="hf", batch_size=6, style="chat")
    return EvalSettings(**{**base, **kw})


def test_killed_eval_resumes_to_the_same_summary(tmp_path: Path) -> None:
    suite = load_suite("demo").split("test")
    with Sandbox(SandboxConfig(backend="local"), quiet=True) as sb:
        whole = eval_model(lambda: FakeGenerator(suite), _settings(suite), suite, [1, 3], tmp_path / "a", sb)
        with pytest.raises(KeyboardInterrupt):
            eval_model(lambda: FakeGenerator(suite, fail_after=4), _settings(suite), suite, [1, 3], tmp_path / "b", sb)
        assert not (tmp_path / "b" / "summary.json").exists()
        with (tmp_path / "b" / "samples.jsonl").open("a") as fh:
            fh.write('{"task_id": "demo/0')  # a torn line from the kill
        resumed_gen = FakeGenerator(suite)
        resumed = eval_model(lambda: resumed_gen, _settings(suite), suite, [1, 3], tmp_path / "b", sb)
    assert resumed_gen.calls == math.ceil(len(suite) / 2) - 4  # only the missing chunks were generated
    assert resumed == whole and 0 < whole.pass_at_k[1] < 1
    # summary.json holds the same record that eval_model returned
    assert EvalSummary.from_json(json.loads((tmp_path / "b" / "summary.json").read_text())) == resumed


def test_the_summary_record_reads_old_files_and_names_what_is_wrong() -> None:
    old = {"pass_at_k": {"1": 0.5}, "ci95": {"1": [0.0, 1.0]}, "n": 2, "tasks": 2, "suite": "s", "suite_hash": "h",
           "verdicts": {"pass": 2, "fail": 2}, "per_task": {"a": {"n": 2, "correct": 2}, "b": {"n": 2, "correct": 0}},
           "model": "m"}  # written before tasks_in_suite, missing_tasks and turns existed
    s = EvalSummary.from_json(old)
    assert (s.tasks, s.tasks_in_suite, s.missing_tasks, s.n, s.samples, s.turns) == (2, 2, (), 2, 4, None)
    assert s.pass_at_k == {1: 0.5} and s.ci95 == {1: (0.0, 1.0)} and s.per_task["a"] == TaskCount(2, 2)
    assert EvalSummary.from_json(s.to_json()) == s
    assert {k: v for k, v in s.to_json().items() if k in old} == old
    uneven = EvalSummary.from_json({**old, "per_task": {"a": {"n": 2, "correct": 1}, "b": {"n": 3, "correct": 0}}})
    assert uneven.n == [2, 3]
    for bad, said in (([], "no pass_at_k"), ({"ci95": {}}, "no pass_at_k"), ({**old, "settings": "x"}, "settings"),
                      ({**old, "per_task": {"a": {"n": 2}}}, "KeyError"), ({**old, "pass_at_k": {"x": 1}}, "ValueError")):
        with pytest.raises(SummaryFormatError, match=said):
            EvalSummary.from_json(bad)


def test_changed_settings_are_refused_naming_the_keys(tmp_path: Path) -> None:
    suite = load_suite("demo").split("test")
    with Sandbox(SandboxConfig(backend="local"), quiet=True) as sb:
        eval_model(lambda: FakeGenerator(suite), _settings(suite), suite, [1], tmp_path, sb)
        with pytest.raises(EvalError, match=r"other settings \(n: 3 -> 4; temperature: 0.8 -> 0.2\)"):
            eval_model(lambda: FakeGenerator(suite), _settings(suite, n=4, temperature=0.2), suite, [1], tmp_path, sb)
        # An eval written before a setting existed resumes when the setting keeps its default.
        written = json.loads((tmp_path / "config.json").read_text())
        del written["stop_after_code"]
        (tmp_path / "config.json").write_text(json.dumps(written))
        eval_model(lambda: FakeGenerator(suite), _settings(suite), suite, [1], tmp_path, sb)
        with pytest.raises(EvalError, match=r"stop_after_code: False -> True"):
            eval_model(lambda: FakeGenerator(suite), _settings(suite, stop_after_code=True), suite, [1], tmp_path, sb)


def test_eval_and_the_hf_backend_chunk_and_seed_by_one_rule(tmp_path: Path) -> None:
    assert seeded_chunks(list("abcde"), 4, 2, 7) == [(7_000_021, ["a", "b"]), (7_000_022, ["c", "d"]),
                                                     (7_000_023, ["e"])]
    assert seeded_chunks(list("ab"), 1, 4, 0) == [(0, ["a"]), (1, ["b"])]  # one prompt a chunk at least
    suite = load_suite("demo").split("test")
    calls: list[tuple[int, int]] = []

    class Recording(FakeGenerator):
        def generate(self, prompts, sampling, seed=0, progress=None):
            calls.append((seed, len(prompts)))
            return super().generate(prompts, sampling, seed, progress)

    with Sandbox(SandboxConfig(backend="local"), quiet=True) as sb:
        eval_model(lambda: Recording(suite), _settings(suite), suite, [1], tmp_path, sb)
    assert calls == [(seed, len(chunk)) for seed, chunk in seeded_chunks(suite.tasks, 6, 3, 7)]


# ------------------------------------------------------------------ eval as one library call


def test_run_checks_every_input_before_the_sandbox_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import grpo_code.sandbox

    def no_sandbox(*args, **kwargs):
        raise AssertionError("the sandbox started before the input was checked")

    monkeypatch.setattr(grpo_code.sandbox, "Sandbox", no_sandbox)
    monkeypatch.chdir(tmp_path)
    cfg = load_config()
    bad = [(EvalRequest(cfg, models=("m",), backend="openai", n=2, ks=(5,)), "k=5 is larger than n=2"),
           (EvalRequest(cfg, models=("m",), samples=tmp_path / "s.jsonl"), "either models or --samples"),
           (EvalRequest(cfg, backend="openai", stop_after_code=True), "--stop-after-code needs"),
           (EvalRequest(cfg, tasks="no-such-suite"), "unknown suite 'no-such-suite'"),
           (EvalRequest(cfg, samples=tmp_path / "none.jsonl"), "none.jsonl"),
           (EvalRequest(cfg, models=("./no/such/model",), n=1, ks=(1,)), "model './no/such/model' not found")]
    for request, needle in bad:
        with pytest.raises(GrpoCodeError, match=needle):
            run(request, Console(file=io.StringIO()))
    assert list(tmp_path.iterdir()) == []


def test_run_evaluates_each_model_resumes_and_prints_the_table(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    suite = load_suite("demo").split("test")
    loaded: list[tuple[str, str, int]] = []

    def fake_load(backend: str, model: str, **kwargs) -> FakeGenerator:
        loaded.append((backend, model, kwargs["batch_size"]))
        return FakeGenerator(suite)

    monkeypatch.setattr(generation, "load_generator", fake_load)
    cfg = load_config(None, ["sandbox.backend=local"])
    request = EvalRequest(cfg, models=("a", "org/b"), backend="openai", server_url="http://unused", batch_size=6,
                          seed=7, n=3, ks=(1, 3, 8), out=tmp_path)
    console = Console(file=io.StringIO(), width=200)
    result = run(request, console)
    assert list(result.summaries) == ["a", "org/b"] and result.ks == (1, 3) and result.models_dir == tmp_path
    assert loaded == [("openai", "a", 6), ("openai", "org/b", 6)]
    assert "note: pass@8 skipped" in console.file.getvalue()
    settings = result.summaries["a"].settings
    assert (settings["style"], settings["split"], settings["seed"], settings["n"]) == ("chat", "test", 7, 3)
    assert settings["suite_hash"] == suite.content_hash()
    with Sandbox(SandboxConfig(backend="local"), quiet=True) as sb:  # the same as one eval_model call
        alone = eval_model(lambda: FakeGenerator(suite), EvalSettings(**settings), suite, [1, 3], tmp_path / "x", sb)
    assert alone.pass_at_k == result.summaries["a"].pass_at_k
    again = run(request, console)  # a rerun resumes: nothing is generated
    assert loaded == [("openai", "a", 6), ("openai", "org/b", 6)]
    assert again.summaries["org/b"].per_task == result.summaries["org/b"].per_task
    assert (tmp_path / slug("org/b") / "summary.json").is_file()
    table = Console(file=io.StringIO(), width=200)
    print_results(result, table)
    text = table.file.getvalue()
    assert "pass@k over 18/18 tasks" in text and "pass@3" in text and "pass@8" not in text
    assert f"outputs: {tmp_path}/<model>/summary.json" in text


# ------------------------------------------------------------------ generation backends


def test_prompt_style_and_dtype_are_one_rule_each() -> None:
    import torch

    class Tokenizer:
        chat_template = None

    assert prompt_style(Tokenizer()) == "raw"
    Tokenizer.chat_template = "{{ messages }}"
    assert prompt_style(Tokenizer()) == "chat"
    assert model_prompt_style("openai", "no/such-model") == "chat"  # decided without loading anything
    assert torch_dtype("auto", "cpu") is torch.float32 and torch_dtype("auto", "cuda") is torch.bfloat16
    assert torch_dtype("auto") is (torch.bfloat16 if torch.cuda.is_available() else torch.float32)
    assert torch_dtype("float16") is torch.float16
    with pytest.raises(GrpoCodeError, match="unknown dtype 'int8'"):
        torch_dtype("int8")


class _Handler(BaseHTTPRequestHandler):
    calls: list[dict] = []
    fail_first = True

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).calls.append({"path": self.path, **body})
        if type(self).fail_first:
            type(self).fail_first = False
            self.send_response(503)
            self.end_headers()
            return
        if self.path.endswith("/chat/completions"):
            choices = [{"message": {"content": "```python\ndef add(a, b):\n    return a + b\n```"}}]  # one, not n
        else:
            choices = [{"text": "    return a + b\n"} for _ in range(body["n"])]
        data = json.dumps({"choices": choices}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def test_openai_backend_retries_and_fills_n(tmp_path: Path) -> None:
    from grpo_code.generation.openai import OpenAIGenerator

    _Handler.calls, _Handler.fail_first = [], True
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        gen = OpenAIGenerator("m", f"http://127.0.0.1:{server.server_port}/v1", retries=2)
        chat = Prompt("chat", messages=({"role": "user", "content": "add"},))
        raw = Prompt("raw", text="def add(a, b):\n")
        out = gen.generate([chat, raw], Sampling(n=3, max_new_tokens=16, top_k=20))
        sent_with_top_k = len(_Handler.calls)
        gen.generate([raw], Sampling(n=1, max_new_tokens=16, top_k=0))
    finally:
        server.shutdown()
    assert len(out[0]) == 3 and all("def add" in t for t in out[0])
    assert out[1] == ["    return a + b\n"] * 3
    paths = [c["path"] for c in _Handler.calls[:sent_with_top_k]]
    # 3 chat requests (the server answers one choice, not n), 1 completions request, and one
    # of them repeated after the 503 (which one depends on the order the threads reach it).
    assert len(paths) == 5 and paths.count("/v1/chat/completions") in (3, 4)
    assert {c["prompt"] for c in _Handler.calls if c["path"] == "/v1/completions"} == {"def add(a, b):\n"}
    # Every sampling setting reaches the server, top_k too (left out when 0: no limit).
    assert all(c["top_k"] == 20 and c["max_tokens"] == 16 for c in _Handler.calls[:sent_with_top_k])
    assert all("top_k" not in c for c in _Handler.calls[sent_with_top_k:])


def test_openai_backend_unreachable_is_a_user_error() -> None:
    from grpo_code.errors import GrpoCodeError
    from grpo_code.generation.openai import OpenAIGenerator

    gen = OpenAIGenerator("m", "http://127.0.0.1:9/v1", retries=0)
    with pytest.raises(GrpoCodeError, match="generation server http://127.0.0.1:9/v1 failed"):
        gen.generate([Prompt("raw", text="x")], Sampling(n=1))


def test_hf_backend_is_seeded_and_loads_lora_adapters(demo_model_dir: Path, tmp_path: Path) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from grpo_code.generation import load_generator
    from grpo_code.generation.base import resolve

    base = AutoModelForCausalLM.from_pretrained(demo_model_dir)
    peft_model = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():  # a large, fixed update so the adapter surely changes greedy outputs
        for name, param in peft_model.named_parameters():
            if "lora_" in name:
                param.fill_(0.05)
    peft_model.save_pretrained(tmp_path / "adapter")
    cfg = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    cfg["base_model_name_or_path"] = "smollm2-135m-instruct"  # a short name resolves through the cache
    (tmp_path / "adapter" / "adapter_config.json").write_text(json.dumps(cfg))
    resolved = resolve(str(tmp_path / "adapter"))
    assert resolved.path == str(demo_model_dir) and resolved.adapter == str(tmp_path / "adapter")

    prompt = Prompt("chat", messages=({"role": "user", "content": "Write a Python function add(a, b)."},))
    sampling = Sampling(n=2, temperature=0.8, max_new_tokens=12)
    plain = load_generator("hf", "smollm2-135m-instruct", batch_size=4)
    first = plain.generate([prompt], sampling, seed=3)
    assert first == plain.generate([prompt], sampling, seed=3)
    assert len(first[0]) == 2
    # top_k reaches generate: keeping only the most likely token samples the greedy answer
    greedy = plain.generate([prompt], Sampling(n=1, temperature=0.0, max_new_tokens=12))[0][0]
    assert plain.generate([prompt], Sampling(n=2, temperature=0.8, top_k=1, max_new_tokens=12), seed=5)[0] == [greedy] * 2
    adapted = load_generator("hf", str(tmp_path / "adapter"), batch_size=4)
    merged = adapted.model.model.layers[0].self_attn.q_proj.weight
    original = plain.model.model.layers[0].self_attn.q_proj.weight
    assert not torch.equal(merged, original)  # the adapter was merged into the base weights
    assert len(adapted.generate([prompt], Sampling(n=1, temperature=0.0, max_new_tokens=4))[0]) == 1


def test_hf_stop_after_code_ends_completions_at_their_whole_program(demo_model_dir: Path) -> None:
    """A stopped completion is a prefix of the one generated without stopping (same seed,
    the other rows sample alike), it holds a whole program, and that program is the one the
    full completion gives unless the full text wrote a later block."""
    from grpo_code.generation import load_generator
    from grpo_code.tasks.extract import build_program, whole_program

    tasks = load_suite("demo").split("1-3").tasks
    prompts = [render(t, "chat") for t in tasks]
    sampling = Sampling(n=4, temperature=0.8, max_new_tokens=128)
    generator = load_generator("hf", "smollm2-135m-instruct", batch_size=12)
    full = generator.generate(prompts, sampling, seed=1)
    asked: list[int] = []

    def done(i: int, text: str) -> bool:
        asked.append(i)
        return whole_program(tasks[i], text)

    stopped = generator.generate(prompts, sampling, seed=1, done=done)
    assert sorted(set(asked)) == [0, 1, 2]
    shorter = 0
    for task, ends, fulls in zip(tasks, stopped, full, strict=True):
        for end, text in zip(ends, fulls, strict=True):
            assert text.startswith(end)
            if end != text:
                shorter += 1
                assert whole_program(task, end)
                if "```" not in text[len(end):]:
                    assert build_program(task, end).program == build_program(task, text).program
    assert shorter >= 3, stopped


def test_stop_after_code_needs_local_generation(tmp_path: Path) -> None:
    result = runner.invoke(app, ["eval", "--stop-after-code", "--backend", "openai",
                                 "--server-url", "http://127.0.0.1:1/v1", "--out", str(tmp_path / "e")])
    assert result.exit_code != 0 and "--stop-after-code needs generation with the hf or vllm backend" in result.output
    assert not (tmp_path / "e").exists()


def test_eval_cli_end_to_end_is_reproducible(demo_model_dir: Path, tmp_path: Path) -> None:
    args = ["eval", "smollm2-135m-instruct", "--tasks", "demo", "--split", "1-3", "--n", "2", "--k", "1,2",
            "--max-new-tokens", "48", "--backend", "hf", "--sandbox", "local"]
    first = runner.invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, [*args, "--out", str(tmp_path / "b")])
    assert second.exit_code == 0, second.output
    a = tmp_path / "a" / "smollm2-135m-instruct"
    b = tmp_path / "b" / "smollm2-135m-instruct"
    assert (a / "samples.jsonl").read_text() == (b / "samples.jsonl").read_text()
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
    assert sa["pass_at_k"] == sb["pass_at_k"] and sa["tasks"] == 3 and sa["n"] == 2
    assert "pass@1" in first.stdout
