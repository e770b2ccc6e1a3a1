"""The OpenAI-compatible backend: chat or completions requests to a running server.

Works with vLLM's ``vllm serve``, SGLang and anything speaking the same HTTP API. Sampling
settings are sent as such servers take them (``top_k`` too, unless it is 0). Requests
run concurrently; connection errors, 429 and 5xx answers are retried with backoff.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from grpo_code.errors import GrpoCodeError
from grpo_code.generation.base import Completion, Progress, Sampling
from grpo_code.generation.stream import derive_seed
from grpo_code.tasks.prompts import Prompt
from grpo_code.web import HttpFailure, post_json


class OpenAIGenerator:
    style = "chat"

    def __init__(self, model: str, base_url: str, concurrency: int = 8, retries: int = 3, timeout_s: float = 300,
                 api_key: str | None = None):
        import os

        self.name = model
        self.base_url = base_url.rstrip("/")
        self.concurrency = concurrency
        self.retries = retries
        self.timeout_s = timeout_s
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY", "")

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            return post_json(f"{self.base_url}{path}", body, timeout_s=self.timeout_s, retries=self.retries,
                             headers=headers)
        except HttpFailure as exc:
            raise GrpoCodeError(f"generation server {self.base_url} failed: {exc}",
                                "check that the server runs and serves this model (generation.server_url)") from None

    def _one(self, prompt: Prompt, sampling: Sampling, seed: int) -> list[str]:
        body: dict[str, Any] = {"model": self.name, "n": sampling.n, "temperature": sampling.temperature,
                                "top_p": sampling.top_p, "max_tokens": sampling.max_new_tokens, "seed": seed}
        if sampling.top_k:  # vLLM and SGLang take top_k; OpenAI's own API has none (generation.top_k: 0)
            body["top_k"] = sampling.top_k
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        texts: list[str] = []
        while len(texts) < sampling.n:  # some servers ignore n > 1
            body["n"] = sampling.n - len(texts)
            if prompt.style == "chat":
                out = self._post("/chat/completions", {**body, "messages": list(prompt.messages)})
                got = [Completion(c["message"]["content"] or "", c.get("finish_reason") == "length")
                       for c in out.get("choices", [])]
            else:
                out = self._post("/completions", {**body, "prompt": prompt.text})
                got = [Completion(c.get("text", ""), c.get("finish_reason") == "length") for c in out.get("choices", [])]
            if not got:
                raise GrpoCodeError(f"generation server {self.base_url} returned no choices", "check the server log")
            texts.extend(got)
            body["seed"] = derive_seed(seed, len(texts))
        return texts[: sampling.n]

    def generate(self, prompts: Sequence[Prompt], sampling: Sampling, seed: int = 0,
                 progress: Progress | None = None) -> list[list[str]]:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            futures = [pool.submit(self._one, p, sampling, derive_seed(seed, i)) for i, p in enumerate(prompts)]
            out = []
            for fut in futures:
                out.append(fut.result())
                if progress:
                    progress(1)
        return out

    def close(self) -> None:
        pass
