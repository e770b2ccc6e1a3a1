"""A learned reward model: texts in, one score per text out, on the configured backend.

``RewardModel(config).score(texts)`` tokenizes once (truncating to
``rewards.model.max_length``), plans length-bucketed batches, runs them on the backend and
returns the scores in input order. ``backend: auto`` loads PyTorch and ONNX Runtime fp32,
times both on a few synthetic mixed-length batches (after a warm-up, best of two rounds)
and keeps the faster; ``onnx-int8`` is opt-in because quantization changes scores.
``remote`` delegates to :class:`~.remote.RemoteScorer`. The model must be a
sequence classifier with one label (``num_labels=1``).
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from grpo_code.config import RewardModelConfig
from grpo_code.errors import RewardError
from grpo_code.rewards.model.backends import Backend, OnnxBackend, TorchBackend, export_onnx, forward_inputs
from grpo_code.rewards.model.batching import pad, plan_batches
from grpo_code.rewards.model.remote import RemoteScorer
from grpo_code.tasks.prompts import message_text

log = logging.getLogger(__name__)


class RewardModel:
    """Scores texts with a ``num_labels=1`` classifier; see the module docstring."""

    def __init__(self, config: RewardModelConfig):
        self.config = config
        self.selection: dict[str, float] = {}
        """``auto``: seconds per timed round for each backend tried."""
        self.notes: list[str] = []
        self.remote: RemoteScorer | None = None
        self.backend: Backend | None = None
        if config.backend == "remote":
            if not config.url:
                raise RewardError("rewards.model.backend is remote but rewards.model.url is null",
                                  "set the reward server's endpoint, e.g. http://host:8000/classify")
            self.remote = RemoteScorer(config.url, config.remote_model or config.path, config.batch_size,
                                       config.timeout_s, config.retries)
            self.backend_name = "remote"
            return
        if not config.path:
            raise RewardError("rewards.model.path is null", "set a local model directory or a hub id")
        self._load_local()
        self.backend_name = self.backend.name if self.backend else "none"

    # ----------------------------------------------------------------- loading

    def _load_local(self) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        cfg = self.config
        path = Path(cfg.path).expanduser()
        self.model_dir = path if path.is_dir() else None
        ref = str(path) if path.is_dir() else cfg.path
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(ref)
            model = AutoModelForSequenceClassification.from_pretrained(ref)
        except (OSError, ValueError, RuntimeError) as exc:
            raise RewardError(f"cannot load the reward model {cfg.path!r} ({exc})",
                              "give a local directory or hub id of a sequence-classification model") from None
        if model.config.num_labels != 1:
            raise RewardError(f"reward model {cfg.path!r} has num_labels={model.config.num_labels}",
                              "a reward model is a sequence classifier with one label (save it with num_labels=1)")
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        if model.config.pad_token_id is None:
            model.config.pad_token_id = self.pad_id
        self.input_names = forward_inputs(model)
        limit = self.tokenizer.model_max_length if self.tokenizer.model_max_length < 1_000_000 else cfg.max_length
        self.max_length = min(cfg.max_length, limit, getattr(model.config, "max_position_embeddings", limit))
        self._ref = ref
        self._model = model
        if cfg.backend == "torch":
            self.backend = TorchBackend(model, cfg.threads, cfg.compile)
        elif cfg.backend in ("onnx", "onnx-int8"):
            self.backend = self._onnx(int8=cfg.backend == "onnx-int8")
        else:
            self.backend = self._auto()
        if not isinstance(self.backend, TorchBackend):
            self._model = None  # the ONNX session holds its own weights

    def _onnx(self, int8: bool) -> OnnxBackend:
        path = export_onnx(self._ref, self.model_dir, self.tokenizer, self.input_names, int8=int8)
        return OnnxBackend(path, "onnx-int8" if int8 else "onnx", self.config.threads)

    def _auto(self) -> Backend:
        candidates: list[Backend] = [TorchBackend(self._model, self.config.threads, self.config.compile)]
        try:
            candidates.append(self._onnx(int8=False))
        except RewardError as exc:
            self.notes.append(f"onnx skipped: {exc}")
            log.warning("reward model: ONNX Runtime backend unavailable, using torch (%s)", exc)
        if len(candidates) == 1:
            return candidates[0]
        batches = self._synthetic_batches()
        for backend in candidates:  # warm-up: first-call allocations, ORT graph optimisation
            backend.score(batches[-1])
        best: dict[str, float] = {}
        for _ in range(2):
            for backend in candidates:
                start = time.perf_counter()
                for batch in batches:
                    backend.score(batch)
                elapsed = time.perf_counter() - start
                best[backend.name] = min(best.get(backend.name, float("inf")), elapsed)
        self.selection = best
        chosen = min(candidates, key=lambda b: best[b.name])
        log.info("reward model: backend auto chose %s (%s)", chosen.name,
                 ", ".join(f"{k} {v:.3f}s" for k, v in best.items()))
        return chosen

    def _synthetic_batches(self) -> list[dict[str, np.ndarray]]:
        """Mixed-length batches of ordinary tokens, bucketed like real scoring."""
        rng = random.Random(0)
        special = set(self.tokenizer.all_special_ids)
        vocab = [i for i in range(min(self.tokenizer.vocab_size, 30000)) if i not in special][1000:]
        n = self.config.batch_size * self.config.auto_batches
        lo = min(32, self.max_length)
        encs = [{"input_ids": [rng.choice(vocab) for _ in range(rng.randint(lo, self.max_length))]} for _ in range(n)]
        lengths = [len(e["input_ids"]) for e in encs]
        plan = plan_batches(lengths, self.config.batch_size, True)
        return [pad([encs[i] for i in b], self.input_names, self.pad_id) for b in plan]

    # ----------------------------------------------------------------- scoring

    def tokenize(self, texts: Sequence[str]) -> list[dict[str, list[int]]]:
        enc = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)
        names = [n for n in self.input_names if n in enc]
        return [{n: enc[n][i] for n in names} for i in range(len(texts))]

    def score(self, texts: Sequence[str], bucketing: bool | None = None) -> list[float | None]:
        """One score per text, in input order (``None`` where a remote request failed)."""
        if not texts:
            return []
        if self.remote is not None:
            return self.remote.score(texts)
        return self.score_encoded(self.tokenize(texts), bucketing)

    def score_encoded(self, encs: Sequence[dict[str, list[int]]], bucketing: bool | None = None) -> list[float | None]:
        assert self.backend is not None
        bucketing = self.config.bucketing if bucketing is None else bucketing
        lengths = [len(e["input_ids"]) for e in encs]
        out = np.zeros(len(encs), dtype=np.float32)
        for batch in plan_batches(lengths, self.config.batch_size, bucketing):
            out[batch] = self.backend.score(pad([encs[i] for i in batch], self.input_names, self.pad_id))
        return [float(x) for x in out]

    def close(self) -> None:
        if self.remote is not None:
            self.remote.close()


def load_reward_model(config: RewardModelConfig) -> RewardModel | None:
    """The configured reward model, or None when it is off (``weight: 0``)."""
    if config.weight <= 0:
        return None
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return RewardModel(config)


def text_for(prompt: Any, completion: Any, tokenizer: Any = None) -> str:
    """The text a reward model scores: prompt then completion (chat messages: the chat
    template when the tokenizer has one, else the message contents joined)."""
    if isinstance(prompt, str) and isinstance(completion, str):
        return prompt + completion
    messages = (list(prompt) if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}])
    messages += list(completion) if isinstance(completion, list) else [{"role": "assistant", "content": completion}]
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        try:
            return tokenizer.apply_chat_template(messages, tokenize=False)
        except Exception as exc:  # scoring other text than the model was trained on would go unseen
            raise RewardError(f"the reward model's chat template rejects the conversation "
                              f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})",
                              "use a reward model whose template takes a user turn and an assistant turn "
                              "(roles as the policy's chat)") from None
    return "\n\n".join(message_text(m) for m in messages)
