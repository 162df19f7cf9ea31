#!/usr/bin/env bash
# Configures and builds Weft into ./build (Release-with-debug-info by default).
# Usage: scripts/build.sh [--run] [TARGET ...]
#   --run    install only what the main job needs (scripts/install-deps.sh --run)
#   TARGET   build only these targets (default: everything, the test programs included)
# The test programs are configured where GoogleTest is installed. ccache, where installed, keeps
# compiled objects across clean rebuilds and clones.
set -euo pipefail
cd "$(dirname "$0")/.."
deps=()
if [ "${1:-}" = --run ]; then
  deps=(--run)
  shift
fi
bash scripts/install-deps.sh "${deps[@]}"
options=(-DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}")
if command -v ccache >/dev/null; then
  options+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
            -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
tests=OFF
dpkg-query -W -f='${Status}' libgtest-dev 2>/dev/null | grep -q "install ok installed" && tests=ON
options+=(-DWEFT_BUILD_TESTS=$tests)
cmake -S . -B build -G Ninja "${options[@]}" >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build -j "$(nproc)" "${targets[@]}"
