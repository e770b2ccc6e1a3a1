#!/usr/bin/env bash
# Does the wheel work on its own? Build it, install only the wheel (and its dependencies)
# into a fresh venv outside the checkout, and from a directory that is not the checkout run
# what a new user runs first:
#
#   grpo-code tasks list          the bundled suites demo, demo-js, demo-cpp
#   grpo-code config show         the bundled demo config (name: demo), no silent defaults
#   grpo-code sandbox build       each language's image definition resolves from the wheel
#                                 (--bootstrap; up to date in seconds after scripts/setup.sh)
#   grpo-code train ...           one demo training step through the docker sandbox
#
# Prints what it checked and exits non-zero on the first failure. Run by .ci/run after the
# tests; needs what scripts/setup.sh provides (Docker engine, images, demo model).
# Environment: PYTHON (interpreter for the venv, default python3), GRPO_CODE_TORCH (torch
# requirement, default torch==2.13.0: the CPU build; a bare torch pulls CUDA),
# WHEEL_CHECK_KEEP=1 keeps the temporary directory.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-python3}"
BUILD_PY="$REPO/.venv/bin/python"
[ -x "$BUILD_PY" ] || BUILD_PY="$PY"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/grpo-code-wheel-check.XXXXXX")"
if [ "${WHEEL_CHECK_KEEP:-0}" = 1 ]; then
    trap 'echo "kept $WORK"' EXIT
else
    trap 'rm -rf "$WORK"' EXIT
fi
START=$SECONDS
step() { printf '\n==> [%3ds] %s\n' "$((SECONDS - START))" "$*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }

step "Build the wheel (from a copy of the sources: no stale build/ in the checkout)"
mkdir -p "$WORK/src" "$WORK/dist" "$WORK/elsewhere"
( cd "$REPO" && cp -r pyproject.toml README.md grpo_code configs tasks sandboxes "$WORK/src/" )
find "$WORK/src" -name __pycache__ -prune -exec rm -rf {} +
# The builder's own setuptools when new enough (the build-system asks >= 77), else pip fetches one.
ISOLATION=()
"$BUILD_PY" -c 'import importlib.metadata as m, sys; sys.exit(int(m.version("setuptools").split(".")[0]) < 77)' \
    2>/dev/null && ISOLATION=(--no-build-isolation)
"$BUILD_PY" -m pip wheel "$WORK/src" --no-deps "${ISOLATION[@]}" -q -w "$WORK/dist" >"$WORK/build.log" 2>&1 \
    || { cat "$WORK/build.log"; fail "the wheel did not build"; }
WHEEL="$(ls "$WORK"/dist/grpo_code-*.whl)"
ok "built $(basename "$WHEEL") ($(du -k "$WHEEL" | cut -f1) KiB, $("$BUILD_PY" -c 'import sys, zipfile; print(len(zipfile.ZipFile(sys.argv[1]).namelist()))' "$WHEEL") files)"

step "Fresh venv outside the checkout: $WORK/venv"
"$PY" -m venv "$WORK/venv"
V="$WORK/venv/bin"
pip_install() {
    "$V/python" -m pip install -q "$@" >>"$WORK/pip.log" 2>&1 || { tail -n 30 "$WORK/pip.log"; fail "pip install $*"; }
}
pip_install --upgrade pip
pip_install "${GRPO_CODE_TORCH:-torch==2.13.0}"  # first: the wheel's torch requirement is then met
pip_install "$WHEEL"
ok "installed $("$V/grpo-code" --version 2>&1 | tail -n 1)"

cd "$WORK/elsewhere"
step "Where the package and its data come from (cwd $PWD)"
"$V/python" - "$REPO" <<'EOF' || fail "the package or its data resolve outside the venv"
import sys
from pathlib import Path

from grpo_code import resources

repo, pkg = Path(sys.argv[1]).resolve(), resources.package_dir().resolve()
assert pkg.is_relative_to(Path(sys.prefix).resolve()), f"grpo_code imported from {pkg}, not the venv"
assert resources.source_checkout() is None, f"a checkout was found: {resources.source_checkout()}"
for kind in resources.KINDS:
    where = resources.bundled_dir(kind).resolve()
    assert where.is_relative_to(pkg) and not where.is_relative_to(repo), f"{kind} from {where}"
    print(f"ok: {kind:9} from {where}")
EOF

step "grpo-code tasks list"
"$V/grpo-code" tasks list >"$WORK/tasks.txt" 2>&1 || { cat "$WORK/tasks.txt"; fail "tasks list exited non-zero"; }
for suite in demo demo-js demo-cpp; do
    grep -Eq "^[│|] $suite +[│|]" "$WORK/tasks.txt" || { cat "$WORK/tasks.txt"; fail "tasks list does not list $suite"; }
done
ok "tasks list lists demo, demo-js, demo-cpp"

step "grpo-code config show"
"$V/grpo-code" config show >"$WORK/config.yaml" 2>&1 || { cat "$WORK/config.yaml"; fail "config show exited non-zero"; }
grep -qx "name: demo" "$WORK/config.yaml" || { head -5 "$WORK/config.yaml"; fail "config show did not print the demo config"; }
grep -qx "  suite: demo" "$WORK/config.yaml" || fail "config show: the demo config's suite is not demo"
ok "config show prints the bundled demo config (name: demo, suite: demo)"

step "grpo-code sandbox build (image definitions from the wheel)"
for lang in python javascript cpp; do
    "$V/grpo-code" sandbox build --lang "$lang" --bootstrap >"$WORK/build-$lang.log" 2>&1 \
        || { tail -n 20 "$WORK/build-$lang.log"; fail "sandbox build --lang $lang"; }
    if grep -q "up to date" "$WORK/build-$lang.log"; then state="up to date"; else state="built"; fi
    ok "sandbox build --lang $lang: $(tail -n 1 "$WORK/build-$lang.log") $state"
done

step "grpo-code train train.trl.max_steps=1 (docker sandbox)"
RUN="$WORK/run"
"$V/grpo-code" train train.trl.max_steps=1 sandbox.backend=docker "output.dir=$RUN" >"$WORK/train.log" 2>&1 \
    || { tail -n 30 "$WORK/train.log"; fail "train exited non-zero"; }
tail -n 5 "$WORK/train.log"
[ -s "$RUN/metrics.jsonl" ] || fail "no metrics.jsonl in $RUN"
"$V/python" - "$RUN" <<'EOF' || fail "the run's records do not show a step through the docker sandbox"
import json
import sys
from pathlib import Path

import yaml

run = Path(sys.argv[1])
rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
steps = sorted({r["step"] for r in rows if "step" in r})
assert steps and max(steps) == 1, f"steps logged: {steps}"
cfg = yaml.safe_load((run / "config.yaml").read_text())
assert (cfg["name"], cfg["sandbox"]["backend"]) == ("demo", "docker"), f"config.yaml: {cfg['name']}, {cfg['sandbox']}"
print("ok: step 1 logged in metrics.jsonl; config.yaml: name demo, sandbox.backend docker")
EOF

step "wheel check passed in $((SECONDS - START)) s"
