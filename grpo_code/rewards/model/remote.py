"""The ``remote`` reward-model backend: an HTTP reward-model server.

Requests follow vLLM's pooling-model APIs (``vllm serve MODEL --runner pooling``): a POST
of ``{"model": NAME, "input": [text, ...]}`` to ``rewards.model.url`` (``/classify`` or
``/pooling``), answered by ``{"data": [{"index": i, ...}, ...]}`` where each item carries
the score as ``score``, ``probs``/``logits`` (first class) or ``data`` (a number or a
nested list, first element). Texts are sent in batches of ``rewards.model.batch_size``,
a few at once; each request has a timeout and is retried with back-off; a batch that
still fails scores ``None`` (masked, never 0) and is counted in :attr:`failures`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from grpo_code.web import HttpFailure, post_json


class RemoteScorer:
    """Scores texts through an HTTP endpoint; thread-safe."""

    name = "remote"

    def __init__(self, url: str, model: str | None = None, batch_size: int = 16, timeout_s: float = 30.0,
                 retries: int = 2, concurrency: int = 4, backoff_s: float = 0.2):
        self.url = url
        self.model = model
        self.batch_size = batch_size
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.failures = 0
        self.requests = 0
        self.last_error: str | None = None
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="grpo-rm-remote")

    def score(self, texts: Sequence[str]) -> list[float | None]:
        chunks = [list(texts[i:i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        out: list[float | None] = []
        for scores in self._pool.map(self._score_chunk, chunks):
            out.extend(scores)
        return out

    def _score_chunk(self, texts: list[str]) -> list[float | None]:
        body: dict[str, Any] = {"input": texts}
        if self.model:
            body["model"] = self.model

        def count() -> None:
            with self._lock:
                self.requests += 1

        try:
            return post_json(self.url, body, timeout_s=self.timeout_s, retries=self.retries, backoff_s=self.backoff_s,
                             parse=lambda payload: parse_scores(payload, len(texts)), attempted=count)
        except HttpFailure as exc:
            with self._lock:
                self.failures += 1
                self.last_error = str(exc)
            return [None] * len(texts)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _first_number(value: Any) -> float:
    while isinstance(value, list):
        value = value[0] if len(value) == 1 or not isinstance(value[0], list) else value[-1]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"no score in {value!r}")
    return float(value)


def parse_scores(payload: Any, expected: int) -> list[float]:
    """Scores from a pooling/classify/score response, in request order."""
    items = payload["data"] if isinstance(payload, dict) else payload
    if not isinstance(items, list) or len(items) != expected:
        raise ValueError(f"expected {expected} results, got {len(items) if isinstance(items, list) else items!r}")
    if all(isinstance(i, dict) and "index" in i for i in items):
        items = sorted(items, key=lambda i: i["index"])
    scores = []
    for item in items:
        if isinstance(item, dict):
            for key in ("score", "logits", "probs", "data", "embedding"):
                if key in item:
                    scores.append(_first_number(item[key]))
                    break
            else:
                raise ValueError(f"no score field in {sorted(item)}")
        else:
            scores.append(_first_number(item))
    return scores
