#!/usr/bin/env bash
# Builds Weft and runs the whole test suite (labels say what needs special hardware).
set -euo pipefail
cd "$(dirname "$0")"
start=$SECONDS
bash scripts/build.sh
echo "=== build took $((SECONDS - start)) s"
start=$SECONDS
if ! ctest --test-dir build --output-on-failure -j "${CTEST_JOBS:-2}" "$@"; then
  echo "=== ctest took $((SECONDS - start)) s"
  # The failures' own output again, last, where a log's tail shows it.
  echo "=== failed tests, run again one at a time ==="
  ctest --test-dir build --rerun-failed --output-on-failure -j 1 || true
  exit 1
fi
echo "=== ctest took $((SECONDS - start)) s"
