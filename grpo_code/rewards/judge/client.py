"""The judge's client: requests to an OpenAI-compatible chat endpoint, shared and cached by content.

:meth:`Judge.ballot` starts one item's judgments (all its votes) on a worker thread and
returns a future at once; asking again for the same content (judge model, template, quoted
texts, votes, sampling) returns the same future while it runs and the stored result after,
so a judgment started early (as an answer finished) is the one the reward function later
waits for. Only whole judgments are stored: a failed or unparseable one is asked again next
time. A vote is one sampled output (``n`` in the request; servers that give fewer are asked
again); a vote that does not parse scores 0 (an answer can provoke one), and an item none
of whose votes parse is masked (``unparseable``). A request that fails after its retries masks the item (``error``).

``guided``: each request carries a regular expression of the output (a few lines of
critique, then the verdict line) as vLLM's ``structured_outputs``, so a server that
constrains decoding (vLLM, SGLang) only lets the judge end with a line the parser reads.
It fixes the form, not the judgment; servers without it reject or ignore the field.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from grpo_code.rewards.judge.parse import Unparseable, aggregate
from grpo_code.rewards.judge.prompts import TEMPLATE_VERSION, JudgePrompt
from grpo_code.web import HttpFailure, post_json

CRITIQUE = r"([^\n]{0,200}\n){0,8}"
"""``guided``: the critique before the verdict line (at most 8 lines of 200 characters)."""
Parser = Callable[[str | None, JudgePrompt], Any]
"""An output -> a score (float) or one score per label (list)."""


@dataclass(frozen=True)
class Ballot:
    """What one item is judged on: prompts with the votes each gets, and how to read them."""

    prompts: tuple[tuple[JudgePrompt, int], ...]
    parse: Parser
    items: int = 1
    """Scores one judgment gives (a group ranking: one per answer)."""


@dataclass(frozen=True)
class Outcome:
    """An item's judgment: one aggregated score per answer it covers, or why it has none."""

    scores: tuple[float | None, ...]
    masked: str | None = None
    """``unparseable``, ``error`` (the server failed), ``timeout`` (past the deadline)."""
    latency_s: float = 0.0
    tokens: int = 0
    calls: int = 0
    cached: bool = False
    votes: int = 0
    """Votes, parsed or not."""
    error: str | None = None
    span: tuple[float, float] | None = None
    """When its requests started and ended (``time.monotonic``); ``None`` for a stored one."""


