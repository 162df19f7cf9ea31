#!/bin/sh
# Usage: check_device_output.sh MEMORY RANKS command [args...]
# Runs a perf tool (the command) and checks its output: status 0, the header line saying which
# memory the buffers were in (MEMORY: "device" or "host"), RANKS lines of the device report (on a
# GPU for device memory, "cpu" for host memory), at least one table row, every #wrong column 0
# (the run must check its data: -c 1 or more) and no failure on stderr.
set -u
memory=$1
ranks=$2
shift 2
. "$(dirname "$0")/output_checks.sh"

run_checked "$@"

expect_count "^# Buffers in $memory memory" 1
if [ "$memory" = device ]; then
  expect_count '^#  Rank +[0-9]+ Group +0 Pid +[0-9]+ on +[^ ]+ device +[0-9]+( \[[^]]*\])?$' "$ranks"
else
  expect_count '^#  Rank +[0-9]+ Group +0 Pid +[0-9]+ on +[^ ]+ cpu$' "$ranks"
fi
# Rows: size count type redop root, then time algbw busbw #wrong twice; #wrong must be 0.
rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +[a-z]+ +-?[0-9]+ ' "$out")
[ "$rows" -gt 0 ] || fail "no result rows"
cell=' +[0-9.e+]+ +[0-9.e+]+ +[0-9.e+]+ +0'
expect_count "^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +[a-z]+ +-?[0-9]+${cell}${cell} *\$" "$rows"
expect_count '^# Out of bounds values : 0 OK$' 1
if grep -qiE 'failure|error' "$err"; then
  fail "errors on stderr"
fi
echo "$memory memory output OK ($rows rows)"
