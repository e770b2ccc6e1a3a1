"""grpo-code: GRPO training of code models on verifiable rewards from sandboxed tests."""

__version__ = "0.1.0"
