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


def tie_levels(values: Sequence[float | None], indices: Sequence[int]) -> list[tuple[float, list[int]]]:
    """The distinct values (to 9 digits) among ``indices``, lowest first, each with the
    indices whose value ties with it."""
    levels = sorted({round(values[i], 9) for i in indices})  # type: ignore[arg-type]
    return [(level, [i for i in indices if abs(values[i] - level) <= TIE_TOL]) for level in levels]  # type: ignore[operator]


def blend(
    tests: Sequence[float | None],
    model: Sequence[float | None],
    keys: Sequence[Hashable],
    weight: float,
    mode: str = "sum",
    normalize: str = "group",
    base: Sequence[float | None] | None = None,
) -> list[float | None]:
    """Combine test rewards and model scores; ``keys`` (task ids) define the groups. The
    scores move ``base`` (default: the test rewards; a reward already blended with another
    scorer), while ties and masking are read from ``tests``."""
    if not (len(tests) == len(model) == len(keys)):
        raise ValueError("tests, model and keys must have the same length")
    base = tests if base is None else base
    groups = groups_of(keys)
    if mode == "gate":
        return _gate(tests, model, groups, weight, base)
    usable = [m if t is not None else None for t, m in zip(tests, model)]  # masked rows don't set the scale
    scaled = normalize_groups(usable, groups) if normalize == "group" else usable
    return [None if t is None or b is None else b + (weight * m if m is not None else 0.0)
            for t, b, m in zip(tests, base, scaled)]


def _gate(tests: Sequence[float | None], model: Sequence[float | None], groups: list[list[int]],
          weight: float, base: Sequence[float | None]) -> list[float | None]:
    out: list[float | None] = list(base)
    for group in groups:
        levels = tie_levels(tests, [i for i in group if tests[i] is not None and base[i] is not None])
        gaps = [b - a for (a, _), (b, _) in zip(levels, levels[1:])]
        # A bonus in [-span/2, span/2] with span <= gap/2 cannot cross to the next test level.
        span = min([weight, *(g / 2 for g in gaps)])
        for _, members in levels:
            tied = {i: model[i] for i in members if model[i] is not None}
            for i, v in _centred_minmax(tied).items():  # type: ignore[arg-type]
                out[i] = base[i] + span * v  # type: ignore[operator]
    return out
