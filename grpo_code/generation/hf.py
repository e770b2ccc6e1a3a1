"""The transformers backend: a model loaded for eval, sampled by the decode loop training
uses too (:mod:`.hf_decode`), on CPU or GPU.

Prompts are processed in fixed, seeded chunks of ``batch_size // n`` prompts
(:func:`~grpo_code.generation.base.seeded_chunks`), so the same prompts, settings and seed
give the same completions, whether or not an earlier run was interrupted.

With ``done`` a completion ends as soon as its program is whole (and leaves the batch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grpo_code.errors import ModelError
from grpo_code.generation.base import (
    Completion,
    Done,
    Progress,
    ResolvedModel,
    Sampling,
    end_token_ids,
    prompt_ids,
    prompt_style,
    prompt_text,
    seeded_chunks,
    torch_dtype,
)
from grpo_code.generation.hf_decode import decode
from grpo_code.generation.stream import Sample, TokenKinds, Watch, text_watch
from grpo_code.tasks.prompts import Prompt


class HFGenerator:
    def __init__(self, model: ResolvedModel, dtype: str = "auto", batch_size: int = 8, device: str | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.name = model.name
        self.batch_size = max(1, batch_size)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model.tokenizer_path)
            self.model = AutoModelForCausalLM.from_pretrained(model.path, dtype=torch_dtype(dtype, self.device))
        except OSError as exc:
            raise ModelError(f"cannot load model {model.name!r} ({str(exc).splitlines()[0]})",
                             "check the name or path; `grpo-code models list` shows cached models") from None
        if model.adapter:
            from peft import PeftModel

            self.model = PeftModel.from_pretrained(self.model, model.adapter).merge_and_unload()
        self.model.to(self.device).eval()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.style = prompt_style(self.tokenizer)
        self.end_ids = end_token_ids(self.model, self.tokenizer)
        self.kinds = TokenKinds(self.tokenizer)

    def text(self, prompt: Prompt) -> str:
        return prompt_text(self.tokenizer, prompt)

    def prompt_ids(self, prompt: Prompt) -> list[int]:
        return prompt_ids(self.tokenizer, prompt)

    def generate(self, prompts: Sequence[Prompt], sampling: Sampling, seed: int = 0,
                 progress: Progress | None = None, done: Done | None = None) -> list[list[str]]:
        out: list[list[str]] = []
        for chunk_seed, chunk in seeded_chunks(prompts, self.batch_size, sampling.n, seed):
            start = len(out)
            chunk_done = None if done is None else (lambda i, text, start=start: done(start + i, text))
            rows = [ids for p in chunk for ids in [self.prompt_ids(p)] * sampling.n]
            watch = None if chunk_done is None else text_watch(self.tokenizer, self.kinds, chunk_done, sampling.n)
            samples = self.stream(rows, sampling, chunk_seed, watch)
            texts = [Completion(self.tokenizer.decode(s.ids, skip_special_tokens=True), s.cut) for s in samples]
            out.extend(texts[i * sampling.n:(i + 1) * sampling.n] for i in range(len(chunk)))
            if progress:
                progress(len(chunk))
        return out

    def stream(self, prompt_ids: Sequence[Sequence[int]], sampling: Sampling, seed: int,
               watch: Watch | None = None) -> list[Sample]:
        """The streaming interface (:mod:`grpo_code.generation.stream`) on this model."""
        return decode(self.model, prompt_ids, sampling, seed, self.end_ids, self.tokenizer.pad_token_id, watch,
                      self.tokenizer, logprobs=False)

    def close(self) -> None:
        self.model = None
