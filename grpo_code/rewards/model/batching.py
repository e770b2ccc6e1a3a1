"""Batching for reward-model scoring: length buckets and padding.

Texts are tokenized once without padding. :func:`plan_batches` groups them by length
(bucketing: sort by length, cut into batches) so a batch is padded to the length of its
own longest text instead of the longest of a random mix; with ``bucketing=False`` the
batches keep input order (naive padding). :func:`pad` builds the numpy inputs of one
batch. Scores are always returned in input order by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def plan_batches(lengths: Sequence[int], batch_size: int, bucketing: bool = True) -> list[list[int]]:
    """Index lists, one per batch. Bucketed: longest first (the first batch shows the peak memory)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i]) if bucketing else list(range(len(lengths)))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def pad(encodings: Sequence[dict[str, list[int]]], names: Sequence[str], pad_id: int) -> dict[str, np.ndarray]:
    """Right-pad the tokenized texts of one batch to its longest; ``names`` are the model inputs."""
    width = max(len(e["input_ids"]) for e in encodings)
    out = {}
    for name in names:
        fill = pad_id if name == "input_ids" else 0
        arr = np.full((len(encodings), width), fill, dtype=np.int64)
        for row, enc in enumerate(encodings):
            values = enc.get(name)
            if values is None and name == "attention_mask":
                values = [1] * len(enc["input_ids"])
            if values is None:
                continue
            arr[row, : len(values)] = values
        out[name] = arr
    return out


def padded_tokens(lengths: Sequence[int], batches: Sequence[Sequence[int]]) -> int:
    """Tokens the model processes for a plan, padding included (for reports)."""
    return sum(max(lengths[i] for i in b) * len(b) for b in batches)
