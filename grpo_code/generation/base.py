"""The generator interface, sampling settings, and the rules every backend and the trainer share.

Each rule is written once here: how a prompt is styled (:func:`prompt_style`), which torch
dtype ``auto`` means (:func:`torch_dtype`), how prompts are chunked and seeded
(:func:`seeded_chunks`) and where weights come from (:func:`resolve`). The backends import
this module; :func:`grpo_code.generation.load_generator` picks one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from grpo_code.errors import ModelError
from grpo_code.generation.stream import derive_seed
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
    row_seeds: bool = True
    """Each row draws from its own generator (the seeding rule, :mod:`.stream`); False: the
    rows of a call share one (``generation.row_seeds``)."""


class Completion(str):
    """A completion's text that knows whether it was cut at the length limit (``cut``, as its
    backend decided it: :attr:`grpo_code.generation.stream.Sample.cut`). Backends return
    these; code that only wants the text uses it as a string. The verifier reads ``cut``."""

    cut: bool

    def __new__(cls, text: str, cut: bool = False) -> Completion:
        made = super().__new__(cls, text)
        made.cut = cut
        return made


def was_cut(text: Any) -> bool:
    """Whether a completion from a backend was cut at the length limit (plain strings: no)."""
    return bool(getattr(text, "cut", False))


Progress = Callable[[int], None]
"""Called with the number of prompts just finished."""

Done = Callable[[int, str], bool]
"""Whether the text generated so far for prompt ``i`` of a call already holds its whole
program; the ``hf`` and ``vllm`` backends end such a completion there."""


class Generator(Protocol):
    """Anything that samples ``sampling.n`` completions per prompt."""

    name: str
    style: str
    """``chat`` when the model has a chat template (instruct models), else ``raw``."""

    def generate(self, prompts: Sequence[Prompt], sampling: Sampling, seed: int = 0,
                 progress: Progress | None = None,
                 done: Done | None = None) -> list[list[str]]: ...

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


def prompt_ids(tokenizer: Any, prompt: Prompt) -> list[int]:
    """The token ids a local model is fed (training and eval alike): :func:`prompt_text`
    tokenized, special tokens added only to raw text (a chat template holds its own)."""
    return list(tokenizer(prompt_text(tokenizer, prompt), add_special_tokens=prompt.style != "chat")["input_ids"])


def end_token_ids(model: Any, tokenizer: Any) -> list[int]:
    """The token ids that end a completion: every eos id of the model's generation config,
    and the tokenizer's (as ``GRPOTrainer`` takes them)."""
    ids = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids = [tokenizer.eos_token_id, *ids]
    return ids


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


def prompt_style(tokenizer: Any) -> str:
    """``chat`` when the tokenizer has a chat template (instruct models), else ``raw``."""
    return "chat" if tokenizer.chat_template else "raw"


def model_prompt_style(backend: str, model: str) -> str:
    """:func:`prompt_style` of a model, decided from its tokenizer without loading weights;
    ``chat`` for the ``openai`` backend, which the server templates."""
    if backend == "openai":
        return "chat"
    from transformers import AutoTokenizer

    return prompt_style(AutoTokenizer.from_pretrained(resolve(model).tokenizer_path))


DTYPES = ("float32", "bfloat16", "float16")


def torch_dtype(name: str, device: str | None = None) -> Any:
    """The torch dtype of a ``model.dtype`` setting: ``auto`` is bfloat16 on CUDA and float32
    elsewhere (``device``; ``None``: whether this machine has CUDA)."""
    import torch

    if name == "auto":
        cuda = torch.cuda.is_available() if device is None else str(device).startswith("cuda")
        return torch.bfloat16 if cuda else torch.float32
    if name not in DTYPES:
        raise ModelError(f"unknown dtype {name!r}", f"use auto, {', '.join(DTYPES)}")
    return getattr(torch, name)


T = TypeVar("T")


def seeded_chunks(items: Sequence[T], batch_size: int, n: int, seed: int) -> list[tuple[int, list[T]]]:
    """``items`` in fixed chunks of ``batch_size // n`` (at least one), each with its seed from
    (``seed``, chunk index). Eval and the hf backend chunk with this one rule, so the same
    prompts, settings and seed give the same completions, and a resumed eval generates
    exactly the chunks a whole run would have."""
    per_chunk = max(1, batch_size // n)
    return [(derive_seed(seed, index), list(items[start:start + per_chunk]))
            for index, start in enumerate(range(0, len(items), per_chunk))]
