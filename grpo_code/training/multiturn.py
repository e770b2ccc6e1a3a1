"""Multi-turn rollouts: the model sees what failed and answers again (``train.multi_turn``).

The turns are eval's turns (:class:`~grpo_code.verify.turns.TurnLoop`: the same checks,
the same feedback); this module generates them on the run's engine as single-turn rollouts do
(:mod:`.engines`, TRL's public ``rollout_func``). A row
that ends while the others still generate has its check started at once.

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

from grpo_code import metric_names as M
from grpo_code.errors import ConfigError, ModelError
from grpo_code.generation import base
from grpo_code.generation.base import Completion
from grpo_code.generation.stream import LENGTH, Sample, TokenKinds, Watch, sample_seed
from grpo_code.training.rollouts import (
    CallSeeds,
    PromptIndex,
    Rollout,
    RolloutBatch,
    trl_prompt,
    trl_result,
)
from grpo_code.verify import feedback
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

    def __init__(self, index: PromptIndex, verifier: Verifier, turns: int, engine: Any,
                 template: str = feedback.DEFAULT_TEMPLATE):
        if index.shared:
            raise ConfigError([f"train.multi_turn: {len(index.shared)} prompt(s) of the training split are shared "
                               "by several tasks, so a rollout cannot tell which task's feedback to give; "
                               "remove the duplicates or set train.multi_turn.turns=1"])
        self.index = index
        self.verifier = verifier
        self.turns = turns
        self.engine = engine
        self.loop = TurnLoop(verifier, turns, template)  # a row whose check the sandbox failed stops
        self.seeds = CallSeeds()
        self._kinds: TokenKinds | None = None

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        tokenizer = trainer.processing_class
        task_ids = [self.index.task_id(p) for p in prompts]
        prompt_ids = [base.prompt_ids(tokenizer, trl_prompt(p)) for p in prompts]
        rows = [Row([dict(m) for m in p], [], [], None) for p in prompts]
        talks = [Conversation(self.verifier.task(t)) for t in task_ids]
        endings: list[str] = [LENGTH] * len(rows)
        seconds: list[float] = []
        if self._kinds is None:
            self._kinds = TokenKinds(tokenizer)
        seed = self.seeds(trainer)

        def generate(turn: int, active: list[int]) -> list[str]:
            if turn > 1:
                for r in active:
                    bridge = self._bridge(tokenizer, rows[r], talks[r])
                    rows[r].ids += bridge
                    rows[r].mask += [0] * len(bridge)
                    if rows[r].logprobs is not None:
                        rows[r].logprobs += [0.0] * len(bridge)
            watch = None
            if turn < self.turns:  # a row that ends is checked while the others still generate
                def ended(i: int, sample: Sample) -> None:
                    answer = Completion(tokenizer.decode(sample.ids, skip_special_tokens=True), sample.cut)
                    self.loop.start_check(talks, active[i], answer)

                watch = Watch(self._kinds, on_end=ended)
            generated = self.engine.generate(trainer, [prompt_ids[r] + rows[r].ids for r in active],
                                             sample_seed(seed, turn), watch)
            samples = generated.samples
            seconds.append(generated.generate_s)
            answers = []
            for r, sample in zip(active, samples, strict=True):
                rows[r].ids += sample.ids
                rows[r].mask += [1] * len(sample.ids)
                if sample.logprobs is not None:
                    rows[r].logprobs = (rows[r].logprobs or []) + list(sample.logprobs)
                endings[r] = sample.ended
                # The backend says whether the answer was cut at the length limit: its check knows.
                answers.append(Completion(tokenizer.decode(sample.ids, skip_special_tokens=True), sample.cut))
            return answers

        started = time.perf_counter()
        stats = self.loop.run(talks, generate)
        total = len(rows)
        metrics = {}
        for turn, (count, s) in enumerate(zip(stats.rows, seconds, strict=True), 1):
            metrics[M.rows_turn(turn)] = count / max(1, total)
            metrics[M.turn_s(turn)] = s
        for turn, share in enumerate(stats.passed_check, 1):
            metrics[M.public_pass_turn(turn)] = share
        metrics[M.SECOND_TURN_FRAC] = (stats.rows[1] if len(stats.rows) > 1 else 0) / max(1, total)
        metrics[M.TURNS_MEAN] = sum(len(t.answers) for t in talks) / max(1, total)
        version = int(trainer.state.global_step)
        records = [Rollout(t, p, row.ids, talk.answers[-1], ended, row.logprobs, version,
                           time.perf_counter() - started)
                   for t, p, row, talk, ended in zip(task_ids, prompt_ids, rows, talks, endings, strict=True)]
        batch = RolloutBatch(sum(seconds), total, 0, 0, metrics={**metrics, **self.engine.take_metrics()})
        return trl_result(prompt_ids, records, batch, self.engine.importance_sampled,
                          env_mask=[row.mask for row in rows],
                          final_answer=[[{"role": "assistant", "content": t.answers[-1]}] for t in talks],
                          turns=[len(t.answers) for t in talks], conversation=[t.turns() for t in talks])

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
            raise ModelError("train.multi_turn needs a chat template that renders a conversation as the "
                             "earlier one plus the new turns; this model's does not",
                             "train with train.multi_turn.turns=1, or use a model whose template only appends turns")
        tail = before[before.rindex(ANSWER_MARK) + len(ANSWER_MARK):] + after[len(before):]
        eos = tokenizer.eos_token
        if eos and row.ids and row.ids[-1] == tokenizer.eos_token_id and tail.startswith(eos):
            tail = tail[len(eos):]
        return tokenizer(tail, add_special_tokens=False)["input_ids"]
