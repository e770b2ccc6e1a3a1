#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the test suite. Extra arguments go to pytest,
# e.g. `bash scripts/test.sh -m docker` or `bash scripts/test.sh tests/test_config.py`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
printf '\n==> Tests\n'
# Long checks (learning runs, big benchmarks) are marked slow and opt-in: -m slow.
exec .venv/bin/python -m pytest -m "not slow" "$@"
