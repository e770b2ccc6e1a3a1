"""scripts/gpu_check.sh without a GPU: its syntax, its one-line refusal, the summary it reads
from a recorded metrics.jsonl (steps 1-3 of a CPU demo run), and the config overrides its
runs pass (valid for `grpo-code train configs/demo.yaml` and for trl.GRPOConfig)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO
from grpo_code.config import check_trl_keys, load_config

SCRIPT = REPO / "scripts" / "gpu_check.sh"
RECORDED = REPO / "tests" / "data" / "gpu_check" / "demo-cpu"


def gpu_check(*args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable}
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=60
    )


def test_script_parses():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_without_a_gpu_it_stops_with_one_error_line(tmp_path):
    # a PATH without nvidia-smi, as on this machine (and CI)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "head", "dirname"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    out = gpu_check(path=str(bin_dir))
    assert out.returncode != 0
    assert out.stderr.strip().splitlines() == [
        "error: no NVIDIA GPU found (nvidia-smi is missing or lists none); run this on a GPU machine"
    ]
    assert out.stdout == ""


def test_summary_of_a_recorded_run():
    out = gpu_check("--summarize", str(RECORDED))
    assert out.returncode == 0, out.stderr
    header, row, note = out.stdout.strip().splitlines()
    assert header.split() == [
        "run", "steps", "step_s", "generate_s", "gen_tok/s", "reward_wait_s", "sandbox_busy_s", "completion_len",
    ]  # fmt: skip
    # steps 2-3 (1 is warm-up): step_s (50.52+39.90)/2, generate_s (28.36+26.12)/2,
    # tokens/s mean(106.125*8/28.36, 94.125*8/26.12), reward wait, sandbox busy, length
    assert row.split() == ["demo-cpu", "2-3", "45.21", "27.24", "29", "0.024", "0.136", "100.1"]
    assert "warm-up" in note


def test_summary_of_a_run_without_steps_fails(tmp_path):
    out = gpu_check("--summarize", str(tmp_path))
    assert out.returncode == 1 and "no step logged" in out.stdout


# ids that are not marker names: a bare "vllm" id would make conftest skip it as a vllm test
@pytest.mark.parametrize("backend", ["hf", "vllm", "async"], ids=["hf-run", "vllm-run", "async-run"])
def test_overrides_are_valid_for_the_demo_config(backend, tmp_path):
    from grpo_code.train import grpo_args

    for bf16 in ("1", "0"):
        out = gpu_check("--overrides", backend, str(tmp_path / backend), bf16)
        assert out.returncode == 0, out.stderr
        cfg = load_config(REPO / "configs" / "demo.yaml", out.stdout.splitlines())
        assert cfg.generation.backend == ("hf" if backend == "hf" else "vllm") and cfg.train.trl["max_steps"] == 5
        assert cfg.train.max_staleness == (1 if backend == "async" else 0)
        assert cfg.train.stop_after_code is (backend == "hf")  # the vLLM path cannot stop rows
        assert cfg.output.dir == str(tmp_path / backend) and not check_trl_keys(cfg)
        assert cfg.model.dtype == ("bfloat16" if bf16 == "1" else "float32")
    # TRL itself accepts them (bf16 needs a GPU to pass its check, so the fp32 variant here)
    args = grpo_args(cfg, tmp_path / backend)
    # With rollouts ahead the worker is the engine, and on vLLM's CPU build ours is: TRL builds none.
    from grpo_code.generation.vllm import cpu_build

    assert args.use_cpu is False and args.use_vllm is (backend == "vllm" and not cpu_build())
    if backend == "vllm":
        assert args.vllm_mode == "colocate" and args.vllm_max_model_length == 1024


def test_bad_arguments_are_one_error_line():
    for args in (["--bogus"], ["--overrides", "tpu", "x"], ["--summarize"]):
        out = gpu_check(*args)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, (args, out.stderr)
        assert out.stderr.startswith("error: ")
