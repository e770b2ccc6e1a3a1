"""Public tests and execution feedback: what a task shows, what a failed check says, and
eval with several turns (``grpo-code eval --turns``), which never quotes a hidden test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo_code.config import SandboxConfig
from grpo_code.errors import SuiteError
from grpo_code.evaluate import EvalSettings, eval_model
from grpo_code.sandbox import Sandbox
from grpo_code.sandbox.types import Result, Status, TestResult, Verdict
from grpo_code.tasks import load_suite
from grpo_code.tasks.examples import docstring_examples, prompt_assert
from grpo_code.tasks.schema import task_from_dict
from grpo_code.verify import feedback

HIDDEN = (424242, -515051, 777001)
"""Expected values of the hidden tests: no prompt may ever hold one."""
PUBLIC = 11


def _task(name: str) -> dict:
    return {"id": f"mt/{name}", "prompt": f"Task {name}: write f(x).", "entry_point": "f",
            "tests": [{"kind": "call", "fn": "f", "args": [i], "expected": v} for i, v in enumerate(HIDDEN)]
            + [{"kind": "call", "fn": "f", "args": [9], "expected": PUBLIC}],
            "public_tests": [{"kind": "call", "fn": "f", "args": [9], "expected": PUBLIC}],
            "reference": "def f(x):\n    return {0: 424242, 1: -515051, 2: 777001, 9: 11}[x]\n",
            "metadata": {"split": "test"}}


def test_public_tests_are_read_written_and_kept_apart_from_the_hidden_ones() -> None:
    task = task_from_dict(_task("a"), "t:1")
    assert len(task.public_tests) == 1 and len(task.tests) == 4
    assert len(task.hidden_tests) == 3  # the public copy among the tests is not hidden
    assert task_from_dict(task.to_dict(), "t:1") == task
    no_value = {**_task("b"), "public_tests": [{"kind": "call", "fn": "f", "args": [1]}]}
    with pytest.raises(SuiteError, match="public_tests.0.: needs its expected value"):
        task_from_dict(no_value, "t:2")
    demo = load_suite("demo")
    assert all(1 <= len(t.public_tests) <= 2 for t in demo.tasks)


def test_examples_come_from_what_the_prompt_shows() -> None:
    prompt = ('def add(a, b):\n    """Add.\n    >>> add(1, 2)\n    3\n    >>> add(*x)\n    1\n'
              '    add([1], (2,)) ==> [1, 2]\n    """\n')
    tests = docstring_examples(prompt, "add")
    assert [(t["args"], t["expected"]) for t in tests] == [([1, 2], 3), ([[1], {"$t": [2]}], [1, 2])]
    assert all(t["compare"] == "python" for t in tests)
    assert docstring_examples(prompt, None) == []
    assert prompt_assert("Write f.\nassert f(1) == 2\nassert f(2) == 3") == [{"kind": "script", "code": "assert f(1) == 2"}]


def test_feedback_quotes_the_failed_public_test_and_nothing_hidden() -> None:
    task = task_from_dict(_task("a"), "t:1")
    failed = Result(Status.FAIL, 0, 1, (TestResult(Verdict.FAIL, message="returned 0, expected 11"),))
    text = feedback.failure_text(task, failed)
    assert "f(9)" in text and "Expected: 11" in text and "returned 0" in text
    assert feedback.failure_text(task, Result(Status.PASS, 1, 1, (TestResult(Verdict.PASS),))) is None
    message = feedback.feedback(task, text)
    assert message.startswith(text) and "```python" in message
    assert "no ```python code block" in feedback.feedback(task, None)
    # Without public tests only a compile error is told, and its message only for Python.
    assert feedback.failure_text(task, None, None) is None
    assert "line 3" in feedback.failure_text(task, None, "SyntaxError: line 3")
    cpp = task_from_dict({**_task("c"), "language": "cpp", "public_tests": []}, "t:3")
    assert feedback.failure_text(cpp, None, "error: 'expected' near 424242") == "The program does not compile."
    assert feedback.clip("x" * 40, 40) == "x" * 40 and "left out" in feedback.clip("x" * 500, 40)


