"""Rewards: sandbox results (and optionally a learned reward model) -> per-completion rewards.

Stages: :mod:`.verifiable` (a result -> a number, masking), :mod:`.cache`
(content-addressed results, memory LRU + sqlite), :mod:`.scorer` (``RewardScorer``: early
submission, in-flight sharing), :mod:`.metrics`, :mod:`.model` (learned reward model:
torch / ONNX Runtime / remote, length bucketing), :mod:`.blend` (sum and gate with
per-group normalisation) and :mod:`.functions` (TRL reward functions). See docs/rewards.md.
"""

from grpo_code.rewards.blend import blend
from grpo_code.rewards.cache import RewardCache, cache_key
from grpo_code.rewards.functions import CodeReward, build_reward_funcs
from grpo_code.rewards.scorer import Handle, RewardScorer, Scored, completion_text
from grpo_code.rewards.verifiable import check_masked, score_result, weights_for

__all__ = [
    "CodeReward",
    "Handle",
    "RewardCache",
    "RewardScorer",
    "Scored",
    "blend",
    "build_reward_funcs",
    "cache_key",
    "check_masked",
    "completion_text",
    "score_result",
    "weights_for",
]
