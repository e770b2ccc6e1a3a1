"""The vLLM backend: offline ``LLM.generate`` with ``SamplingParams(n=...)`` (GPU only).

Prompts are rendered with the model's own chat template (the same text the hf backend
feeds), so both backends see identical prompts. LoRA adapter directories are served with
``LoRARequest`` on top of their base model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grpo_code.errors import GrpoCodeError
from grpo_code.generation.base import Progress, ResolvedModel, Sampling, prompt_style, prompt_text
from grpo_code.tasks.prompts import Prompt


def _vllm() -> Any:
    try:
        import vllm
    except ImportError:
        raise GrpoCodeError("the vllm backend needs vLLM",
                            "pip install 'grpo-code[vllm]' on a GPU machine, or use --backend hf") from None
    return vllm


class VLLMGenerator:
    def __init__(self, model: ResolvedModel, dtype: str = "auto", gpu_memory_utilization: float = 0.3,
                 max_lora_rank: int = 64):
        vllm = _vllm()
        from transformers import AutoTokenizer

        self.name = model.name
        self.tokenizer = AutoTokenizer.from_pretrained(model.tokenizer_path)
        self.style = prompt_style(self.tokenizer)
        self.llm = vllm.LLM(model=model.path, tokenizer=model.tokenizer_path, dtype=dtype,
                            gpu_memory_utilization=gpu_memory_utilization, enable_lora=model.adapter is not None,
                            max_lora_rank=max_lora_rank)
        self.lora = None
        if model.adapter:
            from vllm.lora.request import LoRARequest

            self.lora = LoRARequest("adapter", 1, model.adapter)

    def text(self, prompt: Prompt) -> str:
        return prompt_text(self.tokenizer, prompt)

    def generate(self, prompts: Sequence[Prompt], sampling: Sampling, seed: int = 0,
                 progress: Progress | None = None) -> list[list[str]]:
        vllm = _vllm()
        params = vllm.SamplingParams(n=sampling.n, temperature=sampling.temperature, top_p=sampling.top_p,
                                     top_k=sampling.top_k or -1,
                                     max_tokens=sampling.max_new_tokens, seed=seed, stop=list(sampling.stop) or None)
        outputs = self.llm.generate([self.text(p) for p in prompts], params, lora_request=self.lora, use_tqdm=False)
        if progress:
            progress(len(prompts))
        return [[c.text for c in out.outputs] for out in outputs]

    def close(self) -> None:
        self.llm = None