class Scripted:
    """Task A: wrong, then right once told what failed. Task B: always wrong. Records every prompt."""

    style = "chat"
    name = "scripted"

    def __init__(self, fail: bool = False) -> None:
        self.prompts: list[list[dict]] = []
        self.fail = fail

    def generate(self, prompts, sampling, seed=0, progress=None, done=None):  # noqa: ANN001, ANN201
        assert not self.fail, "a resumed eval generated again"
        out = []
        for p in prompts:
            self.prompts.append(list(p.messages))
            told = any(m["role"] == "assistant" for m in p.messages)
            right = told and "Task a" in p.messages[1]["content"]
            program = _task("a")["reference"] if right else "def f(x):\n    return 0\n"
            out.append([f"```python\n{program}```"] * sampling.n)
        return out

    def close(self) -> None:
        pass


def test_eval_turns_feed_back_public_failures_count_by_turn_and_resume(tmp_path: Path) -> None:
    suite_dir = tmp_path / "suite"
    suite_dir.mkdir()
    (suite_dir / "tasks.jsonl").write_text("".join(json.dumps(_task(n)) + "\n" for n in ("a", "b")))
    suite = load_suite(str(suite_dir))
    settings = EvalSettings(model="scripted", suite=suite.name, suite_hash=suite.content_hash(), split=None, n=2,
                            temperature=1.0, top_p=1.0, max_new_tokens=64, seed=0, backend="hf", batch_size=4,
                            style="chat", turns=3)
    model = Scripted()
    with Sandbox(SandboxConfig(backend="local", workers=1)) as sandbox:
        summary = eval_model(lambda: model, settings, suite, [1], tmp_path / "out", sandbox)
        turns = summary.turns
        assert turns.pass_at_1 == (0.0, 0.5, 0.5)  # task a is solved at turn 2 by both samples
        assert turns.samples_per_turn == (4, 4, 2)  # a stops once its public test passes
        assert turns.mean_turns == 2.5
        assert summary.pass_at_k[1] == 0.0  # pass@k stays the first answer's
        said = [m["content"] for p in model.prompts for m in p if m["role"] != "assistant"]
        assert any("Expected: 11" in text for text in said)  # the public test is quoted
        assert not [v for v in HIDDEN for text in said if str(v) in text], "a hidden expected value reached a prompt"

        again = eval_model(lambda: Scripted(fail=True), settings, suite, [1], tmp_path / "out", sandbox)
        assert again.turns == turns
    rows = [json.loads(line) for line in (tmp_path / "out" / "turns.jsonl").read_text().splitlines()]
    assert sorted((r["task_id"], r["turn"]) for r in rows) == sorted(
        [("mt/a", 2)] * 2 + [("mt/b", 2)] * 2 + [("mt/b", 3)] * 2)
    assert all("Expected: 11" in r["feedback"] for r in rows)


class FakeTrainer:
    """What a rollout uses of the trainer, and its engine with scripted answers: task a is
    right once told, task b never. Records the prompt ids of every turn; even rows end
    while the others are still generating."""

    num_generations = 2

    def __init__(self, tokenizer) -> None:
        from types import SimpleNamespace

        self.processing_class = tokenizer
        self.turn_prompts: list[list[list[int]]] = []
        self.state = SimpleNamespace(global_step=0)
        self.args = SimpleNamespace(seed=0)
        self.accelerator = SimpleNamespace(process_index=0)

    importance_sampled = False

    def take_metrics(self) -> dict:
        return {}

    def generate(self, trainer, prompt_ids, seed, watch):  # noqa: ANN001, ANN201
        from grpo_code.generation.stream import END, Sample
        from grpo_code.training.engines import Generated

        self.turn_prompts.append(prompt_ids)
        later = len(self.turn_prompts) > 1
        out = []
        for ids in prompt_ids:
            right = later and "Task a:" in self.processing_class.decode(ids)
            program = _task("a")["reference"] if right else "def f(x):\n    return 0\n"
            answer = self.processing_class(f"```python\n{program}```", add_special_tokens=False)["input_ids"]
            out.append(Sample(answer + [self.processing_class.eos_token_id], END))
        for i in range(0, len(out), 2):  # these rows end early: their checks start during the turn
            if watch is not None:
                watch.finish(i, out[i])
        return Generated(out, 0, 0.0)


