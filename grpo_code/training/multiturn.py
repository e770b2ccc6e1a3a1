"""Multi-turn rollouts: the model sees what failed and answers again (``train.multi_turn``).

The turns are eval's turns (:class:`~grpo_code.verify.turns.TurnLoop`: the same checks,
the same feedback); this module generates them through TRL. A row that ends while the
others still generate has its check started at once.

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

from grpo_code.generation.base import Completion
from grpo_code.verify import feedback
from grpo_code.verify.early import cut_at_limit
from grpo_code.verify.turns import Conversation, TurnLoop
from grpo_code.verify.verifier import Verifier

ANSWER_MARK = "\u2063grpo-code-answer\u2063"


@dataclass
class Row:
    """One rollout's tokens: the prompt's messages, the token ids so far and whose they are."""

    messages: list[dict[str, str]]
    ids: list[int]
    mask: list[int]
    logprobs: list[float] | None


class MultiTurnRollout:
    """A TRL ``rollout_func`` for up to ``turns`` answers per row."""

    def __init__(self, verifier: Verifier, turns: int, template: str = feedback.DEFAULT_TEMPLATE):
        self.verifier = verifier
        self.turns = turns
        self.loop = TurnLoop(verifier, turns, template)  # a row whose check the sandbox failed stops

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        tokenizer = trainer.processing_class
        task_ids = list(trainer.batch_task_ids)
        prompt_ids = trainer.tokenize_prompts(prompts)
        rows = [Row([dict(m) for m in p], [], [], None) for p in prompts]
        talks = [Conversation(self.verifier.task(t)) for t in task_ids]
        ends = frozenset(trainer.end_token_ids)
        seconds: list[float] = []

        def generate(turn: int, active: list[int]) -> list[str]:
            if turn > 1:
                for r in active:
                    bridge = self._bridge(tokenizer, rows[r], talks[r])
                    rows[r].ids += bridge
                    rows[r].mask += [0] * len(bridge)
                    if rows[r].logprobs is not None:
                        rows[r].logprobs += [0.0] * len(bridge)
            ended = None
            if turn < self.turns:  # a row that ends is checked while the others still generate
                def ended(i: int, ids: list[int]) -> None:
                    self.loop.start_check(talks, active[i], tokenizer.decode(ids, skip_special_tokens=True))
            started = time.perf_counter()
            with trainer.rows_of([task_ids[r] for r in active], ended):
                ids, logprobs = trainer.generate_turn([prompt_ids[r] + rows[r].ids for r in active],
                                                      trainer.num_generations if turn == 1 else 1)
            seconds.append(time.perf_counter() - started)
            answers = []
            for i, r in enumerate(active):
                new = list(ids[i])
                rows[r].ids += new
                rows[r].mask += [1] * len(new)
                if logprobs is not None:
                    rows[r].logprobs = (rows[r].logprobs or []) + list(logprobs[i])
                # An answer without an end token was cut at the length limit: its check knows.
                answers.append(Completion(tokenizer.decode(new, skip_special_tokens=True), cut_at_limit(new, ends)))
            return answers

        stats = self.loop.run(talks, generate)
        total = len(rows)
        for turn, (count, s) in enumerate(zip(stats.rows, seconds, strict=True), 1):
            trainer.log_metric(f"multi_turn/rows_turn{turn}", count / max(1, total))
            trainer.log_metric(f"timing/turn{turn}_s", s)
        for turn, share in enumerate(stats.passed_check, 1):
            trainer.log_metric(f"multi_turn/public_pass_turn{turn}", share)
        trainer.log_metric("multi_turn/second_turn_frac",
                           (stats.rows[1] if len(stats.rows) > 1 else 0) / max(1, total))
        trainer.log_metric("multi_turn/turns_mean", sum(len(t.answers) for t in talks) / max(1, total))
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": [row.ids for row in rows],
            "logprobs": [row.logprobs for row in rows] if rows and rows[0].logprobs is not None else None,
            "env_mask": [row.mask for row in rows],
            "final_answer": [[{"role": "assistant", "content": t.answers[-1]}] for t in talks],
            "turns": [len(t.answers) for t in talks],
            "conversation": [t.turns() for t in talks],
        }

    @staticmethod
    def _bridge(tokenizer: Any, row: Row, talk: Conversation) -> list[int]:
        """The tokens between a row's last answer and its next: what the chat template puts
        after an assistant turn, the user's feedback turn (``talk``'s newest note), and the
        start of the next answer. The answer's own end token, if the model wrote it, is not
        repeated."""
        note = talk.notes[-1]
        history = [*row.messages, *feedback.turns(talk.answers[:-1], talk.notes[:-1])]
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
        return tokenizer(tail, add_special_tokens=False)["input_ids"]
