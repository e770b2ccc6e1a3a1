#!/usr/bin/env bash
# GPU check: a few GRPO steps of the demo on one NVIDIA GPU, with the hf backend and, when
# vLLM imports, with vLLM colocated and with rollouts one version ahead of the update
# (train.max_staleness=1: a worker process with its own engine, on the last GPU when there
# are several); then the step time, generation tokens/s and time blocked
# on rewards of each run, read from its metrics.jsonl. Typically 2-5 minutes; each run is cut
# off after RUN_TIMEOUT seconds (default 180), so the whole check stays under 8 minutes.
#
#   bash scripts/gpu_check.sh                        # with .venv as it is (a CUDA torch inside)
#   WHEELS=/data/wheels bash scripts/gpu_check.sh    # first install from local wheels, no index
#   bash scripts/gpu_check.sh --summarize RUN_DIR... # only the summary of existing runs (no GPU)
#   bash scripts/gpu_check.sh --overrides hf|vllm|async DIR [BF16]  # a run's config overrides (BF16 1|0)
#
# Environment: WHEELS (a directory of wheels: a CUDA build of torch, grpo-code's dependencies,
# setuptools, optionally vllm; made elsewhere with `pip wheel -w wheels '.[vllm]'`), STEPS
# (GRPO steps per run, default 5), OUT (where the runs go, default runs/gpu-check-<time>),
# PYTHON (default .venv/bin/python). Without a GPU it stops at once with one error line.
set -euo pipefail
cd "$(dirname "$0")/.."

STEPS="${STEPS:-5}"
RUN_TIMEOUT="${RUN_TIMEOUT:-180}"
PY="${PYTHON:-.venv/bin/python}"

die() {
    echo "error: $*" >&2
    exit 2
}

# One override per line for `grpo-code train configs/demo.yaml`: $1 = hf|vllm|async, $2 = run dir,
# $3 = 1 when the GPU does bf16. The demo config is tuned for CPU (use_cpu, float32).
overrides() {
    local precision=(model.dtype=float32 train.trl.bf16=false)
    [ "${3:-1}" = 1 ] && precision=(model.dtype=bfloat16 train.trl.bf16=true)
    printf '%s\n' train.trl.use_cpu=false "${precision[@]}" "train.trl.max_steps=$STEPS" \
        train.trl.save_steps=100000 'output.report_to=[]' "output.dir=$2"
    if [ "$1" = hf ]; then
        printf '%s\n' generation.backend=hf   # the demo picks vllm where it is installed
    else
        printf '%s\n' generation.backend=vllm generation.vllm_mode=colocate \
            generation.vllm_gpu_memory_utilization=0.25 train.trl.vllm_max_model_length=1024 \
            train.stop_after_code=false   # as the GPU numbers were measured (the vLLM path stops rows now too)
        if [ "$1" = async ]; then
            printf '%s\n' train.max_staleness=1
        fi
    fi
}

# Means over the steps of each run (the first step, with CUDA/vLLM warm-up, is left out when
# there are more). Generated tokens per step = mean completion length x completions per step
# (per_device_train_batch_size x gradient_accumulation_steps, one process).
summarize() {
    "$PY" - "$@" <<'PYEOF'
import json
import math
import statistics
import sys
from pathlib import Path

import yaml

COLUMNS = ("run", "steps", "step_s", "generate_s", "gen_tok/s", "reward_wait_s", "sandbox_busy_s", "completion_len")


def mean(values):
    values = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.fmean(values) if values else float("nan")


rows = []
for arg in sys.argv[1:]:
    run = Path(arg)
    path = run / "metrics.jsonl"
    steps = []
    if path.is_file():
        steps = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        steps = [s for s in steps if "timing/step_s" in s]
    if not steps:
        print(f"{run.name}: no step logged in {path}")
        continue
    config = yaml.safe_load((run / "config.yaml").read_text()) if (run / "config.yaml").is_file() else {}
    trl = ((config or {}).get("train") or {}).get("trl") or {}
    per_step = int(trl.get("per_device_train_batch_size", 8)) * int(trl.get("gradient_accumulation_steps", 1))
    used = steps[1:] if len(steps) > 1 else steps
    tokens_per_s = [
        s["completions/mean_length"] * per_step / s["timing/generate_s"]
        for s in used
        if s.get("timing/generate_s") and "completions/mean_length" in s
    ]
    rows.append((
        run.name,
        f"{used[0]['step']}-{used[-1]['step']}" if len(used) > 1 else str(used[0]["step"]),
        f"{mean([s.get('timing/step_s') for s in used]):.2f}",
        f"{mean([s.get('timing/generate_s') for s in used]):.2f}",
        f"{mean(tokens_per_s):.0f}",
        f"{mean([s.get('timing/reward_wait_s') for s in used]):.3f}",
        f"{mean([s.get('timing/sandbox_busy_s') for s in used]):.3f}",
        f"{mean([s.get('completions/mean_length') for s in used]):.1f}",
    ))
if rows:
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]
    for row in (COLUMNS, *rows):
        print("  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths))))
    print("(means over the steps shown; step 1 is left out as warm-up when there are more)")
sys.exit(0 if len(rows) == len(sys.argv) - 1 else 1)
PYEOF
}

