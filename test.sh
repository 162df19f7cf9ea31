#!/usr/bin/env bash
# Builds Weft and runs the whole test suite (labels say what needs special hardware).
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "${CTEST_JOBS:-2}" "$@"
