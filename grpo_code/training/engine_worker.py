"""The rollout worker's process: a vLLM engine of its own that generates training batches
ahead of the update (``train.max_staleness``, :mod:`grpo_code.training.ahead`).

It runs in a process started with ``spawn`` and talks with the trainer over one pipe, in
the typed messages below. What it is sent, in order:

- :class:`Weights`: the policy after ``version`` updates, as a safetensors file (in
  ``/dev/shm`` where there is one). Only the newest waiting file is loaded; answered
  :class:`Loaded`, with the log-probs of the probe text under the loaded weights (the
  trainer checks that the engine follows its weights).
- :class:`Generate`: a batch, started once the loaded weights are at least
  ``min_version``; each row is reported as it ends (:class:`RowEnded`), then the batch
  (:class:`BatchDone`: the version it was sampled with, and how long the engine waited for
  work or weights before it).
- :class:`Stop`.

Any failure is sent as :class:`Failed` before the process exits. The process dies
with the trainer (``PR_SET_PDEATHSIG``), so a killed trainer leaves no engine behind.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import time
import traceback
from dataclasses import dataclass
from typing import Any

from grpo_code.generation.base import Sampling
from grpo_code.generation.stream import Sample

# ----------------------------------------------------------------- trainer -> worker


@dataclass(frozen=True)
class Weights:
    version: int
    path: str


@dataclass(frozen=True)
class Generate:
    batch: int
    prompt_ids: list[list[int]]
    seed: int
    min_version: int
    task_ids: list[str | None]


@dataclass(frozen=True)
class Stop:
    pass


# ----------------------------------------------------------------- worker -> trainer


@dataclass(frozen=True)
class Ready:
    probe: list[float]
    """The probe text's log-probs under the engine's first weights."""


@dataclass(frozen=True)
class Loaded:
    version: int
    load_s: float
    probe: list[float]


@dataclass(frozen=True)
class RowEnded:
    batch: int
    row: int
    sample: Sample
    seconds: float
    """From the start of the batch's generation to the row's end."""


@dataclass(frozen=True)
class BatchDone:
    batch: int
    version: int
    generate_s: float
    idle_s: float


@dataclass(frozen=True)
class Failed:
    text: str


@dataclass(frozen=True)
class WorkerSpec:
    """What the worker's engine is built from."""

    model_path: str
    tokenizer_path: str
    dtype: str
    sampling: Sampling
    max_model_len: int
    kv_bytes: int
    """The KV cache of the CPU build's engine (:func:`~grpo_code.generation.vllm.kv_cache_bytes`)."""
    probe_ids: list[int]
    cores: list[int]
    """The CPU cores the engine computes on (empty: vLLM's own choice)."""
    trust_remote_code: bool = False
    whole: Any = None
    """With ``train.stop_after_code``: ``(extractor, tasks by id, style)``, to stop a row once its program is whole."""
    gpu_memory_utilization: float = 0.3
    gpu: str | None = None
    """The GPU the engine runs on (``CUDA_VISIBLE_DEVICES``); ``None``: as inherited."""


def main(conn: Any, spec: WorkerSpec) -> None:
    """The worker process's entry point."""
    _die_with_parent()
    try:
        Worker(conn, spec).run()
    except KeyboardInterrupt:
        pass
    except BaseException:  # noqa: BLE001 - everything goes to the trainer, which fails the run with it
        try:
            conn.send(Failed(traceback.format_exc()))
        except OSError:
            pass
        raise SystemExit(1) from None


