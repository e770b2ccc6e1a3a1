#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the default `grpo-code train` (the CPU demo,
# configs/demo.yaml). Extra arguments go to `grpo-code train`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
printf '\n==> grpo-code train %s\n' "$*"
exec .venv/bin/grpo-code train "$@"
