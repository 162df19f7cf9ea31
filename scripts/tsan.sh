#!/usr/bin/env bash
# Builds Weft with ThreadSanitizer into ./build-tsan and runs the suites whose ranks are threads of
# one process: the executor (collectives over the local and shm transports), the transports'
# conformance, landing and wire tests, host streams, the API's thread paths and the bootstrap. Any
# race report fails the run. TSan cannot see synchronisation between processes, and its runtime
# cannot follow a fork from a threaded process (a rank forked after ncclGetUniqueId started the
# root's thread fails with "dup thread with used id"), so only thread-mode tests run here; the
# suites that fork ranks run under ASan (scripts/sanitize.sh) instead.
# tests/sanitizers/tsan.supp holds the reports that are not races, each with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DWEFT_ENABLE_CUDA=OFF "${launcher[@]}" \
  -DCMAKE_CXX_FLAGS="-O1 -g -fsanitize=thread -Wno-tsan" -DCMAKE_C_FLAGS="-O1 -g -fsanitize=thread" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" >/dev/null
targets=(collectives_test bootstrap_test transport_conformance_test tcp_wire_test landing_test
         shared_copy_test transport_choice_test host_stream_test lower_test api_errors_test
         repeated_calls_test straight_calls_test fan_broadcast_test landed_allreduce_test
         timeout_message_test rendezvous_threshold_test scratch_pool_test device_calls_test
         device_interp_test interp_launch_test)
cmake --build build-tsan -j "$(nproc)" --target "${targets[@]}"
# halt_on_error: the first report fails the suite with its stacks on screen.
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=4:suppressions=$PWD/tests/sanitizers/tsan.supp"
export WEFT_TIMEOUT_MS=120000
cd build-tsan

# Runs one suite and says how long it took.
suite() {
  local start=$SECONDS
  echo "=== tsan: $*"
  "$@"
  echo "=== tsan: $1 took $((SECONDS - start)) s"
}

suite ./tests/unit/exec/lower_test
suite ./tests/unit/core/host_stream_test
suite ./tests/unit/bootstrap/bootstrap_test --gtest_filter='-BootstrapMultiProcessTest.*'
suite ./tests/conformance/tcp_wire_test
suite ./tests/conformance/transport_choice_test
suite ./tests/conformance/landing_test
suite ./tests/conformance/shared_copy_test
suite ./tests/conformance/transport_conformance_test
suite ./tests/unit/core/api_errors_test
suite ./tests/unit/core/timeout_message_test
suite ./tests/unit/core/rendezvous_threshold_test
suite ./tests/unit/core/scratch_pool_test
suite ./tests/unit/core/repeated_calls_test
suite ./tests/unit/core/straight_calls_test
suite ./tests/unit/core/fan_broadcast_test
suite ./tests/unit/core/landed_allreduce_test
# Calls on device memory (stream threads of a fake driver, a worker per stream) and the device
# interpreter run on host threads.
suite ./tests/unit/cuda/device_calls_test
suite ./tests/unit/cuda/device_interp_test
# The interpreter launched through the driver table, several ranks per launch, on the fake
# driver's stream threads (this build has no kernel image: the test hands the fake its own).
suite ./tests/unit/cuda/interp_launch_test
# Every algorithm at sizes that cover one, two and more neighbours, odd and even.
suite ./tests/unit/core/collectives_test --gtest_filter='*n2_*:*n3_*:*n4_*:*n5_*:*n8_*'
