"""Generation backends shared by training and eval.

A backend turns rendered prompts into ``n`` completions each:

- ``hf``: transformers ``generate`` (CPU or GPU), batched, seeded.
- ``vllm``: vLLM's offline ``LLM.generate`` with ``SamplingParams(n=...)``; LoRA adapters via ``LoRARequest``.
- ``openai``: any OpenAI-compatible completions/chat endpoint (vLLM serve, SGLang, ...).

All take the same :class:`~grpo_code.generation.base.Sampling` settings and
:class:`~grpo_code.tasks.prompts.Prompt` objects, so a prompt means the same everywhere.
"""

from grpo_code.generation.base import Generator, Sampling, load_generator

__all__ = ["Generator", "Sampling", "load_generator"]