class Judge:
    """Judgments from one served model; thread-safe."""

    def __init__(self, url: str, model: str, *, temperature: float = 0.7, max_tokens: int = 256,
                 timeout_s: float = 60.0, retries: int = 1, concurrency: int = 8, cache_size: int = 50_000,
                 aggregation: str = "mean", guided: bool = False, api_key: str | None = None):
        self.url = url.rstrip("/")
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.retries = retries
        self.cache_size = cache_size
        self.aggregation = aggregation
        self.guided = guided
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._lock = threading.Lock()
        self._done: OrderedDict[str, Outcome] = OrderedDict()
        self._running: dict[str, Future[Outcome]] = {}
        self._claimed: set[str] = set()
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="grpo-judge")

    def key(self, ballot: Ballot) -> str:
        parts = [TEMPLATE_VERSION, self.model, self.temperature, self.max_tokens, self.aggregation, self.guided,
                 [[list(p.messages), n] for p, n in ballot.prompts]]
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    def ballot(self, ballot: Ballot, claim: bool = True) -> Future[Outcome]:
        """The item's judgment: stored, running, or started now. ``claim``: the caller uses it
        (a reward function); the first claim of a judgment that was started early gets it as
        made (its requests and time count for that step), later ones get a cache hit.
        ``claim=False`` starts one early without using it."""
        key = self.key(ballot)
        with self._lock:
            first = claim and key not in self._claimed
            if claim:
                self._claimed.add(key)
            stored = self._done.get(key)
            if stored is not None:
                self._done.move_to_end(key)
                done: Future[Outcome] = Future()
                done.set_result(stored if first else Outcome(stored.scores, None, 0.0, 0, 0, True, stored.votes))
                return done
            running = self._running.get(key)
            if running is not None:
                return running
            future = self._pool.submit(self._judge, key, ballot)
            self._running[key] = future
            return future

    def _judge(self, key: str, ballot: Ballot) -> Outcome:
        started = time.monotonic()
        votes: list[Any] = []
        tokens = calls = unparsed = 0
        try:
            for prompt, n in ballot.prompts:
                outputs, used, made = self._sample(prompt, n)
                tokens += used
                calls += made
                for text in outputs:
                    try:
                        votes.append(ballot.parse(text, prompt))
                    except Unparseable:
                        unparsed += 1
                        votes.append(None)
        except HttpFailure as exc:
            ended = time.monotonic()
            outcome = Outcome((None,) * ballot.items, "error", ended - started, tokens, calls + 1, error=str(exc),
                              span=(started, ended))
        else:
            ended = time.monotonic()
            if unparsed == len(votes):
                outcome = Outcome((None,) * ballot.items, "unparseable", ended - started, tokens, calls,
                                  span=(started, ended))
            else:
                # A vote that does not parse scores 0: an answer that talks the judge out of its
                # format only where it would score low must not keep just its good votes.
                votes = [v if v is not None else [0.0] * ballot.items for v in votes]
                columns = [[v] if ballot.items == 1 and not isinstance(v, list) else v for v in votes]
                scores = tuple(aggregate([c[i] for c in columns], self.aggregation) for i in range(ballot.items))
                outcome = Outcome(scores, None, ended - started, tokens, calls, votes=len(votes), span=(started, ended))
        with self._lock:
            self._running.pop(key, None)
            if outcome.masked is None:
                self._done[key] = outcome
                while len(self._done) > self.cache_size:
                    self._claimed.discard(self._done.popitem(last=False)[0])
            else:
                self._claimed.discard(key)  # asked again next time, as a new judgment
        return outcome

    def _sample(self, prompt: JudgePrompt, n: int) -> tuple[list[str | None], int, int]:
        """``n`` outputs for one prompt: the texts, the tokens they took, the requests made."""
        texts: list[str | None] = []
        tokens = calls = 0
        while len(texts) < n:  # some servers give fewer choices than n
            body: dict[str, Any] = {"model": self.model, "messages": list(prompt.messages), "n": n - len(texts),
                                    "temperature": self.temperature, "max_tokens": self.max_tokens}
            if self.guided:
                body["structured_outputs"] = {"regex": CRITIQUE + prompt.pattern}
            calls += 1
            answer = post_json(f"{self.url}/chat/completions", body, timeout_s=self.timeout_s,
                               retries=self.retries, headers=self._headers, parse=_choices)
            texts.extend(answer[0])
            tokens += answer[1]
        return texts[:n], tokens, calls

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _choices(payload: Any) -> tuple[list[str | None], int]:
    choices = payload["choices"]
    if not isinstance(choices, list) or not choices:
        raise ValueError("no choices")
    texts = [(c.get("message") or {}).get("content") for c in choices]
    usage = payload.get("usage") or {}
    return texts, int(usage.get("completion_tokens") or 0)


def busy_s(spans: Sequence[tuple[float, float]]) -> float:
    """Wall time during which at least one of these intervals was open (their union)."""
    total, end = 0.0, float("-inf")
    for lo, hi in sorted(spans):
        if hi > end:
            total += hi - max(lo, end)
            end = hi
    return total


def votes_at(step: int, votes: int, schedule: dict[int, int] | None) -> int:
    """The votes per item at a training step: the schedule's entry for the latest step at or
    before it (``{0: 1, 200: 3}``: one vote until step 200, then three), else ``votes``."""
    if not schedule:
        return votes
    due = [s for s in schedule if int(s) <= step]
    return int(schedule[max(due, key=int)]) if due else votes


def auc(scores: Sequence[float], passed: Sequence[bool]) -> float | None:
    """How well judge scores separate passing from failing answers: the chance that a passing
    answer scores above a failing one (ties count half); ``None`` without both kinds."""
    good = [s for s, p in zip(scores, passed) if p]
    bad = [s for s, p in zip(scores, passed) if not p]
    if not good or not bad:
        return None
    wins = sum(1.0 if g > b else 0.5 if g == b else 0.0 for g in good for b in bad)
    return wins / (len(good) * len(bad))
