"""Blending the test reward with a learned reward model's scores.

GRPO compares completions of the same prompt, so the model's scores are normalised per
group (the completions of one prompt, found by task id): with ``normalize: group`` they
are min-max scaled within the group and centred, so the model moves a reward by at most
``weight / 2`` whatever its raw scale. Modes (``rewards.model.blend``):

- ``sum``: ``test + weight * model``.
- ``gate``: the model only breaks ties. Among completions of a group with the same test
  reward it adds a bonus smaller than half the gap to the nearest other test reward of
  the group, so no model score can reorder completions with different test scores.

A masked test reward (``None``) stays masked; a missing model score (a failed remote
request) leaves the test reward unchanged.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

TIE_TOL = 1e-9


def groups_of(keys: Sequence[Hashable]) -> list[list[int]]:
    """Indices grouped by key, in order of first appearance."""
    out: dict[Hashable, list[int]] = {}
    for i, key in enumerate(keys):
        out.setdefault(key, []).append(i)
    return list(out.values())


def _centred_minmax(values: dict[int, float]) -> dict[int, float]:
    if not values:
        return {}
    lo, hi = min(values.values()), max(values.values())
    if hi - lo <= 0:
        return {i: 0.0 for i in values}
    return {i: (v - lo) / (hi - lo) - 0.5 for i, v in values.items()}


def normalize_groups(scores: Sequence[float | None], groups: Sequence[Sequence[int]]) -> list[float | None]:
    """Min-max scale each group's scores to [-0.5, 0.5] (``None`` stays ``None``)."""
    out: list[float | None] = [None] * len(scores)
    for group in groups:
        present = {i: scores[i] for i in group if scores[i] is not None}
        for i, v in _centred_minmax(present).items():  # type: ignore[arg-type]
            out[i] = v
    return out


def blend(
    tests: Sequence[float | None],
    model: Sequence[float | None],
    keys: Sequence[Hashable],
    weight: float,
    mode: str = "sum",
    normalize: str = "group",
) -> list[float | None]:
    """Combine test rewards and model scores; ``keys`` (task ids) define the groups."""
    if not (len(tests) == len(model) == len(keys)):
        raise ValueError("tests, model and keys must have the same length")
    groups = groups_of(keys)
    if mode == "gate":
        return _gate(tests, model, groups, weight)
    usable = [m if t is not None else None for t, m in zip(tests, model)]  # masked rows don't set the scale
    scaled = normalize_groups(usable, groups) if normalize == "group" else usable
    return [None if t is None else t + (weight * m if m is not None else 0.0) for t, m in zip(tests, scaled)]


def _gate(tests: Sequence[float | None], model: Sequence[float | None], groups: list[list[int]],
          weight: float) -> list[float | None]:
    out: list[float | None] = list(tests)
    for group in groups:
        scored = [i for i in group if tests[i] is not None]
        levels = sorted({round(tests[i], 9) for i in scored})  # type: ignore[arg-type]
        gaps = [b - a for a, b in zip(levels, levels[1:])]
        # A bonus in [-span/2, span/2] with span <= gap/2 cannot cross to the next test level.
        span = min([weight, *(g / 2 for g in gaps)])
        for level in levels:
            tied = {i: model[i] for i in scored if abs(tests[i] - level) <= TIE_TOL and model[i] is not None}
            for i, v in _centred_minmax(tied).items():  # type: ignore[arg-type]
                out[i] = tests[i] + span * v  # type: ignore[operator]
    return out