def test_a_training_rollout_masks_the_feedback_and_never_shows_a_hidden_test(demo_model_dir: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import AutoTokenizer

    from grpo_code.tasks.prompts import render
    from grpo_code.training import multiturn
    from grpo_code.training.rollouts import PromptIndex
    from grpo_code.verify.verifier import Verifier

    tokenizer = AutoTokenizer.from_pretrained(demo_model_dir)
    tasks = {t["id"]: task_from_dict(t, "t") for t in (_task("a"), _task("b"))}
    rows = ["mt/a", "mt/a", "mt/b", "mt/b"]
    prompts = [render(tasks[t], "chat").for_trl() for t in rows]
    trainer = FakeTrainer(tokenizer)
    index = PromptIndex([{"prompt": p, "task_id": t} for p, t in zip(prompts, rows, strict=True)])
    with Sandbox(SandboxConfig(backend="local", workers=1)) as sandbox:
        submitted = []
        submit = sandbox.submit
        sandbox.submit = lambda job: submitted.append(job) or submit(job)  # type: ignore[method-assign]
        rollout = multiturn.MultiTurnRollout(index, Verifier(tasks, sandbox), turns=3, engine=trainer)
        out = rollout(prompts, trainer)
    assert len(submitted) == 4 + 4  # after turns 1 and 2; a check started early is not run again
    assert out["turns"] == [2, 2, 3, 3]  # a: fixed at turn 2, then its public test passes
    assert [len(t) for t in trainer.turn_prompts] == [4, 4, 2]
    for ids, mask in zip(out["completion_ids"], out["env_mask"], strict=True):
        assert len(ids) == len(mask) and mask[0] == 1 and mask[-1] == 1
        fed = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m == 0])
        own = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m == 1])
        assert "Expected: 11" in fed and "Expected" not in own  # the feedback is masked, the answers are not
        assert "```python" in own
    # What the model was shown at each later turn: its prompt, its answers, the feedback.
    shown = [tokenizer.decode(p) for turn in trainer.turn_prompts[1:] for p in turn]
    assert all("f(9)" in text for text in shown)
    assert not [v for v in HIDDEN for text in shown if str(v) in text.split("```python")[0]]
    assert not [v for v in HIDDEN for c in out["conversation"] for m in c
                if m["role"] == "user" and str(v) in m["content"]]
    # A later turn continues the exact tokens of the earlier ones.
    for i, r in enumerate([0, 1, 2, 3]):
        assert trainer.turn_prompts[1][i][:len(trainer.turn_prompts[0][r])] == trainer.turn_prompts[0][r]
    assert [a[-1]["content"].startswith("```python") for a in out["final_answer"]] == [True] * 4
    metrics = out["rollout_batch"].metrics
    assert metrics["multi_turn/second_turn_frac"] == 1.0 and metrics["multi_turn/turns_mean"] == 2.5
    assert [r.task_id for r in out["rollout"]] == rows and all(r.ended == "end" for r in out["rollout"])


def test_a_chat_template_that_rewrites_the_past_is_a_user_error() -> None:
    from grpo_code.errors import ModelError
    from grpo_code.training.multiturn import MultiTurnRollout, Row
    from grpo_code.verify.turns import Conversation

    class Rewriting:  # a template that drops earlier assistant turns once a user turn follows
        eos_token = None

        def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
            last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
            kept = [m for i, m in enumerate(messages) if m["role"] != "assistant" or i > last_user]
            return "".join(f"<{m['role']}>{m['content']}" for m in kept)

    row = Row(messages=[{"role": "user", "content": "task"}], ids=[1], mask=[1], logprobs=None)
    talk = Conversation(task=None, answers=["answer"], notes=["feedback"])
    with pytest.raises(ModelError, match="train.multi_turn.turns=1") as err:
        MultiTurnRollout._bridge(Rewriting(), row, talk)
    assert err.value.exit_code == 2
