"""Reading a judge's output strictly, and turning several judgments into one score.

Only the last non-empty line of an output is read, and only when it is the verdict line of
the template with the prompt's tag (:mod:`.prompts`); anything else is :class:`Unparseable`,
which masks the judgment (never a silent 0). Scores are in [0, 1]:

- ``pointwise``: ``VERDICT TAG: N`` with N a whole number 0..10 gives N / 10;
- ``group_rank``: ``RANKING TAG: B > A = C`` (every label once) gives each answer
  (answers ranked below it + half of those tied with it) / (answers - 1), so the best is 1
  and the worst 0 (ties share);
- ``anchor_rank``: ``BETTER TAG: A|B|TIE`` gives the answer 1 for a win over the anchor,
  0.5 for a tie, 0 for a loss.

``aggregate`` folds the votes of one item: ``mean``, or ``majority`` (the most frequent
score; a tie between scores takes their median).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Sequence

from grpo_code.rewards.judge.prompts import JudgePrompt


class Unparseable(ValueError):
    """The output holds no verdict line of the expected form (``str()``: what was wrong)."""


def _last_line(output: str | None) -> str:
    lines = [line.strip() for line in (output or "").splitlines() if line.strip()]
    if not lines:
        raise Unparseable("empty output")
    return lines[-1].strip("*`_ ")  # markdown emphasis around the line is the judge's, not content


def _payload(output: str | None, keyword: str, tag: str) -> str:
    line = _last_line(output)
    match = re.fullmatch(rf"{keyword}\s+{tag}\s*:\s*(.+)", line, re.IGNORECASE)
    if match is None:
        raise Unparseable(f"the last line is not a {keyword} line with the prompt's tag: {line[:80]!r}")
    return match.group(1).strip().strip("*`_ .")


def pointwise(output: str | None, prompt: JudgePrompt) -> float:
    value = _payload(output, "VERDICT", prompt.tag)
    match = re.fullmatch(r"(\d{1,2})(?:\s*/\s*10)?", value)
    if match is None or int(match.group(1)) > 10:
        raise Unparseable(f"the verdict is not a whole number from 0 to 10: {value[:40]!r}")
    return int(match.group(1)) / 10


def ranking(output: str | None, prompt: JudgePrompt) -> list[float]:
    """One score per label, in label order."""
    value = _payload(output, "RANKING", prompt.tag)
    tiers = [[x.strip().upper() for x in tier.split("=")] for tier in value.split(">")]
    named = [x for tier in tiers for x in tier]
    if sorted(named) != sorted(prompt.labels):
        raise Unparseable(f"the ranking does not name every label exactly once: {value[:80]!r}")
    n = len(named)
    score: dict[str, float] = {}
    below = n
    for tier in tiers:
        below -= len(tier)
        for label in tier:
            score[label] = (below + (len(tier) - 1) / 2) / (n - 1)
    return [score[label] for label in prompt.labels]


def comparison(output: str | None, prompt: JudgePrompt) -> float:
    """The answer's result against the anchor: 1 win, 0.5 tie, 0 loss."""
    value = _payload(output, "BETTER", prompt.tag).upper()
    if value == "TIE":
        return 0.5
    if value not in ("A", "B"):
        raise Unparseable(f"the comparison names neither A, B nor TIE: {value[:40]!r}")
    return 0.0 if value == prompt.anchor_label else 1.0


def aggregate(votes: Sequence[float], how: str = "mean") -> float:
    if not votes:
        raise ValueError("no votes to aggregate")
    if how == "mean":
        return sum(votes) / len(votes)
    if how != "majority":
        raise ValueError(f"unknown aggregation {how!r}")
    counts = Counter(votes)
    top = max(counts.values())
    return statistics.median(sorted(v for v, c in counts.items() if c == top))
