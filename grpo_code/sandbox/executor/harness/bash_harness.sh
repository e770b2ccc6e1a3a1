# grpo-code's Bash harness (docs/languages.md): reads the payload on fd 4 (the nonce, then
# the script test's code), sources the program from the file named by $1, runs the test in
# the same shell and reports on fd 3 when it ran to its end. A test that fails ends the
# shell with a non-zero status (set -e, exit 1), which is the test's failure.
{ IFS= read -r __grpo_nonce; __grpo_code=$(cat; printf x); } <&4
__grpo_code=${__grpo_code%x}
exec 4<&-
source "$1" || exit $?
eval "$__grpo_code" || exit $?
builtin printf '{"nonce":"%s", "event": "completed"}\n' "$__grpo_nonce" >&3
builtin exit 0
