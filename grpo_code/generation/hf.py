"""The transformers backend: batched, seeded ``generate`` on CPU or GPU.

Prompts are processed in fixed, seeded chunks of ``batch_size // n`` prompts
(:func:`~grpo_code.generation.base.seeded_chunks`), so the same prompts, settings and seed
give the same completions, whether or not an earlier run was interrupted.

With ``done`` a completion ends as soon as its program is whole
(:func:`~grpo_code.generation.watch.program_stop`, the stopping criterion training uses too).
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
    prompt_style,
    prompt_text,
    seeded_chunks,
    torch_dtype,
)
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
        declared = self.model.generation_config.eos_token_id
        declared = [] if declared is None else [declared] if isinstance(declared, int) else list(declared)
        self.end_ids = {i for i in (*declared, self.tokenizer.eos_token_id, self.tokenizer.pad_token_id)
                        if i is not None}
        from grpo_code.generation.watch import TokenKinds

        self.kinds = TokenKinds(self.tokenizer)

    def text(self, prompt: Prompt) -> str:
        return prompt_text(self.tokenizer, prompt)

    def generate(self, prompts: Sequence[Prompt], sampling: Sampling, seed: int = 0,
                 progress: Progress | None = None, done: Done | None = None) -> list[list[str]]:
        import torch

        out: list[list[str]] = []
        for chunk_seed, chunk in seeded_chunks(prompts, self.batch_size, sampling.n, seed):
            start = len(out)
            chunk_done = None if done is None else (lambda i, text, start=start: done(start + i, text))
            out.extend(self._chunk(chunk, sampling, chunk_seed, torch, chunk_done))
            if progress:
                progress(len(chunk))
        return out

    def _chunk(self, chunk: Sequence[Prompt], sampling: Sampling, seed: int, torch: Any,
               done: Done | None = None) -> list[list[str]]:
        texts = [self.text(p) for p in chunk]
        # Chat templates already hold the BOS token; do not add special tokens twice.
        enc = self.tokenizer(texts, return_tensors="pt", padding=True,
                             add_special_tokens=chunk[0].style != "chat").to(self.device)
        kwargs: dict[str, Any] = {"max_new_tokens": sampling.max_new_tokens, "num_return_sequences": sampling.n,
                                  "pad_token_id": self.tokenizer.pad_token_id}
        if sampling.temperature > 0:
            kwargs.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p,
                          top_k=sampling.top_k)
        else:
            kwargs.update(do_sample=False)
        if sampling.stop:
            kwargs.update(stop_strings=list(sampling.stop), tokenizer=self.tokenizer)
        if done is not None:
            from transformers import StoppingCriteriaList

            from grpo_code.generation.watch import program_stop

            kwargs["stopping_criteria"] = StoppingCriteriaList([program_stop(
                self.tokenizer, enc["input_ids"].shape[1], sampling.n, len(chunk) * sampling.n, done, self.kinds)])
        torch.manual_seed(seed)
        with torch.no_grad():
            ids = self.model.generate(**enc, **kwargs)
        new = ids[:, enc["input_ids"].shape[1]:]
        decoded = self.tokenizer.batch_decode(new, skip_special_tokens=True)
        # A row that ended (an end token, or stopped after its code: padded from there) holds
        # an end or pad token; one that filled max_new_tokens without either was cut.
        ends = torch.tensor(sorted(self.end_ids), device=new.device)
        cut = ((new.shape[1] >= sampling.max_new_tokens) & ~torch.isin(new, ends).any(dim=1)).tolist()
        texts = [Completion(text, c) for text, c in zip(decoded, cut, strict=True)]
        return [texts[i * sampling.n:(i + 1) * sampling.n] for i in range(len(chunk))]

    def close(self) -> None:
        self.model = None
