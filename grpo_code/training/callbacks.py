"""Trainer callbacks: ``metrics.jsonl`` (every logged metric per step) and a progress bar
with step, reward, pass rate and step time."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback


class MetricsLog(TrainerCallback):
    """Appends each log event of the trainer as one JSON line, and remembers the rewards."""

    def __init__(self, path: Path):
        self.path = path
        self.rewards: list[tuple[int, float]] = []
        self.pass_rates: list[tuple[int, float]] = []

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not logs or not state.is_world_process_zero:
            return
        record = {"step": state.global_step, "time": round(time.time(), 3), **logs}
        with self.path.open("a") as fh:
            fh.write(json.dumps(record, default=float) + "\n")
        if "reward" in logs:
            self.rewards.append((state.global_step, float(logs["reward"])))
        if "tests/pass_rate" in logs:
            self.pass_rates.append((state.global_step, float(logs["tests/pass_rate"])))


class ProgressBar(TrainerCallback):
    """A rich progress bar: step, reward mean, pass rate, step time."""

    def __init__(self, console: Any = None):
        self.console = console
        self.progress: Any = None
        self.task: Any = None
        self.fields = {"reward": "-", "pass_rate": "-", "step_s": "-"}

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("step"), MofNCompleteColumn(), BarColumn(),
            TextColumn("reward {task.fields[reward]}  pass {task.fields[pass_rate]}  {task.fields[step_s]} s/step"),
            TimeElapsedColumn(), console=self.console)
        self.progress.start()
        self.task = self.progress.add_task("train", total=state.max_steps, completed=state.global_step, **self.fields)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if self.progress is None or not logs:
            return
        if "reward" in logs:
            self.fields["reward"] = f"{float(logs['reward']):.3f}"
        if "tests/pass_rate" in logs:
            self.fields["pass_rate"] = f"{float(logs['tests/pass_rate']):.2f}"
        if "timing/step_s" in logs:
            self.fields["step_s"] = f"{float(logs['timing/step_s']):.1f}"
        self.progress.update(self.task, completed=state.global_step, **self.fields)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=state.global_step)
            self.progress.stop()
            self.progress = None
