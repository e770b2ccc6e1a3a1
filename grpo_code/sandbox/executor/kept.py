"""What a job keeps of what its tests printed: bounded before it is decoded, copied or sent.

Every test's ``stdout``, ``stderr`` and ``message`` go into the result through
:meth:`Kept.output` / :meth:`Kept.message`. Each is cut at the per-test cap
(``max_output_bytes``, counted in the bytes the program wrote) and charged to one budget
per job (``max_job_output_bytes``), counted in the bytes it takes in the result line the
executor sends (JSON with non-ASCII characters written as UTF-8: an invalid byte turned into
U+FFFD costs 3, a control character its 6-byte escape). The first text that does not fit
is cut to what is left, and from then on the job's tests keep only a marker (a message its
first :data:`MESSAGE_FLOOR` bytes, the part that says what failed). So the result line,
and the executor's memory to build it, is at most the budget plus a few hundred bytes per
test, whatever the program prints.

This only cuts what is kept: every verdict was decided before, on the output as captured
(an ``io`` test's up to its own compare cap), so printing a lot never changes one.
A ``record`` job's answers (a reference's whole stdout) are the job's product, not kept
output: they are not cut here (``RECORD_OUTPUT_LIMIT`` bounds them per test).
"""

from __future__ import annotations

import json

DEFAULT_JOB_BYTES = 1024 * 1024
"""``max_job_output_bytes`` when a wire job does not say (the config's default too)."""
MESSAGE_CAP = 8192
"""Characters kept of one message (the harness cuts tracebacks and compiler output shorter)."""
MESSAGE_FLOOR = 160
"""Bytes of a message kept even once the job's budget is spent: what failed, in short."""
SPENT = "[... output not kept: the job's output budget is spent]"


def encoded_size(text: str) -> int:
    """Bytes ``text`` takes in the executor's result line (:func:`encode_line`), quotes excluded."""
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "backslashreplace")) - 2


def encode_line(msg: dict) -> bytes:
    """One JSON line of the channel. Non-ASCII text is written as UTF-8 (an escape would
    make U+FFFD 6 bytes); a lone surrogate, which UTF-8 cannot carry (a program's string can
    hold one), becomes its JSON escape ``\\udXXX``: ``backslashreplace`` writes exactly that,
    and only inside strings, the one place JSON lets it be."""
    return (json.dumps(msg, ensure_ascii=False) + "\n").encode("utf-8", "backslashreplace")


def _prefix(text: str, room: int) -> str:
    """The longest start of ``text`` whose :func:`encoded_size` is at most ``room``
    (bisection: a character takes 1 to 6 bytes, not known without encoding it)."""
    low, high = 0, min(len(text), room)
    while low < high:
        mid = (low + high + 1) // 2
        if encoded_size(text[:mid]) <= room:
            low = mid
        else:
            high = mid - 1
    return text[:low]


class Kept:
    """The output budget of one job: what is left of it, and the cutting."""

    def __init__(self, budget: int = DEFAULT_JOB_BYTES):
        self.left = max(0, int(budget))

    def output(self, data: bytes, cap: int) -> str:
        """A test's captured stream as text: its first ``cap`` bytes, then as much as the
        job's budget allows, with a marker where it was cut."""
        if not data:
            return ""
        text = data[:cap].decode("utf-8", "replace")
        note = f"\n[... output truncated at {cap} bytes]" if len(data) > cap else ""
        return self._charge(text, note, 0)

    def message(self, text: str, cap: int) -> str:
        """A test's message, cut at ``cap`` characters and to the budget, but never below its
        first :data:`MESSAGE_FLOOR` bytes: a failure always says what it was."""
        if not text:
            return ""
        note = f"\n[... message truncated at {cap} characters]" if len(text) > cap else ""
        return self._charge(text[:cap], note, MESSAGE_FLOOR)

    def _charge(self, text: str, note: str, floor: int) -> str:
        size = encoded_size(text)
        if size <= self.left:
            self.left -= size
            return text + note
        if size <= floor:
            return text + note  # a short message, kept whole past the budget
        head = _prefix(text, max(self.left, floor))
        self.left = 0  # spent: the tests after this one keep markers only
        return head + ("\n" if head else "") + SPENT


JOB = Kept()
"""The running job's budget: :func:`start` resets it for each job (one job at a time)."""


def start(limits: dict) -> None:
    """A new job: the whole budget its limits give."""
    global JOB
    JOB = Kept(int(limits.get("max_job_output_bytes", DEFAULT_JOB_BYTES)))