case "${1:-}" in
    --summarize)
        shift
        [ "$#" -gt 0 ] || die "--summarize needs run directories"
        summarize "$@"
        exit
        ;;
    --overrides)
        [[ "$#" =~ ^[34]$ && "$2" =~ ^(hf|vllm|async)$ && "${4:-1}" =~ ^[01]$ ]] ||
            die "usage: --overrides hf|vllm|async RUN_DIR [1|0 (bf16)]"
        overrides "$2" "$3" "${4:-1}"
        exit
        ;;
    "") ;;
    *) die "unknown argument '$1' (see the header of scripts/gpu_check.sh)" ;;
esac

gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)"
[ -n "$gpu" ] || die "no NVIDIA GPU found (nvidia-smi is missing or lists none); run this on a GPU machine"

if [ -n "${WHEELS:-}" ]; then
    [ -d "$WHEELS" ] || die "WHEELS=$WHEELS is not a directory"
    [ -x "$PY" ] || python3 -m venv .venv
    install=("$PY" -m pip install --quiet --no-index --find-links "$WHEELS")
    echo "==> installing from $WHEELS (no index)"
    "${install[@]}" 'setuptools>=77' wheel
    "${install[@]}" --no-build-isolation -e .
    if compgen -G "$WHEELS/vllm-*.whl" >/dev/null; then
        "${install[@]}" 'vllm>=0.22,<=0.31'
    fi
fi
[ -x "$PY" ] || die "no Python at $PY: run scripts/setup.sh with GRPO_CODE_TORCH set to a CUDA torch, or set WHEELS"
"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' ||
    die "the torch in $PY cannot use the GPU (a CPU build?): install a CUDA build (WHEELS or GRPO_CODE_TORCH)"
bf16="$("$PY" -c 'import torch; print(int(torch.cuda.is_bf16_supported()))')"
has_vllm=0
"$PY" -c 'import vllm' 2>/dev/null && has_vllm=1

echo "==> $gpu; torch $("$PY" -c 'import torch; print(torch.__version__)'); vLLM: $([ $has_vllm = 1 ] && "$PY" -c 'import vllm; print(vllm.__version__)' || echo 'not installed, its run is skipped')"
"$PY" -m grpo_code models pull smollm2-135m-instruct

OUT="${OUT:-runs/gpu-check-$(date +%Y%m%d-%H%M%S)}"
runs=()
failed=0
for backend in hf vllm async; do
    [ "$backend" != hf ] && [ "$has_vllm" = 0 ] && continue
    mapfile -t args < <(overrides "$backend" "$OUT/$backend" "$bf16")
    echo "==> $backend: $STEPS GRPO steps of the demo (cut off after ${RUN_TIMEOUT}s)"
    if timeout "$RUN_TIMEOUT" "$PY" -m grpo_code train configs/demo.yaml "${args[@]}"; then
        :
    else
        echo "warning: the $backend run failed or timed out (exit $?); its steps so far are summarized" >&2
        failed=1
    fi
    runs+=("$OUT/$backend")
done

echo
echo "==> summary ($OUT)"
summarize "${runs[@]}" || failed=1
exit "$failed"
