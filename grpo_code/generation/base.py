"""The generator interface, sampling settings and backend selection."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from grpo_code.errors import GrpoCodeError, ModelError
from grpo_code.tasks.prompts import Prompt


@dataclass(frozen=True)
class Sampling:
    """How completions are sampled. ``temperature == 0`` means greedy."""

    n: int = 1
    temperature: float = 0.8
    top_p: float = 1.0
    top_k: int = 50
    """0: every token may be sampled."""
    max_new_tokens: int = 256
    seed: int = 0
    stop: tuple[str, ...] = field(default_factory=tuple)


Progress = Callable[[int], None]
"""Called with the number of prompts just finished."""

Done = Callable[[int, str], bool]
"""Whether the text generated so far for prompt ``i`` of a call already holds its whole
program; the ``hf`` backend ends such a completion there."""


class Generator(Protocol):
    """Anything that samples ``sampling.n`` completions per prompt."""

    name: str
    style: str
    """``chat`` when the model has a chat template (instruct models), else ``raw``."""

    def generate(self, prompts: Sequence[Prompt], sampling: Sampling, seed: int = 0,
                 progress: Progress | None = None) -> list[list[str]]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class ResolvedModel:
    """Where weights come from: a full model, or a LoRA adapter plus its base."""

    name: str
    path: str
    adapter: str | None = None

    @property
    def tokenizer_path(self) -> str:
        if self.adapter and any((Path(self.adapter) / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json")):
            return self.adapter
        return self.path


def prompt_text(tokenizer: Any, prompt: Prompt) -> str:
    """The text a local model is fed: the chat template applied to chat prompts, raw text as is."""
    if prompt.style == "chat":
        return tokenizer.apply_chat_template(list(prompt.messages), add_generation_prompt=True, tokenize=False)
    return prompt.text


def resolve(name: str, log: Callable[[str], None] = lambda _: None) -> ResolvedModel:
    """A short name, hub id, checkpoint directory or LoRA adapter directory -> weights to load."""
    from grpo_code.models import resolve_model

    path = Path(name).expanduser()
    adapter_cfg = path / "adapter_config.json"
    if path.is_dir() and adapter_cfg.is_file():
        try:
            base = json.loads(adapter_cfg.read_text()).get("base_model_name_or_path")
        except ValueError:
            base = None
        if not base:
            raise ModelError(f"{adapter_cfg} names no base model", "set base_model_name_or_path in it")
        return ResolvedModel(name, resolve_model(base, log=log), adapter=str(path))
    return ResolvedModel(name, resolve_model(name, log=log))


def load_generator(backend: str, model: str, *, dtype: str = "auto", batch_size: int = 8,
                   server_url: str | None = None, vllm_gpu_memory_utilization: float = 0.3,
                   log: Callable[[str], None] = lambda _: None) -> Generator:
    """Build the generator for ``backend`` (``hf``, ``vllm`` or ``openai``)."""
    if backend == "hf":
        from grpo_code.generation.hf import HFGenerator

        return HFGenerator(resolve(model, log), dtype=dtype, batch_size=batch_size)
    if backend == "vllm":
        from grpo_code.generation.vllm import VLLMGenerator

        return VLLMGenerator(resolve(model, log), dtype=dtype, gpu_memory_utilization=vllm_gpu_memory_utilization)
    if backend == "openai":
        from grpo_code.generation.openai import OpenAIGenerator

        if not server_url:
            raise GrpoCodeError("the openai backend needs a server URL",
                                "set generation.server_url or --server-url, e.g. http://127.0.0.1:8000/v1")
        return OpenAIGenerator(model, server_url)
    raise GrpoCodeError(f"unknown generation backend {backend!r}", "use hf, vllm or openai")
