"""The transformers backend: batched, seeded ``generate`` on CPU or GPU.

Prompts are processed in fixed chunks of ``batch_size // n`` prompts; each chunk is
seeded from (seed, chunk index), so the same prompts, settings and seed give the same
completions, whether or not an earlier run was interrupted.

With ``done`` a completion ends as soon as its program is whole (:func:`program_stop`).
Every row still draws its token at every step, so the other rows sample exactly what they
would have, and an ended completion is a prefix of the one it would have become.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grpo_code.errors import ModelError
from grpo_code.generation.base import Done, Progress, ResolvedModel, Sampling, prompt_text
from grpo_code.tasks.prompts import Prompt

DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


class TokenKinds:
    """Whether a token's text holds a backtick, and whether it holds a newline: the only
    tokens after which a program can become whole (a fence closed, a line ended)."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self._known: dict[int, tuple[bool, bool]] = {}

    def __call__(self, token_id: int) -> tuple[bool, bool]:
        known = self._known.get(token_id)
        if known is None:
            text = self.tokenizer.decode([token_id])
            known = self._known[token_id] = ("`" in text, "\n" in text)
        return known


def program_stop(tokenizer: Any, prompt_length: int, per_prompt: int, done: Done, kinds: TokenKinds) -> Any:
    """A stopping criterion that ends row ``r`` once ``done(r // per_prompt, text)`` holds."""
    from transformers import StoppingCriteria

    class ProgramStop(StoppingCriteria):
        def __init__(self) -> None:
            self.stopped: set[int] = set()

        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            import torch

            for row, token in enumerate(input_ids[:, -1].tolist()):
                if row in self.stopped or not any(kinds(token)):
                    continue
                text = tokenizer.decode(input_ids[row, prompt_length:], skip_special_tokens=True)
                if done(row // per_prompt, text):
                    self.stopped.add(row)
            stop = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
            if self.stopped:
                stop[list(self.stopped)] = True
            return stop

    return ProgramStop()


class HFGenerator:
    def __init__(self, model: ResolvedModel, dtype: str = "auto", batch_size: int = 8, device: str | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.name = model.name
        self.batch_size = max(1, batch_size)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if dtype == "auto":
            torch_dtype = torch.bfloat16 if self.device == "cuda" else torch.float32
        else:
            torch_dtype = getattr(torch, DTYPES[dtype])
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model.tokenizer_path)
            self.model = AutoModelForCausalLM.from_pretrained(model.path, dtype=torch_dtype)
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
        self.style = "chat" if self.tokenizer.chat_template else "raw"
        self.kinds = TokenKinds(self.tokenizer)

    def text(self, prompt: Prompt) -> str:
        return prompt_text(self.tokenizer, prompt)

    def generate(self, prompts: Sequence[Prompt], sampling: Sampling, seed: int = 0,
                 progress: Progress | None = None, done: Done | None = None) -> list[list[str]]:
        import torch

        per_chunk = max(1, self.batch_size // sampling.n)
        out: list[list[str]] = []
        for start in range(0, len(prompts), per_chunk):
            chunk = prompts[start:start + per_chunk]
            chunk_done = None if done is None else (lambda i, text, start=start: done(start + i, text))
            out.extend(self._chunk(chunk, sampling, seed * 1_000_003 + start // per_chunk, torch, chunk_done))
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

            kwargs["stopping_criteria"] = StoppingCriteriaList(
                [program_stop(self.tokenizer, enc["input_ids"].shape[1], sampling.n, done, self.kinds)])
        torch.manual_seed(seed)
        with torch.no_grad():
            ids = self.model.generate(**enc, **kwargs)
        new = ids[:, enc["input_ids"].shape[1]:]
        decoded = self.tokenizer.batch_decode(new, skip_special_tokens=True)
        return [decoded[i * sampling.n:(i + 1) * sampling.n] for i in range(len(chunk))]

    def close(self) -> None:
        self.model = None
