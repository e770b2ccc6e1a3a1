#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the test suite. Extra arguments go to pytest,
# e.g. `bash scripts/test.sh -m docker` or `bash scripts/test.sh tests/test_config.py`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
printf '\n==> Tests\n'
# Long checks (learning runs, big benchmarks) are marked slow and opt-in: -m slow. The
# slowest tests are listed at the end (--durations): the default run is kept under 20 minutes.
# Quiet exit: the run ends with pytest's summary, not the teardown warnings of triton's
# bindings (tests/conftest.py, pytest_unconfigure).
GRPO_CODE_TEST_QUIET_EXIT=1 exec .venv/bin/python -m pytest -m "not slow" --durations=15 "$@"
