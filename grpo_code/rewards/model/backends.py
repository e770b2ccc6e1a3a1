"""Local reward-model backends: PyTorch eager and ONNX Runtime (fp32 and dynamic int8).

A backend is anything with ``name`` and ``score(batch) -> np.ndarray`` (one float per
row) where ``batch`` maps model input names to int64 arrays (:mod:`.batching`).

ONNX models are exported once with ``torch.onnx.export`` (TorchScript exporter, dynamic
batch and sequence axes) and cached next to the model (``<model>/onnx/``) when that
directory is writable, else under ``$GRPO_CODE_CACHE/onnx/``. A fingerprint of the
weights, torch version and inputs names the export, so a changed model is re-exported.
``onnx-int8`` is the fp32 export passed through ONNX Runtime's dynamic quantization
(int8 per-channel weights of the MatMuls, the last layer kept fp32); it changes scores
slightly, so ``auto`` never picks it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from grpo_code.errors import RewardError

OPSET = 17
EXPORT_FORMAT = 2


class Backend(Protocol):
    name: str

    def score(self, batch: dict[str, np.ndarray]) -> np.ndarray: ...


class TorchBackend:
    """Eager PyTorch (CUDA when available; ``compile=True`` adds ``torch.compile`` on GPU)."""

    name = "torch"

    def __init__(self, model: Any, threads: int | None = None, compile: bool = False):
        import torch

        if threads:
            torch.set_num_threads(threads)
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model = model.to(self.device).eval()
        self._call = torch.compile(self.model) if compile and self.device == "cuda" else self.model
        self.input_names = forward_inputs(model)

    def score(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        import torch

        inputs = {k: torch.from_numpy(v).to(self.device) for k, v in batch.items() if k in self.input_names}
        with torch.inference_mode():
            logits = self._call(**inputs).logits
        return logits[:, 0].float().cpu().numpy()


class OnnxBackend:
    """ONNX Runtime on CPU with one session (thread count from ``rewards.model.threads``)."""

    def __init__(self, path: Path, name: str = "onnx", threads: int | None = None):
        try:
            import onnxruntime as ort
        except ImportError:
            raise RewardError("onnxruntime is not installed (needed by the onnx reward-model backends)",
                              "pip install 'grpo-code[onnx]', or set rewards.model.backend=torch") from None
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        if threads:
            options.intra_op_num_threads = threads
        self.name = name
        self.path = path
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.session.get_inputs()]

    def score(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        feed = {k: batch[k] for k in self.input_names}
        return np.asarray(self.session.run(None, feed)[0])[:, 0].astype(np.float32)


def forward_inputs(model: Any) -> list[str]:
    import inspect

    params = inspect.signature(model.forward).parameters
    return [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in params]


def _fingerprint(model_dir: Path | None, model_id: str, input_names: list[str]) -> str:
    import torch

    digest = hashlib.sha256(json.dumps([EXPORT_FORMAT, OPSET, torch.__version__, model_id, input_names]).encode())
    if model_dir is not None:
        for f in sorted(model_dir.iterdir()):
            if f.is_file() and f.suffix in (".safetensors", ".bin", ".json"):
                st = f.stat()
                digest.update(f"{f.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def onnx_dir(model_dir: Path | None, model_id: str, input_names: list[str]) -> Path:
    """Where the exports of a model live: next to it when writable, else in the grpo-code cache."""
    from grpo_code.models import cache_dir

    tag = _fingerprint(model_dir, model_id, input_names)
    if model_dir is not None and os.access(model_dir, os.W_OK):
        return model_dir / "onnx" / tag
    return cache_dir() / "onnx" / tag


def export_onnx(model_ref: str, model_dir: Path | None, tokenizer: Any, input_names: list[str],
                int8: bool = False) -> Path:
    """The cached ONNX file of a model (fp32, or int8 derived from fp32), exporting it if absent."""
    dest = onnx_dir(model_dir, model_ref, input_names)
    fp32 = dest / "model.onnx"
    if not fp32.is_file():
        _export_fp32(model_ref, tokenizer, input_names, fp32)
    if not int8:
        return fp32
    q8 = dest / "model.int8.onnx"
    if not q8.is_file():
        _quantize(fp32, q8)
    return q8


def _export_fp32(model_ref: str, tokenizer: Any, input_names: list[str], dest: Path) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification

    # Eager attention traces into plain ops that ONNX Runtime fuses; SDPA adds shape-dependent branches.
    model = AutoModelForSequenceClassification.from_pretrained(model_ref, attn_implementation="eager").eval()
    sample = tokenizer(["def f(x):\n    return x", "a longer example text for tracing the padding path"],
                       padding=True, return_tensors="pt")
    args = tuple(sample[n] for n in input_names)
    axes = {n: {0: "batch", 1: "sequence"} for n in input_names}
    axes["logits"] = {0: "batch"}
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".export-", dir=dest.parent)) / dest.name
    try:
        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, args, str(tmp), input_names=input_names, output_names=["logits"],
                              dynamic_axes=axes, opset_version=OPSET, dynamo=False)
        _move_export(tmp.parent, dest.parent)
    except RewardError:
        raise
    except Exception as exc:
        raise RewardError(f"exporting {model_ref!r} to ONNX failed ({type(exc).__name__}: {exc})",
                          "set rewards.model.backend=torch") from None


def _move_export(src_dir: Path, dest_dir: Path) -> None:
    """Move an export (file plus any external-data files) into place; the .onnx goes last."""
    files = sorted(src_dir.iterdir(), key=lambda p: p.suffix == ".onnx")
    for f in files:
        os.replace(f, dest_dir / f.name)
    src_dir.rmdir()


def _last_layer_nodes(path: Path) -> list[str]:
    """Nodes of the last transformer layer, kept in fp32: the score reads its output directly,
    and keeping it (with embeddings and the head) lifts int8's rank agreement with fp32
    (Spearman 0.97 -> 0.985 on MiniLM) for a few percent of the speed-up."""
    import re

    import onnx

    names = [n.name for n in onnx.load(str(path), load_external_data=False).graph.node]
    layer = re.compile(r"layers?\.(\d+)/")
    indices = [int(m.group(1)) for n in names if (m := layer.search(n))]
    if not indices:
        return []
    last = max(indices)
    return [n for n in names if (m := layer.search(n)) and int(m.group(1)) == last]


def _quantize(fp32: Path, dest: Path) -> None:
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:
        raise RewardError("onnxruntime is not installed (needed by onnx-int8)",
                          "pip install 'grpo-code[onnx]', or set rewards.model.backend=torch") from None
    import logging

    tmp_dir = Path(tempfile.mkdtemp(prefix=".quant-", dir=dest.parent))
    root = logging.getLogger()
    level = root.level
    root.setLevel(max(level, logging.ERROR))  # ORT logs a pre-processing hint on the root logger
    try:
        quantize_dynamic(str(fp32), str(tmp_dir / dest.name), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"], nodes_to_exclude=_last_layer_nodes(fp32),
                         use_external_data_format=fp32.stat().st_size > 1_500_000_000)
        _move_export(tmp_dir, dest.parent)
    except Exception as exc:
        raise RewardError(f"int8 quantization of {fp32} failed ({type(exc).__name__}: {exc})",
                          "use rewards.model.backend=onnx or torch") from None
    finally:
        root.setLevel(level)
