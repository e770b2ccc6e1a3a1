"""Multi-turn rollouts: the model sees what failed and answers again (``train.multi_turn``).

Each row's first answer is generated as in a single-turn rollout. Its program then runs on
the task's public tests (:mod:`grpo_code.tasks.feedback`); when one fails (or the answer
had no code, or, for a task without public tests, the program does not compile), the
failure goes back as a user turn and the row answers again, until its public tests pass or
``turns`` answers are used. Rows that answer again are generated together, turn by turn.

What TRL trains on is one completion per row: every answer, with the feedback turns
between them (the chat template's own tokens: end of the answer, the user turn, the start
of the next answer). ``env_mask`` is 0 on those feedback tokens and 1 on the model's own,
so only the model's tokens carry loss. The reward scores the last answer's program on the
task's hidden tests (``final_answer`` goes to the reward function), less
``turn_cost`` per answer after the first. Hidden tests never reach a prompt: feedback
quotes public tests only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from grpo_code.sandbox.types import Status
from grpo_code.tasks import feedback
from grpo_code.tasks.extract import build_program

ANSWER_MARK = "\u2063grpo-code-answer\u2063"


@dataclass
class Row:
    """One rollout: its task, the token ids so far and whose they are, the answers and notes."""

    task: Any
    messages: list[dict[str, str]]
    ids: list[int]
    mask: list[int]
    logprobs: list[float] | None
    answers: list[str]
    notes: list[str]


class MultiTurnRollout:
    """A TRL ``rollout_func`` for up to ``turns`` answers per row."""

    def __init__(self, tasks: dict[str, Any], sandbox: Any, turns: int, extract: str = "last",
                 template: str = feedback.DEFAULT_TEMPLATE):
        self.tasks = tasks
        self.sandbox = sandbox
        self.turns = turns
        self.extract = extract
        self.template = template
        self.conversations: list[list[dict[str, str]]] = []
        """Per row of the latest batch: the answers and the feedback between them."""
        self._early: dict[int, tuple[str, Any, bool]] = {}

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        tokenizer = trainer.processing_class
        task_ids = list(trainer.batch_task_ids)
        prompt_ids = trainer.tokenize_prompts(prompts)
        rows = [Row(self.tasks[t], [dict(m) for m in p], [], [], None, [], []) for t, p in zip(task_ids, prompts,
                                                                                            strict=True)]
        active = list(range(len(rows)))
        ran, passed_public, seconds = [], [], []
        for turn in range(1, self.turns + 1):
            if turn > 1:
                failures = self._check(rows, active)  # rows whose check failed are left out: they stop
                passed_public.append(sum(1 for r in active if r in failures and failures[r] is None)
                                     / max(1, len(active)))
                active = [r for r in active if failures.get(r) is not None]
                if not active:
                    break
                bridges = {r: self._bridge(tokenizer, rows[r], feedback.feedback(
                    rows[r].task, failures[r], self.template)) for r in active}
                for r in active:
                    rows[r].ids += bridges[r]
                    rows[r].mask += [0] * len(bridges[r])
                    if rows[r].logprobs is not None:
                        rows[r].logprobs += [0.0] * len(bridges[r])
            started = time.perf_counter()
            self._early = {}
            if turn < self.turns:  # a row that ends is checked while the others still generate
                def ended(i: int, ids: list[int], active: list[int] = active) -> None:
                    self._start_check(rows[active[i]], active[i], tokenizer.decode(ids, skip_special_tokens=True))
            else:
                ended = None
            with trainer.rows_of([task_ids[r] for r in active], ended):
                ids, logprobs = trainer.generate_turn([prompt_ids[r] + rows[r].ids for r in active],
                                                      trainer.num_generations if turn == 1 else 1)
            seconds.append(time.perf_counter() - started)
            ran.append(len(active))
            for i, r in enumerate(active):
                new = list(ids[i])
                rows[r].ids += new
                rows[r].mask += [1] * len(new)
                if logprobs is not None:
                    rows[r].logprobs = (rows[r].logprobs or []) + list(logprobs[i])
                rows[r].answers.append(tokenizer.decode(new, skip_special_tokens=True))
        total = len(rows)
        for turn, (count, s) in enumerate(zip(ran, seconds, strict=True), 1):
            trainer.log_metric(f"multi_turn/rows_turn{turn}", count / max(1, total))
            trainer.log_metric(f"timing/turn{turn}_s", s)
        for turn, share in enumerate(passed_public, 1):
            trainer.log_metric(f"multi_turn/public_pass_turn{turn}", share)
        trainer.log_metric("multi_turn/second_turn_frac", (ran[1] if len(ran) > 1 else 0) / max(1, total))
        trainer.log_metric("multi_turn/turns_mean", sum(len(r.answers) for r in rows) / max(1, total))
        self.conversations = [feedback.turns(row.answers, row.notes) for row in rows]
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": [row.ids for row in rows],
            "logprobs": [row.logprobs for row in rows] if rows and rows[0].logprobs is not None else None,
            "env_mask": [row.mask for row in rows],
            "final_answer": [[{"role": "assistant", "content": row.answers[-1]}] for row in rows],
            "turns": [len(row.answers) for row in rows],
        }

    def _start_check(self, row: Row, index: int, answer: str) -> None:
        """Run an answer's program: on the public tests, or (a task without) on the hidden
        ones, of which only whether it compiles is told. Remembered by answer text."""
        program = build_program(row.task, answer, "chat", self.extract).program
        job = None if program is None else (feedback.public_job(row.task, program) or row.task.job(program))
        future = None if job is None else self.sandbox.submit(job)
        self._early[index] = (answer, future, bool(row.task.public_tests))

    def _check(self, rows: list[Row], active: list[int]) -> dict[int, str | None]:
        """Per active row, what to tell it (``None``: nothing to fix). A row whose check hit a
        sandbox error gets no further turn (left out of the result). Checks started while
        the turn generated (the row ended early) are reused when the answer is the same."""
        for r in active:
            if self._early.get(r, (None,))[0] != rows[r].answers[-1]:
                self._start_check(rows[r], r, rows[r].answers[-1])
        out: dict[int, str | None] = {}
        for r in active:
            _, future, public = self._early[r]
            if future is None:
                out[r] = feedback.no_code(rows[r].task)
                continue
            result = future.result()
            if result.status is Status.INFRA_ERROR:
                continue
            if public:
                out[r] = feedback.failure_text(rows[r].task, result)
            else:
                out[r] = feedback.failure_text(rows[r].task, None, feedback.hidden_compile_error(result))
        return out

    @staticmethod
    def _bridge(tokenizer: Any, row: Row, note: str) -> list[int]:
        """The tokens between a row's last answer and its next: what the chat template puts
        after an assistant turn, the user's feedback turn, and the start of the next answer.
        The answer's own end token, if the model wrote it, is not repeated."""
        history = [*row.messages, *feedback.turns(row.answers[:-1], row.notes)]
        # The template's text around an answer, found with a marker in its place (the sampled
        # answer itself may be empty, or repeat text the template holds).
        last = {"role": "assistant", "content": ANSWER_MARK}
        before = tokenizer.apply_chat_template([*history, last], tokenize=False)
        after = tokenizer.apply_chat_template([*history, last, {"role": "user", "content": note}],
                                              tokenize=False, add_generation_prompt=True)
        if not after.startswith(before) or ANSWER_MARK not in before:
            raise ValueError("train.multi_turn needs a chat template that renders a conversation as the "
                             "earlier one plus the new turns")
        tail = before[before.rindex(ANSWER_MARK) + len(ANSWER_MARK):] + after[len(before):]
        eos = tokenizer.eos_token
        if eos and row.ids and row.ids[-1] == tokenizer.eos_token_id and tail.startswith(eos):
            tail = tail[len(eos):]
        row.notes.append(note)
        return tokenizer(tail, add_special_tokens=False)["input_ids"]

