"""The learning check (opt in: ``pytest -m slow``): GRPO on the demo must make SmolLM2 better.

Runs ``scripts/learning_check.py``: pass@1 (n=8) on the demo train tasks before and after
28 GRPO steps on CPU (4 epochs of the 42 tasks, 6 a step), and the reward curve's last
quarter against its first (the same tasks). About 31 minutes on 2 cores with native bf16
(AVX512-BF16 or AMX), longer in fp32 elsewhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.docker
def test_grpo_on_the_demo_raises_reward_and_pass_at_1(tmp_path: Path, docker_ready: None, demo_model_dir: Path):
    proc = subprocess.run([sys.executable, "scripts/learning_check.py", "--json", "--out", str(tmp_path / "check")],
                          cwd=REPO, capture_output=True, text=True, timeout=60 * 60)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    quarters = report["reward"]
    assert quarters["beyond_noise"], f"reward did not rise beyond noise: {quarters}"
    assert report["pass_at_1_gain"] >= 0.05, (
        f"pass@1 {report['pass_at_1_before']:.3f} -> {report['pass_at_1_after']:.3f}")
    assert proc.returncode == 0
