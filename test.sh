#!/usr/bin/env bash
# Builds Weft and runs its test suite. Usage: ./test.sh [--all] [CTEST_ARGS...]
# By default the suites that cannot fit a quick run are left out, by label (LONG_LABELS below);
# --all runs them too (CI does). Extra arguments go to ctest (e.g. -R allreduce, -L unit).
set -euo pipefail
cd "$(dirname "$0")"
# The labels a default run leaves out: `vm` boots QEMU guests under software emulation (minutes
# each); `slow` marks the longest runs of suites whose shorter cases run by default (the soak,
# the largest network-namespace layouts, the longest reliability loops, the nccl-tests build
# against an install).
LONG_LABELS="vm|slow"
all=0
if [ "${1:-}" = --all ]; then
  all=1
  shift
fi
total=$SECONDS
start=$SECONDS
bash scripts/build.sh
echo "=== build took $((SECONDS - start)) s"
select=()
[ "$all" = 1 ] || select=(-LE "$LONG_LABELS")
start=$SECONDS
status=0
ctest --test-dir build --output-on-failure -j "${CTEST_JOBS:-2}" "${select[@]}" "$@" || status=$?
echo "=== ctest took $((SECONDS - start)) s"
if [ "$status" -ne 0 ]; then
  # The failures' own output again, last, where a log's tail shows it.
  echo "=== failed tests, run again one at a time ==="
  ctest --test-dir build --rerun-failed --output-on-failure -j 1 || true
fi
if [ "$all" = 0 ]; then
  left=$(ctest --test-dir build -N -L "$LONG_LABELS" "$@" | sed -n 's/^Total Tests: //p')
  echo "=== left out: ${left:-0} tests labelled ${LONG_LABELS//|/ or } (CI runs them: ./test.sh --all," \
       "or ctest --test-dir build -L '$LONG_LABELS')"
fi
echo "=== ./test.sh took $((SECONDS - total)) s in all"
exit "$status"
