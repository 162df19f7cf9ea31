#!/usr/bin/env bash
# Builds Weft with AddressSanitizer + UndefinedBehaviorSanitizer into ./build-asan and runs the
# core suites under it (the collective grid on threads and on processes, API error paths, the
# bootstrap, the transports' conformance and wire tests, tcp between processes, kernels and
# plans). Memory errors and undefined behaviour fail the run; leak checking is off
# because the topology probes dlclose libraries (libibverbs, NVML) whose allocations then belong
# to no module LSan can name (tests/sanitizers/lsan.supp covers the rest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DWEFT_ENABLE_CUDA=OFF "${launcher[@]}" \
  -DCMAKE_CXX_FLAGS="-O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" \
  -DCMAKE_C_FLAGS="-O1 -fsanitize=address,undefined -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
targets=(collectives_test api_errors_test multiproc_test bootstrap_test reduce_test algorithms_test
         plan_verifier_test msccl_xml_test msccl_library_test msccl_comm_test msccl_xml_replay
         host_stream_test repeated_calls_test straight_calls_test fan_broadcast_test
         timeout_message_test transport_conformance_test tcp_wire_test landing_test
         shared_copy_test transport_choice_test tcp_multiproc_test)
cmake --build build-asan -j "$(nproc)" --target "${targets[@]}"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0
export LSAN_OPTIONS=suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1
export WEFT_TIMEOUT_MS=60000
cd build-asan

# Runs one suite and says how long it took.
suite() {
  local start=$SECONDS
  echo "=== asan: $*"
  "$@"
  echo "=== asan: $1 took $((SECONDS - start)) s"
}

suite ./tests/unit/core/collectives_test --gtest_filter='*n1_*:*n2_*:*n3_*:*n5_*:*n8_ring*:*n16_tree*'
suite ./tests/unit/core/api_errors_test
suite ./tests/multiproc/multiproc_test
suite ./tests/unit/bootstrap/bootstrap_test
suite ./tests/unit/common/reduce_test
suite ./tests/unit/algorithms/algorithms_test
suite ./tests/unit/plan/plan_verifier_test
suite ./tests/unit/plan/msccl_xml_test
suite ./tests/unit/plan/msccl_library_test
suite ./tests/unit/plan/msccl_comm_test
suite ./tests/fuzz/msccl_xml_replay ../../shared/msccl-xml
suite ./tests/unit/core/host_stream_test
suite ./tests/unit/core/repeated_calls_test
suite ./tests/unit/core/straight_calls_test
suite ./tests/unit/core/fan_broadcast_test
suite ./tests/unit/core/timeout_message_test
suite ./tests/conformance/tcp_wire_test
suite ./tests/conformance/transport_choice_test
suite ./tests/conformance/landing_test
suite ./tests/conformance/shared_copy_test
suite ./tests/conformance/transport_conformance_test
suite ./tests/tcp/tcp_multiproc_test
# Suites that fork ranks take the unique id from a child process (tests/support/grid.cc), so the
# ranks are forked from a parent without threads: this toolchain's ASan allocator is not
# fork-safe (a child can inherit its lock held by another thread and hang in malloc).
# reliability/abort_blocked_call forks after its own ncclGetUniqueId, as a program would, and
# runs in the plain build only. ThreadSanitizer has the same fork limit.
