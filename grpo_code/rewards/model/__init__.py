"""Learned reward models: batching (:mod:`.batching`), local backends (:mod:`.backends`:
PyTorch, ONNX Runtime fp32/int8), the HTTP client (:mod:`.remote`) and the scorer that
picks among them (:mod:`.reward_model`). See docs/rewards.md."""

from grpo_code.rewards.model.remote import RemoteScorer, parse_scores
from grpo_code.rewards.model.reward_model import RewardModel, load_reward_model, message_text, text_for

__all__ = ["RemoteScorer", "RewardModel", "load_reward_model", "message_text", "parse_scores", "text_for"]
