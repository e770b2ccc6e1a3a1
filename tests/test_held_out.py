"""Held-out eval during training (``train.eval_every``): which versions are due, how the
held-out rows ride in a training rollout's generation call and are judged on their own
verifier, and the line each version writes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from grpo_code import metric_names as M
from grpo_code.config import load_config
from grpo_code.errors import ConfigError
from grpo_code.generation.stream import END, LENGTH, Sample
from grpo_code.training.engines import Generated
from grpo_code.training.held_out import HeldOut
from grpo_code.training.rollouts import PromptIndex, Rollouts


class Tokens:
    """Token ids are characters' codes."""

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return "".join(map(chr, ids))

    def apply_chat_template(self, messages: Any, **kwargs: Any) -> str:
        return messages[-1]["content"]

    def __call__(self, text: str, add_special_tokens: bool = True) -> dict[str, list[int]]:
        return {"input_ids": [ord(c) for c in text]}


class Judged(SimpleNamespace):
    pass


class FakeVerifier:
    """Judges an answer ``pass`` when it says so; ``infra`` is the sandbox failing."""

    def __init__(self, task_ids: list[str]):
        self.tasks = {t: SimpleNamespace(id=t) for t in task_ids}
        self.submitted: list[tuple[str, str, bool]] = []

    def task(self, task_id: str) -> Any:
        return self.tasks[task_id]

    def whole(self, task: Any, text: str, style: str) -> bool:
        return text.endswith("!")

    def submit(self, task: Any, text: str, style: str, truncated: bool = False) -> Any:
        self.submitted.append((task.id, text, truncated))
        return SimpleNamespace(task_id=task.id, text=text, cut=truncated)

    def judge(self, handles: list[Any]) -> list[Judged]:
        return [Judged(task_id=h.task_id, masked="infra" in h.text, passed="pass" in h.text and not h.cut)
                for h in handles]


def held_out(every: int = 2, n: int = 2) -> tuple[HeldOut, list[Any]]:
    written: list[Any] = []
    held = HeldOut(every, ["h/a", "h/b"], [[104, 97], [104, 98]], n, FakeVerifier(["h/a", "h/b"]), "chat", 7,
                   Tokens(), written.append)
    return held, written


def test_a_version_is_due_once_at_each_multiple_and_never_before_the_first_update() -> None:
    held, _ = held_out(every=2)
    assert [v for v in range(7) if held.due(v)] == [2, 4, 6]
    rows = held.rows(4)
    assert rows.prompt_ids == [[104, 97], [104, 97], [104, 98], [104, 98]]
    assert rows.task_ids == ["h/a", "h/a", "h/b", "h/b"]
    assert not held.due(4) and held.due(2)
    assert held.row_seed(4) != held.row_seed(2) != held.row_seed(6)


def test_a_point_is_pass_at_1_over_tasks_with_masked_samples_left_out() -> None:
    held, written = held_out()
    rows = held.rows(2)
    answers = ["pass", "fail", "infra", "pass"]  # a: 1 of 2, b: the sandbox failed one, passed the other
    rows.done([Sample([ord(c) for c in a], END) for a in answers], 1.5)
    [point] = held.wait()
    assert (point.version, point.pass_at_1, point.tasks, point.samples, point.masked) == (2, 0.75, 2, 3, 1)
    assert written == [point]
    row = point.row()
    assert row["step"] == row[M.EVAL_VERSION] == 2 and row[M.EVAL_PASS1] == 0.75


class FakeEngine:
    """An engine that answers each row from a script, ending rows as a streaming engine does."""

    importance_sampled = False

    def __init__(self, answers: dict[int, str]):
        self.answers = answers
        self.calls: list[list[list[int]]] = []

    def generate(self, trainer: Any, prompt_ids: list[list[int]], seed: int, watch: Any) -> Generated:
        self.calls.append(prompt_ids)
        out = []
        for row, _ in enumerate(prompt_ids):
            ids = [ord(c) for c in self.answers.get(row, "fail")]
            ended = LENGTH if self.answers.get(row, "").startswith("cut") else END
            sample = Sample(ids, ended)
            watch.finish(row, sample)
            out.append(sample)
        return Generated(out, int(trainer.state.global_step), 0.25)

    def take_metrics(self) -> dict[str, float]:
        return {}


def test_held_out_rows_ride_in_the_training_call_of_a_due_version_and_are_judged_apart() -> None:
    """At version 2 the call holds the 2 training rows and the 4 held-out rows after them;
    the training records are the first two only; the held-out rows go to the held-out
    verifier as they end (a row cut at the limit is unfinished), never to the training
    scoring, and their point is written with the version. At version 3 nothing rides."""
    held, written = held_out(every=2)
    prompts = [[{"role": "user", "content": "t"}]] * 2
    index = PromptIndex([{"prompt": prompts[0], "task_id": "train/t"}])
    train_verifier = FakeVerifier(["train/t"])
    engine = FakeEngine({2: "pass", 3: "cut pass", 4: "pass", 5: "fail"})
    early = SimpleNamespace(submitted=[], discard=lambda: (0, 0))
    early.submit = lambda task_id, text, cut: early.submitted.append(task_id) or SimpleNamespace()
    rollouts = Rollouts(index, train_verifier, "chat", engine, early, held_out=held)
    trainer = SimpleNamespace(processing_class=Tokens(), state=SimpleNamespace(global_step=2),
                              args=SimpleNamespace(seed=0), accelerator=SimpleNamespace(process_index=0))
    out = rollouts(prompts, trainer)
    assert [len(c) for c in engine.calls] == [6]
    assert len(out["rollout"]) == 2 and early.submitted == ["train/t", "train/t"]
    assert [s[0] for s in held.verifier.submitted] == ["h/a", "h/a", "h/b", "h/b"]
    assert [s[2] for s in held.verifier.submitted] == [False, True, False, False]
    [point] = held.wait()
    assert (point.version, point.pass_at_1) == (2, 0.5) and written == [point]  # a: 1 of 2, b: 1 of 2
    trainer.state.global_step = 3
    rollouts(prompts, trainer)
    assert [len(c) for c in engine.calls] == [6, 2]


def test_eval_every_refuses_what_it_cannot_measure() -> None:
    with pytest.raises(ConfigError, match="tasks.eval_split"):
        load_config(None, ["train.eval_every=2", "tasks.eval_split=train"])
    with pytest.raises(ConfigError, match="multi_turn"):
        load_config(None, ["train.eval_every=2", "train.multi_turn.turns=2"])
    assert load_config(None, ["train.eval_every=4"]).train.eval_every == 4
