"""Trainer callbacks: ``metrics.jsonl`` (every logged metric per step) and the progress of a
run (a bar on a terminal, one plain line per step otherwise) with step, reward, pass rate
and step time."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from transformers import TrainerCallback

from grpo_code import metric_names as M


class MetricsLog(TrainerCallback):
    """Appends each log event of the trainer as one JSON line, and remembers the rewards."""

    def __init__(self, path: Path):
        self.path = path
        self.rewards: list[tuple[int, float]] = []
        self.pass_rates: list[tuple[int, float]] = []
        self._lock = threading.Lock()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not logs or not state.is_world_process_zero:
            return
        self.write({"step": state.global_step, **logs})
        if M.REWARD in logs:
            self.rewards.append((state.global_step, float(logs[M.REWARD])))
        if M.PASS_RATE in logs:
            self.pass_rates.append((state.global_step, float(logs[M.PASS_RATE])))

    def write(self, row: dict[str, Any]) -> None:
        """One line (``step`` first, then the time): from the trainer's log, or a line of its
        own such as a held-out eval's, which may finish on another thread."""
        record = {"step": row["step"], "time": round(time.time(), 3), **row}
        with self._lock, self.path.open("a") as fh:
            fh.write(json.dumps(record, default=float) + "\n")


class ProgressBar(TrainerCallback):
    """Progress of a run: a rich bar while the console is a terminal, else one line per step.

    The bar draws on ``console`` (stderr in the CLI) when it is a terminal. When ``stream``
    (stdout by default) is not a terminal, as in ``grpo-code train > log``, or when there is
    no bar to draw, each logged step is also written to ``stream`` as one flushed line:
    ``step 3/12  reward 0.250  pass 0.125  12.4 s``. A bar alone would leave a log file
    empty until the run ends.
    """

    def __init__(self, console: Any = None, stream: TextIO | None = None, lines: bool | None = None):
        self.console = console
        self.stream = stream
        self.lines = lines
        self.progress: Any = None
        self.task: Any = None
        self.fields = {"reward": "-", "pass_rate": "-", "step_s": "-"}
        self._last_log: float | None = None

    def _out(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stdout

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = self.console if self.console is not None else Console(stderr=True)
        if self.lines is None:
            self.lines = not _is_tty(self._out()) or not console.is_terminal
        self._last_log = time.monotonic()
        if not console.is_terminal:
            return
        self.progress = Progress(
            TextColumn("step"), MofNCompleteColumn(), BarColumn(),
            TextColumn("reward {task.fields[reward]}  pass {task.fields[pass_rate]}  {task.fields[step_s]} s/step"),
            TimeElapsedColumn(), console=console)
        self.progress.start()
        self.task = self.progress.add_task("train", total=state.max_steps, completed=state.global_step, **self.fields)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not logs or not state.is_world_process_zero:
            return
        now = time.monotonic()
        if M.REWARD in logs:
            self.fields["reward"] = f"{float(logs[M.REWARD]):.3f}"
        if M.PASS_RATE in logs:
            self.fields["pass_rate"] = f"{float(logs[M.PASS_RATE]):.3f}"
        if M.STEP_S in logs:
            self.fields["step_s"] = f"{float(logs[M.STEP_S]):.1f}"
        elif M.REWARD in logs and self._last_log is not None:
            # Without the trainer's own step timing, the wall time since the last logged step.
            self.fields["step_s"] = f"{now - self._last_log:.1f}"
        if M.REWARD in logs:
            self._last_log = now
            if self.lines:
                out = self._out()
                out.write(f"step {state.global_step}/{state.max_steps}  reward {self.fields['reward']}  "
                          f"pass {self.fields['pass_rate']}  {self.fields['step_s']} s\n")
                out.flush()
        if self.progress is not None:
            self.progress.update(self.task, completed=state.global_step, **self.fields)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=state.global_step)
            self.progress.stop()
            self.progress = None


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
