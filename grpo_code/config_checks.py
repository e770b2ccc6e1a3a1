"""The cross-checks of a run config's training settings: pairs of keys that exclude each
other, each said with what to set instead (``grpo_code.config`` reports them with the rest)."""

from __future__ import annotations

from typing import Any


def training_checks(cfg: Any) -> list[str]:
    """The problems of ``train.*`` against ``generation.*`` and ``tasks.*``; empty when none."""
    problems: list[str] = []
    if cfg.train.stop_after_code and cfg.train.trl.get("mask_truncated_completions") is True:
        # A completion stopped after its code has no end token, so TRL would mask it as cut.
        problems.append("train.stop_after_code and train.trl.mask_truncated_completions exclude each other: "
                        "completions stopped after their code would all be masked; set one of them false")
    if cfg.train.stop_after_code and cfg.generation.backend == "vllm" and cfg.generation.vllm_mode != "colocate":
        problems.append("train.stop_after_code needs the generation in the training process (hf, or vllm "
                        "colocated): a vLLM server generates whole completions; set train.stop_after_code=false")
    if cfg.train.max_staleness > 0:
        if cfg.generation.backend != "vllm":
            problems.append(f"train.max_staleness: {cfg.train.max_staleness} needs generation.backend: vllm (the "
                            f"rollout worker is a vLLM engine), not {cfg.generation.backend}; set one or the other")
        elif cfg.generation.vllm_mode != "colocate":
            problems.append("train.max_staleness > 0 starts its own vLLM engine in a worker process: set "
                            "generation.vllm_mode: colocate (no vLLM server) or train.max_staleness: 0")
        if cfg.train.multi_turn.turns > 1:
            problems.append("train.max_staleness > 0 generates single-turn rollouts only: set "
                            "train.multi_turn.turns: 1 or train.max_staleness: 0")
    if cfg.train.eval_every > 0:
        if cfg.tasks.eval_split == cfg.tasks.train_split:
            problems.append(f"train.eval_every: the held-out split (tasks.eval_split: {cfg.tasks.eval_split}) is the "
                            "training split; set tasks.eval_split to tasks the run does not train on")
        if cfg.train.multi_turn.turns > 1:
            problems.append("train.eval_every measures single-turn pass@1: set train.multi_turn.turns: 1, or "
                            "train.eval_every: 0 and run grpo-code eval --turns on checkpoints")
    return problems
