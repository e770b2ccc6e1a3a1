"""The trainer's side of the rollout worker (:mod:`.engine_worker`): its process and pipe,
a listener thread that scores each row as it arrives, the weight files it is pushed, and
the probe that checks its engine follows them."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_code.errors import GrpoCodeError
from grpo_code.generation.stream import Sample
from grpo_code.training.engine_worker import (
    BatchDone,
    Failed,
    Generate,
    Loaded,
    Ready,
    RowEnded,
    Stop,
    Weights,
    WorkerSpec,
)
from grpo_code.verify.early import EarlyJobs

START_TIMEOUT_S = 600.0
"""How long the worker's engine may take to start."""
SILENT_TIMEOUT_S = 900.0
"""How long the trainer waits on a worker that reports nothing before failing the run."""


class RolloutWorkerError(GrpoCodeError):
    """The rollout worker died, hung, or reported an error."""


@dataclass(frozen=True)
class Load:
    """One load of pushed weights by the worker."""

    version: int
    load_s: float
    probe_gap: float
    """Largest difference of the probe text's log-probs, the engine's against the trainer's (NaN: not compared)."""
    probe: list[float]


@dataclass
class _Batch:
    task_ids: list[str | None]
    rows: dict[int, tuple[Sample, float]] = field(default_factory=dict)
    handles: dict[int, Any] = field(default_factory=dict)
    done: BatchDone | None = None
    """The worker's report once it finished it."""
    score: bool = True
    """Training rows, scored as they arrive (held-out rows are not)."""


class EngineWorker:
    """The trainer's side of the rollout worker: the process, its pipe, a listener thread
    that scores each row as it arrives (``early``), and the weight files."""

    def __init__(self, spec: WorkerSpec, tokenizer: Any, early: EarlyJobs | None, initial_version: int):
        self.tokenizer = tokenizer
        self.early = early
        self.version = initial_version
        """The newest version the worker has loaded."""
        self._loads: list[Load] = []
        self.trainer_probes: dict[int, list[float]] = {}
        self.error: str | None = None
        self._closing = False
        self._batches: dict[int, _Batch] = {}
        self._cond = threading.Condition()
        self._ready: list[float] | None = None
        self._heard = time.monotonic()
        self.weights_dir = Path(tempfile.mkdtemp(prefix="grpo-code-weights-", dir=_shm()))
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        from grpo_code.training import engine_worker

        self.process = ctx.Process(target=engine_worker.main, args=(child, spec), name="grpo-code-rollout-worker")
        self.process.start()
        child.close()
        self._listener = threading.Thread(target=self._listen, name="grpo-code-rollout-listener", daemon=True)
        self._listener.start()

    # ----------------------------------------------------------------- listening

    def _listen(self) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                with self._cond:
                    if not self._closing and self.error is None:
                        self.process.join(5)
                        self.error = f"the rollout worker exited (exit code {self.process.exitcode})"
                    self._cond.notify_all()
                return
            try:
                self._handle(message)
            except Exception as exc:  # noqa: BLE001 - a bug here must fail the run, loudly
                with self._cond:
                    self.error = f"the trainer could not take the rollout worker's message: {exc!r}"
                    self._cond.notify_all()
                return

    def _handle(self, message: Any) -> None:
        with self._cond:
            self._heard = time.monotonic()
        if isinstance(message, RowEnded):
            sample = message.sample
            batch = self._batches[message.batch]
            task_id = batch.task_ids[message.row]
            handle = None
            if self.early is not None and task_id is not None and batch.score:
                text = self.tokenizer.decode(sample.ids, skip_special_tokens=True)
                handle = self.early.submit(task_id, text, sample.cut)
            with self._cond:
                batch.rows[message.row] = (sample, message.seconds)
                if handle is not None:
                    batch.handles[message.row] = handle
        elif isinstance(message, BatchDone):
            with self._cond:
                self._batches[message.batch].done = message
                self._cond.notify_all()
        elif isinstance(message, Loaded):
            with self._cond:
                self.version = message.version
                gap = probe_gap(self.trainer_probes.pop(message.version, None), message.probe)
                self._loads.append(Load(message.version, message.load_s, gap, message.probe))
                self._cond.notify_all()
            for path in self.weights_dir.glob("v*.safetensors"):
                if int(path.stem[1:]) <= message.version:
                    path.unlink(missing_ok=True)
        elif isinstance(message, Ready):
            with self._cond:
                self._ready = message.probe
                self._cond.notify_all()
        elif isinstance(message, Failed):
            with self._cond:
                self.error = "the rollout worker failed:\n" + message.text.rstrip()
                self._cond.notify_all()
        else:
            raise TypeError(f"the rollout worker sent {message!r}")

    def _wait(self, done: Any, what: str, timeout_s: float) -> None:
        """Block until ``done()`` (under the lock), failing the run when the worker died,
        failed, or reported nothing for ``timeout_s``."""
        with self._cond:
            while not done():
                if self.error is not None:
                    raise RolloutWorkerError(self.error, "see the worker's log above; rerun with --resume")
                if not self.process.is_alive() and not done():
                    self._cond.wait(5)  # the listener's last messages
                    if not done():
                        raise RolloutWorkerError(self.error or f"the rollout worker exited while {what}",
                                                 "see the worker's log above; rerun with --resume")
                if time.monotonic() - self._heard > timeout_s:
                    raise RolloutWorkerError(f"the rollout worker sent nothing for {timeout_s:.0f} s while {what}",
                                             "see the worker's log above; rerun with --resume")
                self._cond.wait(1.0)

    # ----------------------------------------------------------------- the trainer's calls

    def wait_ready(self) -> list[float]:
        self._heard = time.monotonic()
        self._wait(lambda: self._ready is not None, "starting its engine", START_TIMEOUT_S)
        return self._ready  # type: ignore[return-value]

    def request(self, batch_no: int, prompt_ids: list[list[int]], task_ids: list[str | None], seed: int,
                min_version: int, score: bool = True) -> None:
        """Ask for a batch; ``score``: its rows are training rows, scored (``early``) as they
        arrive (held-out rows are judged by whoever takes them)."""
        with self._cond:
            self._batches[batch_no] = _Batch(list(task_ids), score=score)
        self.conn.send(Generate(batch_no, prompt_ids, seed, min_version, list(task_ids)))

    def requested(self, batch_no: int) -> bool:
        return batch_no in self._batches

    def finished(self) -> int:
        """Training batches finished and not yet taken."""
        with self._cond:
            return sum(b.done is not None for b in self._batches.values() if b.score)

    def is_done(self, batch_no: int) -> bool:
        """Whether a batch asked for is finished (and not yet taken)."""
        with self._cond:
            return self._batches[batch_no].done is not None

    def take_loads(self) -> list[Load]:
        """The weight loads reported since the last call."""
        with self._cond:
            loads, self._loads = self._loads, []
        return loads

    def take(self, batch_no: int) -> _Batch:
        self._wait(lambda: self._batches[batch_no].done is not None, f"generating batch {batch_no}",
                   SILENT_TIMEOUT_S)
        with self._cond:
            return self._batches.pop(batch_no)

    def push(self, version: int, model: Any, probe: list[float]) -> None:
        """Write the policy of ``version`` (``model``'s weights, :func:`checkpoint_weights`)
        for the worker and tell it."""
        from safetensors.torch import save_file

        path = self.weights_dir / f"v{version}.safetensors"
        tmp = path.with_suffix(".tmp")
        with checkpoint_weights(model) as weights:
            tensors, seen = {}, set()
            for name, tensor in weights.items():
                key = tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape)
                if key in seen:  # a tied weight: the engine ties it itself
                    continue
                seen.add(key)
                tensors[name] = tensor.detach().contiguous()
            save_file(tensors, str(tmp))  # while merged: unmerging changes these tensors in place
        os.replace(tmp, path)
        with self._cond:
            self.trainer_probes[version] = probe
        self.conn.send(Weights(version, str(path)))

    def close(self) -> None:
        """Stop the worker (politely, then by force) and remove the weight files."""
        with self._cond:
            self._closing = True
        try:
            self.conn.send(Stop())
        except OSError:
            pass
        self.process.join(10)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        self.conn.close()
        shutil.rmtree(self.weights_dir, ignore_errors=True)


