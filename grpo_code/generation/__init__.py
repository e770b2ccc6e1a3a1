"""Generation backends shared by training and eval.

A backend turns rendered prompts into ``n`` completions each:

- ``hf``: transformers ``generate`` (CPU or GPU), batched, seeded.
- ``vllm``: vLLM's offline ``LLM.generate`` with ``SamplingParams(n=...)``; LoRA adapters via ``LoRARequest``.
- ``openai``: any OpenAI-compatible completions/chat endpoint (vLLM serve, SGLang, ...).

All take the same :class:`~grpo_code.generation.base.Sampling` settings and
:class:`~grpo_code.tasks.prompts.Prompt` objects, so a prompt means the same everywhere.
:func:`load_generator` picks the backend; it lives here, not in ``base``, because the
backends import ``base`` and are imported only when chosen.
"""

from __future__ import annotations

from collections.abc import Callable

from grpo_code.errors import GrpoCodeError
from grpo_code.generation.base import Generator, Sampling, resolve

__all__ = ["Generator", "Sampling", "load_generator"]


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
