"""What training keeps of each scored rollout: ``completions.jsonl`` and the prompt filter's history.

The reward function tells :class:`RolloutLog` of every batch it scored (its own process's
rows). With several processes (``accelerate launch``) the rows of every process are
gathered first, in process order, so the filter records whole groups and every process
keeps the same history (its sampler then draws the same prompts, as one process would);
the main process writes the completions of all of them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grpo_code import metric_names as M
from grpo_code.training.filter import PromptFilter


class RolloutLog:
    def __init__(self, path: Path | None, prompt_filter: PromptFilter | None, num_generations: int):
        self.path = path
        self.prompt_filter = prompt_filter
        self.num_generations = num_generations

    def scored(self, kwargs: dict[str, Any], completions: Sequence[Any], scored: Sequence[Any],
               rewards: Sequence[float | None]) -> dict[str, float]:
        """One batch of this process's rows scored; returns the filter's metrics."""
        if self.path is None and self.prompt_filter is None:
            return {}
        conversations = kwargs.get("conversation") or [None] * len(scored)
        # The policy version each completion was sampled with (rollouts ahead of the update: it
        # may be older than the step that trains on it).
        versions = [getattr(r, "version", None) for r in kwargs.get("rollout") or [None] * len(scored)]
        local = [{**completion_record(task_id, c, s, talk), "reward": reward,
                  **({"version": version} if version is not None else {})} if self.path is not None
                 else {"task_id": task_id, "reward": reward}
                 for task_id, c, s, talk, reward, version in zip(kwargs["task_id"], completions, scored,
                                                                 conversations, rewards, versions, strict=True)]
        from accelerate import PartialState

        state = PartialState()
        if state.num_processes > 1:
            from accelerate.utils import gather_object

            rows = gather_object(local)
        else:
            rows = local
        metrics: dict[str, float] = {}
        if self.prompt_filter is not None:
            for start in range(0, len(rows), self.num_generations):
                group = rows[start:start + self.num_generations]
                self.prompt_filter.record(group[0]["task_id"], [r["reward"] for r in group])
            taken, skipped = self.prompt_filter.take_counts()
            if taken + skipped:
                metrics[M.FILTER_SKIPPED_FRAC] = skipped / (taken + skipped)
                metrics[M.FILTER_GENERATIONS_SAVED] = float(skipped * self.num_generations)
        if self.path is not None and state.is_main_process:
            step = getattr(kwargs.get("trainer_state"), "global_step", 0)
            with self.path.open("a") as fh:
                for row in rows:
                    fh.write(json.dumps({"step": step, **row}, ensure_ascii=False) + "\n")
        return metrics


def completion_record(task_id: str, completion: Any, s: Any,
                      conversation: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """One line of ``completions.jsonl`` (without step and reward): what was written (a
    multi-turn rollout: its last answer, and the whole ``conversation``), the program that
    ran, its status (``pass``, ``fail``, ``no_code``, ``unfinished``, ``infra_error`` with
    ``masked_because``) and its verdicts."""
    text = completion if isinstance(completion, str) else completion[-1]["content"]
    result, program = s.result, s.program
    extra = {} if conversation is None else {"conversation": conversation, "turns": (len(conversation) + 1) // 2}
    if s.verdict.masked:  # a masked reward keeps its reason: what the sandbox said
        extra["masked_because"] = s.verdict.error
    return {
        "task_id": task_id,
        "completion": text if conversation is None else conversation[-1]["content"],
        **extra,
        "program": program,
        "status": s.verdict.status,
        "verdicts": [t.verdict.value for t in result.tests] if result else [],
    }
