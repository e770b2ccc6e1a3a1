"""The one streaming interface of the generation backends, and its two rules.

Eval and training generate through the same call, :meth:`stream` of a backend (the ``hf``
decode loop, the ``vllm`` engine loop):

    stream(prompt_ids, sampling, seeds, watch) -> list[Sample]

one row per entry of ``prompt_ids`` (a prompt sampled ``n`` times is given ``n`` times).
While the call runs, ``watch`` (:class:`Watch`) hears of every row as it ends
(``on_end``), can stop a row whose program is whole (``is_whole``), and can start the
program of a row whose code block just closed (``on_fence``). A stopped row frees its
place: the hf loop drops it from the batch, the vLLM engine ends its request.

**Why a completion ended** is decided once, by the backend that sampled it
(:class:`Sample.ended`): ``end`` (it sampled an end token), ``length`` (it reached
``max_new_tokens`` without one), ``whole`` (stopped after its program), ``stop`` (a stop
string). A completion is **cut at the length limit** exactly when it ended ``length``.

**Seeding**: row ``r`` of a call seeded ``s`` samples from its own generator, seeded
:func:`sample_seed` ``(s, r)``; what a row samples does not depend on the other rows of
its call or on when they stop (the hf loop; the vLLM CPU build where prompts are
prefilled whole).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

END, LENGTH, WHOLE, STOP = "end", "length", "whole", "stop"
ENDINGS = (END, LENGTH, WHOLE, STOP)


@dataclass
class Sample:
    """One sampled completion: its token ids (an end token included when it sampled one),
    why it ended, and the behaviour policy's log-prob of each token (``None`` where the
    backend gives none)."""

    ids: list[int]
    ended: str
    logprobs: list[float] | None = None

    @property
    def cut(self) -> bool:
        """Cut at the length limit: it reached ``max_new_tokens`` without an end token."""
        return self.ended == LENGTH


def derive_seed(seed: int, *parts: int) -> int:
    """The one seeding rule: the seed of ``parts`` (a row, a chunk, a step ...) below ``seed``.
    Every seed grpo-code derives (rows of a call, eval's chunks, a server's prompts, training's
    generation calls, multi-turn turns) is this function of the run's seed, so no two rules
    can collide or drift apart."""
    for part in parts:
        seed = (seed * 1_000_003 + part) % (1 << 62)
    return seed


def sample_seed(seed: int, row: int) -> int:
    """The seed of row ``row`` of a call seeded ``seed``."""
    return derive_seed(seed, row)


class TokenKinds:
    """Whether a token's text holds a backtick, and whether it holds a newline: the only
    tokens after which a program can become whole (a fence closed, a line ended)."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self._known: dict[int, tuple[bool, bool]] = {}

    def __call__(self, token_id: int) -> tuple[bool, bool]:
        known = self._known.get(token_id)
        if known is None:
            text = self.tokenizer.decode([token_id])
            known = self._known[token_id] = ("`" in text, "\n" in text)
        return known


RowIds = Callable[[int, list[int]], None]
"""Called with a row's index and its completion's token ids so far."""


@dataclass(eq=False)
class Watch:
    """What a caller hears while a call generates.

    After each new token of a row still going (not an end token):

    - a backtick or newline token, with ``is_whole``: when ``is_whole(row, ids)`` holds the
      row stops there (``ended`` ``whole``);
    - a backtick token of a row not stopped: ``on_fence(row, ids)`` (a code block may just
      have closed: its program can start early).

    When a row ends, for whatever reason: ``on_end(row, sample)``.
    """

    kinds: TokenKinds
    is_whole: Callable[[int, list[int]], bool] | None = None
    on_end: Callable[[int, Sample], None] | None = None
    on_fence: RowIds | None = None
    ended: set[int] = field(default_factory=set)

    def see(self, row: int, token: int, ids: Callable[[], list[int]]) -> bool:
        """One new ``token`` of a row still going that is not an end token (``ids()``: its
        completion so far, the token included, asked for only when needed); True when the
        row is to stop here, its program whole."""
        fence, newline = self.kinds(token)
        check = self.is_whole is not None and (fence or newline)
        if not check and not (fence and self.on_fence is not None):
            return False
        so_far = ids()
        # A program becomes whole when its block closes (a fence), or a continuation when
        # a top-level line follows it (seen at the latest with that line's newline).
        if check and self.is_whole(row, so_far):
            return True
        if fence and self.on_fence is not None:
            self.on_fence(row, so_far)
        return False

    def finish(self, row: int, sample: Sample) -> None:
        """A row ended."""
        if row in self.ended:
            return
        self.ended.add(row)
        if self.on_end is not None:
            self.on_end(row, sample)


def text_watch(tokenizer: Any, kinds: TokenKinds, done: Callable[[int, str], bool], per_prompt: int) -> Watch:
    """Eval's watch: row ``r`` stops once ``done(r // per_prompt, text so far)`` holds."""

    def is_whole(row: int, ids: list[int]) -> bool:
        return done(row // per_prompt, tokenizer.decode(ids, skip_special_tokens=True))

    return Watch(kinds, is_whole=is_whole)
