"""The training forward pass without most of its padding.

TRL scores a batch as one tensor: prompts padded on the left to the longest prompt,
completions on the right to the longest completion. A batch of 24 rows in which one
completion ran to the length limit while the others stopped after 30 tokens computes
(and backpropagates) every row at the full width. :func:`length_chunks` sorts the rows by
their real length and groups them so that the padded tokens plus a fixed cost per extra
forward call are least; each group is then cut to its own widest row.

:func:`teaching_rows` drops the rows that teach nothing: with no KL term, a row whose
advantage is zero (its group's rewards all equal) adds zero to the loss and to the
gradient, yet costs its forward and backward pass like any other.

The cut is exact for rotary position models (Llama, Qwen, Mistral and the like) and
ALiBi ones: cutting leading pad columns shifts every position of a row alike, which
relative attention does not see, and cut trailing columns are masked anyway. A model with
learned absolute positions (GPT-2 and the like) would see its rows at other positions, so
:func:`exact_for` turns the cut off for any model it cannot tell is relative.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# What one more forward call costs, in tokens of work: a group is split off only when it
# saves more padding than this.
CHUNK_OVERHEAD_TOKENS = 256


def length_chunks(prompt_lengths: Sequence[int], completion_lengths: Sequence[int], max_rows: int | None = None,
                  overhead: int = CHUNK_OVERHEAD_TOKENS, max_tokens: int | None = None) -> list[list[int]]:
    """Groups of row indices whose padded cost (rows x (longest prompt + longest completion)),
    plus ``overhead`` per group, is least among splits of the rows sorted by length; with
    ``max_tokens`` no group of several rows pads to more tokens than that."""
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
            if max_tokens and i < j - 1 and (j - i) * (widest_prompt + widest_completion) > max_tokens:
                break  # wider groups only grow
            cost = best[i] + (j - i) * (widest_prompt + widest_completion) + overhead
            if cost < best[j]:
                best[j], cut[j] = cost, i
    groups = []
    j = n
    while j > 0:
        groups.append(order[cut[j]:j])
        j = cut[j]
    return groups[::-1]


CPU_TOKENS_PER_CALL = 512
"""The most tokens one call of the update's forward pass takes on a CPU (a longer row goes
alone). There TRL scores every position of a call, prompt included, in tiles of 32,768
vocabulary columns in fp32, and its backward holds several copies of a tile at once (318
MiB each for the demo's 8 rows of 318 tokens, 64 MiB at this bound). Measured on the vLLM
demo, 6 steps, 2 cores: peak RSS 5.67 GiB with one call, 5.45 at 1024 tokens, 4.93 at 512,
4.85 at 256; median step 24.6, 25.7, 23.2 and 27.1 s."""


ROW_KEYS = frozenset({"prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages",
                      "old_per_token_logps", "importance_sampling_ratio", "sampling_per_token_logps",
                      "ref_per_token_logps", "tool_mask"})
"""The entries of TRL's training batch with one row per completion (text-only models)."""

LOSS_SHARE = {"dapo": None, "cispo": None, "grpo": "rows", "dr_grpo": "rows", "bnpo": "tokens"}
"""How each TRL loss type's normalizer depends on the rows it is given: ``None``, not at all
(the generation batch's token count); ``rows``, a mean over rows; ``tokens``, over the
micro-batch's completion tokens. Others (sapo, luspo, vespo) keep every row."""


def teaching_rows(inputs: dict[str, Any], loss_type: str) -> tuple[dict[str, Any], float] | None:
    """The micro-batch ``inputs`` without its rows of zero advantage, and the factor that
    makes the loss of the rest equal the loss of the whole (so the gradient is the same);
    ``None`` when every row teaches or the batch or loss type is not one this knows.

    Only for a loss with no term a zero-advantage row still feeds (the caller checks: no KL
    term, no entropy bonus, no entropy quantile mask, no auxiliary loss). When no row
    teaches, one stays: its loss is zero, and the step keeps its graph."""
    if loss_type not in LOSS_SHARE or not set(inputs) <= ROW_KEYS | {"num_items_in_batch"}:
        return None
    advantages = inputs["advantages"]
    rows = advantages.size(0)
    teaches = (advantages.reshape(rows, -1) != 0).any(dim=1)
    if bool(teaches.all()):
        return None
    keep = teaches.nonzero().flatten()
    if keep.numel() == 0:
        keep = keep.new_zeros(1)
    kept = {key: value[keep] if key in ROW_KEYS else value for key, value in inputs.items()}
    share = LOSS_SHARE[loss_type]
    if share == "rows":
        return kept, keep.numel() / rows
    if share == "tokens":
        def tokens(batch: dict[str, Any]) -> float:
            mask = batch["completion_mask"] * batch["tool_mask"] if "tool_mask" in batch else batch["completion_mask"]
            return max(float(mask.sum()), 1.0)

        return kept, tokens(kept) / tokens(inputs)
    return kept, 1.0


ALIBI_MODELS = ("bloom", "mpt")
ROTARY_KEYS = ("rope_theta", "rope_parameters", "rope_scaling", "rotary_dim", "rotary_pct", "rotary_emb_base")


def relative_positions(config: Any) -> bool:
    """Whether a model config says its attention sees relative positions only (rotary or
    ALiBi), so that shifting a row's positions by the cut padding changes nothing."""
    kind = str(getattr(config, "position_embedding_type", "") or "")
    if kind in ("absolute", "learned"):
        return False
    if kind in ("rotary", "rope", "alibi") or getattr(config, "alibi", False):
        return True
    if getattr(config, "model_type", "") in ALIBI_MODELS:
        return True
    return any(getattr(config, key, None) is not None for key in ROTARY_KEYS)


def exact_for(model: Any) -> bool:
    """Whether cutting padding is exact for ``model`` (a transformers model, PEFT-wrapped or not)."""
    config = getattr(model, "config", None)
    return config is not None and relative_positions(config)


def trim_padding_for(model: Any, wanted: bool, log: Any = print) -> bool:
    """``train.trim_padding`` as it can be honoured for ``model``: on only when asked for and
    exact; asked for but not exact turns it off with a warning."""
    if wanted and not exact_for(model):
        kind = getattr(getattr(model, "config", None), "model_type", None) or type(model).__name__
        log(f"warning: train.trim_padding is off for this model ({kind}): its positions are not known to be "
            "relative, and cutting padding would change its log-probs; set train.trim_padding=false to silence this")
        return False
    return wanted
