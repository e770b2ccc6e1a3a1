"""The multi-turn rollout, one loop for training (``train.multi_turn``) and eval (``--turns``).

Each conversation's first answer is generated as in a single-turn rollout. Then, turn by
turn, the latest answer of each conversation still going is checked
(:func:`check`: its program on the task's public
tests, or, for a task without any, whether it compiles); when something is to fix (or the
answer had no code), the failure goes back as a user turn
(:func:`note`) and the conversation answers again,
until its check passes or ``turns`` answers are used. Conversations that answer again are
generated together.

What differs between training and eval is only how a turn is generated, which the caller
passes as ``generate(turn, rows) -> answers``: training extends token ids through TRL's
generation (the feedback tokens masked out of the loss, :mod:`grpo_code.training.multiturn`),
eval samples chat prompts from a generator and scores each turn's answers on the hidden
tests (:mod:`grpo_code.evaluate.turns`). A caller that sees a row end while the others
still generate starts its check at once (:meth:`TurnLoop.start_check`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grpo_code.generation.base import was_cut
from grpo_code.verify import feedback
from grpo_code.verify.runs import Source
from grpo_code.verify.verifier import Handle, Verifier


class CheckFailed(Exception):
    """A multi-turn check hit a sandbox infrastructure error (the row's turn cannot be decided)."""


@dataclass
class Check:
    """A multi-turn check of one answer: its program on the public tests, or, for a task
    without public tests, on the hidden ones (of which only a compile error is told)."""

    task: Any
    answer: str
    handle: Handle
    public: bool
    truncated: bool = False


def check(verifier: Verifier, task: Any, answer: str, truncated: bool = False) -> Check:
    """Start the check of a multi-turn answer (chat style): its program on the public
    tests, or, for a task without any, on the task's tests. An unfinished answer (cut at
    the length limit inside its program) is not run: it is told so."""
    public = bool(task.public_tests)
    handle = verifier.submit_extraction(task, verifier.program(task, answer, "chat"), truncated, public=public)
    return Check(task, answer, handle, public, truncated)


def note(verifier: Verifier, done: Check, template: str = feedback.DEFAULT_TEMPLATE) -> str | None:
    """The user turn for an answer that did not pass its check; ``None`` when there is
    nothing to fix. Raises :class:`CheckFailed` when the sandbox failed the check."""
    verdict = verifier.judged(done.handle)
    if verdict.source is Source.NO_CODE:
        return feedback.feedback(done.task, None, template)
    if verdict.source is Source.UNFINISHED:
        return feedback.feedback(done.task, feedback.unfinished(done.task), template)
    if verdict.masked:
        raise CheckFailed(verdict.error or "sandbox infrastructure error")
    if done.public:
        failure = feedback.failure_text(done.task, verdict.result)
    else:
        failure = feedback.failure_text(done.task, None, verdict.compile_error)
    return None if failure is None else feedback.feedback(done.task, failure, template)


@dataclass
class Conversation:
    """One rollout: its task, the answers so far and the feedback after each but the last."""

    task: Any
    answers: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def turns(self) -> list[dict[str, str]]:
        """The chat after the task's prompt: each answer, then the feedback on it."""
        return feedback.turns(self.answers, self.notes)


@dataclass
class TurnStats:
    rows: list[int] = field(default_factory=list)
    """Conversations generated per turn."""
    passed_check: list[float] = field(default_factory=list)
    """Per turn after the first: the share of the conversations checked whose check passed."""


Generate = Callable[[int, list[int]], list[str]]
"""``generate(turn, rows)``: one answer for each of ``rows`` (indices of conversations); an
answer cut at the length limit is a :class:`~grpo_code.generation.base.Completion` that says so."""


class TurnLoop:
    """Up to ``turns`` answers per conversation, with execution feedback between them.

    ``on_check_error(message)``: called when the sandbox fails a check; when it returns,
    that conversation stops (training), and it may raise instead (eval)."""

    def __init__(self, verifier: Verifier, turns: int, template: str = feedback.DEFAULT_TEMPLATE,
                 on_check_error: Callable[[str], None] = lambda message: None):
        self.verifier = verifier
        self.turns = turns
        self.template = template
        self.on_check_error = on_check_error
        self._checks: dict[int, Check] = {}

    def start_check(self, conversations: list[Conversation], row: int, answer: str) -> None:
        """Check ``answer`` (the row's newest) now; reused if it is the answer the row keeps.
        An answer that knows it was cut at the length limit (``Completion.cut``) is checked
        as the truncation rule says."""
        self._checks[row] = check(self.verifier, conversations[row].task, answer, was_cut(answer))

    def run(self, conversations: list[Conversation], generate: Generate) -> TurnStats:
        stats = TurnStats()
        active = list(range(len(conversations)))
        for turn in range(1, self.turns + 1):
            if turn > 1:
                notes = self._notes(conversations, active)
                stats.passed_check.append(sum(1 for r in active if r in notes and notes[r] is None)
                                          / max(1, len(active)))
                active = [r for r in active if notes.get(r) is not None]
                if not active:
                    break
                for r in active:
                    conversations[r].notes.append(notes[r])  # type: ignore[arg-type]
            self._checks = {}  # checks of this turn's answers (started early while it generates)
            answers = generate(turn, active)
            if len(answers) != len(active):
                raise RuntimeError(f"turn {turn}: {len(answers)} answers for {len(active)} conversations")
            for r, answer in zip(active, answers):
                conversations[r].answers.append(answer)
            stats.rows.append(len(active))
        return stats

    def _notes(self, conversations: list[Conversation], active: list[int]) -> dict[int, str | None]:
        """What to tell each active row (``None``: its check passed). A row whose check the
        sandbox failed is left out (it stops), after ``on_check_error``."""
        for r in active:
            started = self._checks.get(r)
            latest = conversations[r].answers[-1]
            if started is None or started.answer != latest or started.truncated != was_cut(latest):
                self.start_check(conversations, r, conversations[r].answers[-1])
        out: dict[int, str | None] = {}
        for r in active:
            try:
                out[r] = note(self.verifier, self._checks[r], self.template)
            except CheckFailed as exc:
                self.on_check_error(str(exc))
        return out