def _shm() -> str | None:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def probe_gap(trainer: list[float] | None, engine: list[float]) -> float:
    """Largest absolute difference of two log-prob lists (NaN when the trainer's is missing)."""
    if trainer is None or len(trainer) != len(engine):
        return float("nan")
    return max((abs(a - b) for a, b in zip(trainer, engine, strict=True)), default=0.0)


@contextlib.contextmanager
def checkpoint_weights(model: Any) -> Iterator[dict[str, Any]]:
    """The policy's weights as its checkpoint names them, a LoRA adapter merged into them,
    for the length of the ``with`` block: the adapter is merged into the base weights in
    place and unmerged after, so the tensors are only what was pushed inside the block."""
    import torch

    peft = hasattr(model, "peft_config") and hasattr(model, "merge_adapter")
    with torch.no_grad():
        if not peft:
            yield dict(model.state_dict())
            return
        model.merge_adapter()
        try:
            merged = {}
            for name, tensor in model.state_dict().items():
                if "lora_" in name:
                    continue
                merged[name.removeprefix("base_model.model.").replace(".base_layer", "")] = tensor
            yield merged
        finally:
            model.unmerge_adapter()


def probe_logps(model: Any, ids: list[int], temperature: float) -> list[float]:
    """The trainer's log-prob of each probe token after the first (temperature applied, as the
    engine's), in the weights' own precision: the model's class ``forward``, not the one
    accelerate wraps in autocast for mixed precision (under bf16 autocast the probe would
    measure bf16 against the engine's fp32, about 0.1, not whether the weights arrived)."""
    import torch

    with torch.no_grad():
        device = next(model.parameters()).device
        logits = type(model).forward(model, input_ids=torch.tensor([ids], device=device)).logits[0, :-1].float()
        logps = torch.log_softmax(logits / max(temperature, 1e-6), dim=-1)
        return logps.gather(1, torch.tensor(ids[1:], device=device)[:, None])[:, 0].tolist()


PROBE_TEXT = "def add(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n    return a + b\n"
"""The text whose log-probs the trainer and the worker compare after each push."""


def probe_ids(tokenizer: Any) -> list[int]:
    return list(tokenizer(PROBE_TEXT, add_special_tokens=False)["input_ids"])
