#!/usr/bin/env bash
# Runs the kareus binary ($KAREUS) and checks exit codes and messages.
# Each case: expect CODE PATTERN -- ARGS...; PATTERN is a grep -E regex over stdout+stderr.
# Numbers are checked by check NAME COMMAND... (a python3 script that asserts them, say).
set -u
KAREUS=${KAREUS:?set KAREUS to the kareus binary}
passed=0
failed=0
expect() {
  local code=$1 pattern=$2
  shift 3
  local output status
  output=$("$KAREUS" "$@" 2>&1)
  status=$?
  if [[ $status -ne $code ]] || ! grep -qE -- "$pattern" <<<"$output"; then
    echo "FAIL: kareus $* -> exit $status (expected $code), output:"
    echo "$output" | head -20
    failed=$((failed + 1))
  else
    passed=$((passed + 1))
  fi
}
check() {
  local name=$1
  shift
  local output
  if output=$("$@" 2>&1); then
    passed=$((passed + 1))
  else
    echo "FAIL: $name:"
    echo "$output" | tail -20
    failed=$((failed + 1))
  fi
}
here=$(dirname "$0")
for case_file in "$here"/cases/*.sh; do
  [[ -e $case_file ]] || continue
  # shellcheck source=/dev/null
  source "$case_file"
done
echo "cli: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
