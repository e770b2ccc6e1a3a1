"""The training forward pass without most of its padding.

TRL scores a batch as one tensor: prompts padded on the left to the longest prompt,
completions on the right to the longest completion. A batch of 24 rows in which one
completion ran to the length limit while the others stopped after 30 tokens computes
(and backpropagates) every row at the full width. :func:`length_chunks` sorts the rows by
their real length and groups them so that the padded tokens plus a fixed cost per extra
forward call are least; each group is then cut to its own widest row.

The cut is exact for rotary position models (Llama, Qwen, Mistral and the like): cutting
leading pad columns shifts every position of a row alike, which rotary attention does not
see, and cut trailing columns are masked anyway.
"""

from __future__ import annotations

from collections.abc import Sequence

# What one more forward call costs, in tokens of work: a group is split off only when it
# saves more padding than this.
CHUNK_OVERHEAD_TOKENS = 256


def length_chunks(prompt_lengths: Sequence[int], completion_lengths: Sequence[int], max_rows: int | None = None,
                  overhead: int = CHUNK_OVERHEAD_TOKENS) -> list[list[int]]:
    """Groups of row indices whose padded cost (rows x (longest prompt + longest completion)),
    plus ``overhead`` per group, is least among splits of the rows sorted by length."""
    n = len(prompt_lengths)
    if n == 0:
        return []
    order = sorted(range(n), key=lambda i: (prompt_lengths[i] + completion_lengths[i], prompt_lengths[i], i))
    limit = max_rows if max_rows and max_rows > 0 else n
    inf = float("inf")
    best = [0.0] + [inf] * n  # best[j]: least cost of the first j sorted rows
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        widest_prompt = widest_completion = 0
        for i in range(j - 1, max(j - limit, 0) - 1, -1):  # group = sorted rows i..j-1
            widest_prompt = max(widest_prompt, prompt_lengths[order[i]])
            widest_completion = max(widest_completion, completion_lengths[order[i]])
            cost = best[i] + (j - i) * (widest_prompt + widest_completion) + overhead
            if cost < best[j]:
                best[j], cut[j] = cost, i
    groups = []
    j = n
    while j > 0:
        groups.append(order[cut[j]:j])
        j = cut[j]
    return groups[::-1]
