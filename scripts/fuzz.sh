#!/usr/bin/env bash
# Builds the libFuzzer targets with clang into ./build-fuzz and fuzzes each for a bounded time.
# The fuzz-labelled ctest tests say what runs and for how long (each fuzzer's -max_total_time
# beside its add_test); only the fuzzers and replay programs are built. A *_fuzzer target that no test runs is
# still fuzzed here, WEFT_FUZZ_SECONDS (default 30) from an empty corpus, so that a new target is
# never silently skipped. Crashes and sanitizer reports fail the run; libFuzzer writes the input
# that caused them into build-fuzz (crash-*, leak-*, timeout-*), replayable with
# `build-fuzz/<path>/<name>_fuzzer <file>`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DWEFT_ENABLE_CUDA=OFF -DWEFT_BUILD_FUZZERS=ON "${launcher[@]}" >/dev/null

# Every libFuzzer target, and the replay programs that write or replay their seeds. A fuzz test
# whose program is neither fails in ctest as not found, so it cannot pass unbuilt.
mapfile -t fuzzers < <(ninja -C build-fuzz -t targets all |
  sed -n 's|^\([A-Za-z0-9_./-]*/[A-Za-z0-9_]*_fuzzer\): CXX_EXECUTABLE_LINKER.*|\1|p' | sort -u)
mapfile -t replays < <(ninja -C build-fuzz -t targets all |
  sed -n 's|^[A-Za-z0-9_./-]*/\([A-Za-z0-9_]*_replay\): CXX_EXECUTABLE_LINKER.*|\1|p' | sort -u)
if [ ${#fuzzers[@]} -eq 0 ]; then
  echo "fuzz: no *_fuzzer target was configured (is clang's libFuzzer missing?)" >&2
  exit 1
fi
fuzzer_names=()
for f in "${fuzzers[@]}"; do fuzzer_names+=("$(basename "$f")"); done
cmake --build build-fuzz -j "$(nproc)" --target "${fuzzer_names[@]}" "${replays[@]}"

ctest --test-dir build-fuzz -L fuzz --output-on-failure -j "${CTEST_JOBS:-2}"

# The programs the fuzz tests ran (known to ctest once built).
mapfile -t test_programs < <(ctest --test-dir build-fuzz -N -L fuzz --show-only=json-v1 |
  python3 -c 'import json, os, sys
for t in json.load(sys.stdin)["tests"]:
    if "command" in t:
        print(os.path.basename(t["command"][0]))' | sort -u)
for f in "${fuzzers[@]}"; do
  name=$(basename "$f")
  printf '%s\n' "${test_programs[@]}" | grep -qx "$name" && continue
  echo "=== fuzz: $name has no fuzz test; ${WEFT_FUZZ_SECONDS:-30} s from an empty corpus"
  work="build-fuzz/untested_corpus/$name"
  mkdir -p "$work"
  (cd build-fuzz && "./$f" -max_total_time="${WEFT_FUZZ_SECONDS:-30}" -timeout=20 \
    -rss_limit_mb=2048 "../$work")
done
