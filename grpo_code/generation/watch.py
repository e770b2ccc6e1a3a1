"""Following each row of a transformers ``generate`` call as its tokens arrive.

Eval (``--stop-after-code``) and training (``train.stop_after_code``, ``rewards.overlap``)
both need the same thing from a batched ``generate``: look at each new token of each row
and, at the few tokens after which a program can become whole (a backtick closes a code
block, a newline ends a top-level line), ask whether it is; end a row whose program is
whole; hand a row that ended to the sandbox at once. :class:`RowWatcher` is that one
stopping criterion; the callers pass what to do.

Every row still draws its token at every step (a stopping criterion only marks rows
finished), so the other rows sample exactly what they would have, and a stopped
completion is a prefix of the one it would have become.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import StoppingCriteria

RowIds = Callable[[int, list[int]], None]
"""Called with a row's index and its completion's token ids so far."""


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


@dataclass(eq=False)
class RowWatcher(StoppingCriteria):
    """A stopping criterion that follows every row of one ``generate`` call.

    After each new token of a row that is still going:

    - an end token (``eos``): the row has ended; ``on_end(row, ids)``;
    - a backtick or newline token, with ``is_whole``: when ``is_whole(row, ids)`` holds the
      row is stopped there (``stopped[row]`` is its length) and handed to ``on_end``;
    - a backtick token of a row not stopped: ``on_fence(row, ids)`` (a code block may just
      have closed: its program can start early).

    ``prompt_length`` (the width of the padded prompts) must be set before generation;
    :attr:`ended` holds the rows that ended or were stopped. A call whose batch is not
    ``rows`` wide (another ``generate`` inside the same block) is ignored.
    """

    kinds: TokenKinds
    rows: int
    eos: frozenset[int] = frozenset()
    is_whole: Callable[[int, list[int]], bool] | None = None
    on_end: RowIds | None = None
    on_fence: RowIds | None = None
    prompt_length: int = 0
    ended: set[int] = field(default_factory=set)
    stopped: dict[int, int] = field(default_factory=dict)

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        stop = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        if input_ids.shape[0] != self.rows or input_ids.shape[1] <= self.prompt_length:
            return stop
        for row, token in enumerate(input_ids[:, -1].tolist()):
            if row in self.ended:
                stop[row] = row in self.stopped
                continue
            stop[row] = self.see(row, token, lambda r=row: input_ids[r, self.prompt_length:].tolist())
        return stop

    def see(self, row: int, token: int, ids: Callable[[], list[int]]) -> bool:
        """One new ``token`` of a row still going (``ids()``: its completion so far, the token
        included, asked for only when needed); True when the row is to stop here."""
        if token in self.eos:
            self.finish(row, ids())
            return False
        fence, newline = self.kinds(token)
        check = self.is_whole is not None and (fence or newline)
        if not check and not (fence and self.on_fence is not None):
            return False
        so_far = ids()
        # A program becomes whole when its block closes (a fence), or a continuation when
        # a top-level line follows it (seen at the latest with that line's newline).
        if check and self.is_whole(row, so_far):
            self.stopped[row] = len(so_far)
            self.finish(row, so_far)
            return True
        if fence and self.on_fence is not None:
            self.on_fence(row, so_far)
        return False

    def finish(self, row: int, ids: list[int]) -> None:
        """A row ended (an end token, stopped here, or ended by the generator itself)."""
        if row in self.ended:
            return
        self.ended.add(row)
        if self.on_end is not None:
            self.on_end(row, ids)


def program_stop(tokenizer: Any, prompt_length: int, per_prompt: int, rows: int,
                 done: Callable[[int, str], bool], kinds: TokenKinds) -> RowWatcher:
    """The eval side: stop row ``r`` once ``done(r // per_prompt, text so far)`` holds."""

    def is_whole(row: int, ids: list[int]) -> bool:
        return done(row // per_prompt, tokenizer.decode(ids, skip_special_tokens=True))

    return RowWatcher(kinds, rows, is_whole=is_whole, prompt_length=prompt_length)
