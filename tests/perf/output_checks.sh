# Sourced by the perf output checks: run_checked runs a command with its stdout in $out and its
# stderr in $err (both shown, removed on exit) and fails unless it exits 0; fail, expect_line and
# expect_count then check $out.
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

run_checked() {
  "$@" >"$out" 2>"$err"
  status=$?
  cat "$out"
  cat "$err" >&2
  [ "$status" -eq 0 ] || fail "exit status $status"
}

# expect_line LINE: $out holds LINE exactly.
expect_line() {
  grep -qxF -- "$1" "$out" || fail "missing line: '$1'"
}

# expect_count REGEX N: exactly N lines of $out match REGEX.
expect_count() {
  n=$(grep -cE -- "$1" "$out")
  [ "$n" -eq "$2" ] || fail "expected $2 lines matching '$1', found $n"
}
