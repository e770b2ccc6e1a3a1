"""A generative judge blended into the reward: :mod:`.prompts` (templates, unforgeable quoting),
:mod:`.parse` (strict verdict lines, vote aggregation), :mod:`.client` (requests, content cache,
in-flight sharing) and :mod:`.scoring` (what is judged, when it starts, the blend). See
docs/rewards.md, "A generative judge"."""

from grpo_code.rewards.judge.client import Judge, Outcome, auc, votes_at
from grpo_code.rewards.judge.scoring import JudgeScoring, build_judge

__all__ = ["Judge", "JudgeScoring", "Outcome", "auc", "build_judge", "votes_at"]
