"""The hf backend's decode loop: a transformers causal LM sampled token by token, rows
freed as they end.

``model.generate`` keeps every row of its batch until the last one ends (a stopping
criterion only marks a row finished; it still draws a token at every step). This loop
drops a row from the batch, its KV cache included, the moment it ends: a completion
stopped after its program costs nothing more. Each row samples from its own generator
(:func:`~grpo_code.generation.stream.sample_seed`), so a row's completion does not depend
on which other rows share its batch or when they stop.

Sampling is transformers' with the same settings: logits divided by the temperature, then
top-k, then top-p (at least one token kept), greedy at temperature 0. The behaviour
log-prob of each token is its log-softmax under the temperature-scaled logits, as TRL
computes the policy's own.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Sequence
from typing import Any

import torch

from grpo_code.generation.base import Sampling
from grpo_code.generation.stream import END, LENGTH, STOP, WHOLE, Sample, Watch, sample_seed


def filtered(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Logits (already temperature-scaled) with the tokens top-k and top-p leave out at -inf."""
    if 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        ordered, index = torch.sort(logits, dim=-1)
        drop = ordered.softmax(dim=-1).cumsum(dim=-1) <= 1 - top_p
        drop[..., -1] = False  # the most likely token always stays
        logits = logits.masked_fill(drop.scatter(-1, index, drop), float("-inf"))
    return logits


@torch.no_grad()
def decode(model: Any, prompt_ids: Sequence[Sequence[int]], sampling: Sampling, seed: int,
           end_ids: Collection[int], pad_id: int, watch: Watch | None = None, tokenizer: Any = None,
           logprobs: bool = True) -> list[Sample]:
    """Sample one completion per row of ``prompt_ids`` (row ``r`` seeded
    ``sample_seed(seed, r)``; without ``sampling.row_seeds`` the rows share the generator of
    row 0). ``tokenizer`` is needed only for ``sampling.stop``."""
    rows = len(prompt_ids)
    if not rows:
        return []
    device = next(model.parameters()).device
    width = max(len(p) for p in prompt_ids)
    ids = torch.full((rows, width), pad_id, dtype=torch.long)
    mask = torch.zeros((rows, width), dtype=torch.long)
    for r, p in enumerate(prompt_ids):
        if p:
            ids[r, width - len(p):] = torch.tensor(list(p), dtype=torch.long)
            mask[r, width - len(p):] = 1
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    greedy = sampling.temperature <= 0
    per_row = sampling.row_seeds
    generators = [] if greedy else [torch.Generator(device=device).manual_seed(sample_seed(seed, r))
                                    for r in range(rows if per_row else 1)]
    ends = torch.tensor(sorted(end_ids), dtype=torch.long, device=device)
    out_ids: list[list[int]] = [[] for _ in range(rows)]
    out_lps: list[list[float]] = [[] for _ in range(rows)]
    samples: list[Sample | None] = [None] * rows
    active = list(range(rows))  # batch position -> row
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    # transformers 5.2x renamed the forward's cache argument; a model takes one or the other.
    cache_arg = "cache" if "cache" in inspect.signature(type(model).forward).parameters else "past_key_values"
    training = model.training
    model.eval()
    try:
        step_input, step_positions = ids, positions
        for _ in range(sampling.max_new_tokens):
            logits = model(input_ids=step_input, attention_mask=mask, position_ids=step_positions,
                           use_cache=True, logits_to_keep=1, **{cache_arg: cache}).logits[:, -1, :].float()
            if greedy:
                tokens = logits.argmax(dim=-1)
                scaled = logits
            else:
                scaled = logits / sampling.temperature
                probs = filtered(scaled, sampling.top_k, sampling.top_p).softmax(dim=-1)
                tokens = (torch.cat([torch.multinomial(probs[b], 1, generator=generators[r])
                                     for b, r in enumerate(active)]) if per_row
                          else torch.multinomial(probs, 1, generator=generators[0])[:, 0])
            lps = scaled.log_softmax(dim=-1).gather(1, tokens[:, None])[:, 0].tolist() if logprobs else None
            is_end = torch.isin(tokens, ends).tolist()
            keep: list[int] = []
            for b, (r, token) in enumerate(zip(active, tokens.tolist(), strict=True)):
                out_ids[r].append(token)
                if lps is not None:
                    out_lps[r].append(lps[b])
                ended = _ending(r, token, is_end[b], out_ids[r], sampling, watch, tokenizer)
                if ended is None:
                    keep.append(b)
                    continue
                samples[r] = Sample(out_ids[r], ended, out_lps[r] if logprobs else None)
                if watch is not None:
                    watch.finish(r, samples[r])
            if not keep:
                break
            if len(keep) < len(active):
                index = torch.tensor(keep, device=device)
                cache.batch_select_indices(index)
                mask, tokens = mask[index], tokens[index]
                step_positions = step_positions[index]
                active = [active[b] for b in keep]
            mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
            step_input = tokens[:, None]
            step_positions = step_positions[:, -1:] + 1
    finally:
        model.train(training)
    return [s if s is not None else Sample(out_ids[r], LENGTH, out_lps[r] if logprobs else None)
            for r, s in enumerate(samples)]


def _ending(row: int, token: int, is_end: bool, so_far: list[int], sampling: Sampling, watch: Watch | None,
            tokenizer: Any) -> str | None:
    """Why a row ends after this token, or None while it goes on."""
    if is_end:
        return END
    if sampling.stop and tokenizer is not None:
        tail = tokenizer.decode(so_far[-32:], skip_special_tokens=True)
        if any(s in tail for s in sampling.stop):
            return STOP
    if watch is not None and watch.see(row, token, lambda: list(so_far)):
        return WHOLE
    if len(so_far) >= sampling.max_new_tokens:
        return LENGTH
    return None
