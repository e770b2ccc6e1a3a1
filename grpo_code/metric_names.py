"""The names of the per-step metrics in ``metrics.jsonl`` (and TensorBoard, W&B), defined
once: the trainer and the reward functions log them, ``train``'s summary and the report
read them. TRL's own names (``reward``, ``completions/*``) are here too, as TRL spells them.
"""

from __future__ import annotations

# TRL's
REWARD = "reward"
"""Mean reward of the step's completions."""
MEAN_LENGTH = "completions/mean_length"
MIN_LENGTH = "completions/min_length"
MAX_LENGTH = "completions/max_length"
CLIPPED_RATIO = "completions/clipped_ratio"
"""Share of completions that ended without an end token (cut at the limit, or stopped after their code)."""

# Rewards (grpo_code.rewards.metrics)
PASS_RATE = "tests/pass_rate"
"""Completions that passed every test, among those scored."""
NO_CODE = "tests/no_code"
UNFINISHED = "tests/unfinished"
MASKED = "tests/masked"
UNATTESTED = "tests/unattested"
"""Share of executed tests judged inside the program's process (``attested: false``): their
passes count as fails unless ``rewards.tests.trust_unattested`` (docs/rewards.md)."""


EXECUTED = "sandbox/executed"
LATENCY_P50_MS = "sandbox/latency_p50_ms"
LATENCY_P95_MS = "sandbox/latency_p95_ms"
CACHE_HIT_RATE = "sandbox/cache_hit_rate"

# The trainer's (grpo_code.training)
STEP_S = "timing/step_s"
RSS_GIB = "memory/rss_gib"
"""Resident memory of the training process when the step was logged (GiB)."""
PEAK_RSS_GIB = "memory/peak_rss_gib"
"""The most resident memory the training process has held so far (GiB, the kernel's VmHWM)."""
GENERATE_S = "timing/generate_s"
REWARD_WAIT_S = "timing/reward_wait_s"
"""Time the step was blocked on rewards after generation."""
SANDBOX_BUSY_S = "timing/sandbox_busy_s"
"""Summed run time of the step's sandbox jobs."""
WEIGHT_SYNC_S = "timing/weight_sync_s"
"""Copying the trained weights into the CPU build of vLLM (colocated)."""
EARLY_JOBS = "sandbox/early_jobs"
SPECULATIVE_JOBS = "sandbox/speculative_jobs"
SPECULATIVE_WASTED = "sandbox/speculative_wasted"
STOPPED_AFTER_CODE = "completions/stopped_after_code"
# Rollouts ahead of the update (train.max_staleness, grpo_code.training.ahead)
STALENESS = "async/staleness"
"""Updates between the policy that sampled the step's batch and the one it trains."""
QUEUE_DEPTH = "async/queue_depth"
"""Batches the worker had finished, this one included, when the step asked for its batch."""
TRAINER_IDLE_S = "async/trainer_idle_s"
"""Time the step waited for its batch from the rollout worker."""
ENGINE_IDLE_S = "async/engine_idle_s"
"""Time the worker's engine waited (for a request or for new enough weights) before the batch."""
WEIGHT_PUSH_S = "async/weight_push_s"
"""Writing the updated weights for the worker (the trainer's side)."""
WEIGHT_LOAD_S = "async/weight_load_s"
"""Loading them into the worker's engine (the worker's side; the last load before the step's batch)."""
PROBE_GAP = "async/probe_logp_gap"
"""Largest difference between the engine's and the trainer's log-probs of the probe text
under the same weights version (the engine follows the pushed weights when it is ~0)."""
IS_CLIPPED = "async/is_clipped_share"
"""Share of completion tokens (sequences, in the sequence modes) whose importance ratio fell
outside TRL's ``vllm_importance_sampling_clip_min``/``_max`` (truncated or masked)."""
FILTER_SKIPPED_FRAC = "filter/skipped_frac"
FILTER_GENERATIONS_SAVED = "filter/generations_saved"

# The generative judge's (grpo_code.rewards.judge)
JUDGE_ITEMS = "judge/items"
"""Judgments the step asked for (an answer, or a group's answers ranked together)."""
JUDGE_CALLS = "judge/calls"
"""Requests sent to the judge server for them (stored judgments send none)."""
JUDGE_CACHE_HITS = "judge/cache_hits"
JUDGE_TOKENS = "judge/tokens"
"""Tokens the judge generated for the step."""
JUDGE_LATENCY_P50_S = "judge/latency_p50_s"
JUDGE_LATENCY_P99_S = "judge/latency_p99_s"
JUDGE_BUSY_S = "timing/judge_busy_s"
"""Wall time during which at least one of the step's judgments was in flight (request to parsed verdict)."""
JUDGE_WAIT_S = "timing/judge_wait_s"
"""Time the step waited on the judge after its test verdicts were in."""
JUDGE_VOTES = "judge/votes"
JUDGE_SCORE_MEAN = "judge/score_mean"
JUDGE_AUC = "judge/auc"
"""Chance that a passing answer gets a higher judge score than a failing one (batches with both)."""


def judge_masked(reason: str) -> str:
    """Judgments masked for this reason in the step (``timeout``, ``unparseable``, ``error``)."""
    return f"judge/masked_{reason}"


def verdict_share(verdict: str) -> str:
    """Share of the step's executed tests with this verdict (``tests/fail``, ``tests/timeout``...)."""
    return f"tests/{verdict}"


# Learned reward model (grpo_code.rewards.functions)
MODEL_SCORE_MEAN = "model/score_mean"
MODEL_FAILED = "model/failed"
"""Share of the step's completions the reward model could not score."""

# Multi-turn rollouts (grpo_code.training.multiturn)
SECOND_TURN_FRAC = "multi_turn/second_turn_frac"
"""Share of rollouts that got a second answer (their first failed a public test)."""
TURNS_MEAN = "multi_turn/turns_mean"


def rows_turn(turn: int) -> str:
    """Share of rollouts that reached answer ``turn``."""
    return f"multi_turn/rows_turn{turn}"


def turn_s(turn: int) -> str:
    """Time spent generating answer ``turn`` of the step's rollouts."""
    return f"timing/turn{turn}_s"


def public_pass_turn(turn: int) -> str:
    """Share of answer ``turn``'s rollouts that passed their public tests."""
    return f"multi_turn/public_pass_turn{turn}"

# Held-out eval during training (train.eval_every, grpo_code.training.held_out): a line of its own per version
EVAL_PASS1 = "eval/pass@1"
"""pass@1 on the held-out split with the weights of ``EVAL_VERSION``."""
EVAL_VERSION = "eval/policy_version"
"""The policy version (updates made) the held-out rows were sampled with."""
EVAL_TASKS = "eval/tasks"
EVAL_SAMPLES = "eval/samples"
EVAL_MASKED = "eval/masked"
"""Held-out samples the sandbox could not judge (left out of pass@1)."""
EVAL_GENERATE_S = "eval/generate_s"