def _die_with_parent() -> None:
    """SIGKILL this process when the trainer's process ends, however it ends (Linux)."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (AttributeError, OSError):
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the trainer, which stops us


def bind_process(cores: list[int]) -> None:
    """Every thread of this process, and those it starts, on ``cores`` only."""
    for task in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(task), cores)
        except OSError:
            pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Worker:
    def __init__(self, conn: Any, spec: WorkerSpec):
        self.conn = conn
        self.spec = spec
        self.version = -1
        self.waiting_weights: tuple[int, str] | None = None
        self.requests: list[Generate] = []
        self.stopped = False
        self.llm = self._engine()
        self.version = 0

    def _engine(self) -> Any:
        spec = self.spec
        # One engine in this process, stepped here: vLLM's in-process engine, as TRL's colocated one.
        os.environ.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                           "MASTER_PORT": str(free_port()), "VLLM_ENABLE_V1_MULTIPROCESSING": "0"})
        if spec.gpu is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = spec.gpu
        if spec.cores:
            # As many compute threads as cores, every thread of the process on them: else
            # torch's second pool thread computes on the trainer's core.
            import torch

            os.environ["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(map(str, spec.cores))
            os.environ["OMP_NUM_THREADS"] = str(len(spec.cores))
            torch.set_num_threads(len(spec.cores))
            bind_process(spec.cores)
        from grpo_code.generation.vllm import in_process_engine

        return in_process_engine(spec.model_path, spec.tokenizer_path, spec.dtype, max_model_len=spec.max_model_len,
                                 kv_bytes=spec.kv_bytes, seed=0, gpu_memory_utilization=spec.gpu_memory_utilization,
                                 trust_remote_code=spec.trust_remote_code)

    # ----------------------------------------------------------------- loop

    def run(self) -> None:
        self.conn.send(Ready(self.probe()))
        idle_since = time.perf_counter()
        while not self.stopped:
            block = not self._runnable()
            self._receive(block)
            if self.waiting_weights is not None:
                self._load(*self.waiting_weights)
                self.waiting_weights = None
            request = self._runnable()
            if request is not None:
                self.requests.remove(request)
                idle = time.perf_counter() - idle_since
                self._run_batch(request, idle_s=idle)
                idle_since = time.perf_counter()

    def _runnable(self) -> Generate | None:
        """The first request, when the loaded (or waiting) weights are new enough for it."""
        if not self.requests:
            return None
        request = self.requests[0]
        newest = self.waiting_weights[0] if self.waiting_weights is not None else self.version
        return request if newest >= request.min_version else None

    def _receive(self, block: bool) -> None:
        while block or self.conn.poll():
            block = False
            try:
                message = self.conn.recv()
            except EOFError:
                self.stopped = True
                return
            if isinstance(message, Stop):
                self.stopped = True
            elif isinstance(message, Weights):
                self.waiting_weights = (message.version, message.path)
            elif isinstance(message, Generate):
                self.requests.append(message)
            else:
                raise TypeError(f"the rollout worker was sent {message!r}")

    # ----------------------------------------------------------------- weights

    def _load(self, version: int, path: str) -> None:
        from safetensors import safe_open

        from grpo_code.generation.vllm import load_engine_weights

        started = time.perf_counter()
        with safe_open(path, framework="pt") as f:
            load_engine_weights(self.llm, ((name, f.get_tensor(name)) for name in f.keys()))
        self.version = version
        self.conn.send(Loaded(version, time.perf_counter() - started, self.probe()))

    def probe(self) -> list[float]:
        """The log-prob of each probe token after the first, under the engine's weights."""
        vllm = __import__("vllm")
        params = vllm.SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0)
        out = self.llm.generate([{"prompt_token_ids": list(self.spec.probe_ids)}], params, use_tqdm=False)[0]
        logps = []
        for token, options in zip(self.spec.probe_ids[1:], out.prompt_logprobs[1:], strict=True):
            logps.append(float(options[token].logprob))
        return logps

    # ----------------------------------------------------------------- generation

    def _run_batch(self, request: Generate, idle_s: float) -> None:
        from grpo_code.generation.stream import Watch
        from grpo_code.generation.vllm import stream_engine

        started = time.perf_counter()
        task_ids = request.task_ids

        def on_end(row: int, sample: Sample) -> None:
            self.conn.send(RowEnded(request.batch, row, sample, time.perf_counter() - started))

        is_whole = None
        if self.spec.whole is not None:
            extractor, tasks, style = self.spec.whole
            tokenizer = self.llm.get_tokenizer()

            def is_whole(row: int, so_far: list[int]) -> bool:
                task = tasks.get(task_ids[row]) if task_ids[row] is not None else None
                return task is not None and extractor.whole(
                    task, tokenizer.decode(so_far, skip_special_tokens=True), style)

        watch = Watch(self._kinds(), is_whole=is_whole, on_end=on_end)
        stream_engine(self.llm, request.prompt_ids, self.spec.sampling, request.seed, watch)
        self.conn.send(BatchDone(request.batch, self.version, time.perf_counter() - started, idle_s))

    def _kinds(self) -> Any:
        from grpo_code.generation.stream import TokenKinds

        if not hasattr(self, "_token_kinds"):
            self._token_kinds = TokenKinds(self.llm.get_tokenizer())
        return self._token_kinds
