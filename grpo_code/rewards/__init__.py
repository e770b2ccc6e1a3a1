"""Rewards: verdicts (and optionally a learned reward model) -> per-completion rewards.

Stages: :mod:`.verifiable` (a result -> a number, masking), :mod:`.metrics`, :mod:`.model`
(learned reward model: torch / ONNX Runtime / remote, length bucketing), :mod:`.blend`
(sum and gate with per-group normalisation) and :mod:`.functions` (TRL reward functions).
Verdicts come from :mod:`grpo_code.verify` (the one verifier, its content-addressed
store). See docs/rewards.md.
"""

from grpo_code.rewards.blend import blend
from grpo_code.rewards.functions import CodeReward, Scored, build_reward_funcs, reward_of, reward_verifier
from grpo_code.rewards.verifiable import check_masked, score_result, weights_for

__all__ = [
    "CodeReward",
    "Scored",
    "blend",
    "build_reward_funcs",
    "check_masked",
    "reward_of",
    "reward_verifier",
    "score_result",
    "weights_for",
]
