#!/usr/bin/env bash
# The GPU check in one command: builds the GPU tests from this tree with CUDA (tests/gpu as a
# project of its own, so hwloc, pugixml and GoogleTest need not be installed), runs them and
# prints a summary. Exit status 0: all passed on a GPU; 1: a build or test failure; 2: nothing
# ran on a GPU (no device). Set WEFT_GPU_BUILD to choose the build folder (default build-gpu).
set -uo pipefail
cd "$(dirname "$0")/../.."
build="${WEFT_GPU_BUILD:-build-gpu}"
started=$SECONDS

echo "== GPU"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>/dev/null ||
  echo "(nvidia-smi not found)"

# Machine code for this machine's GPU only, to keep the build short; the default list otherwise.
arch_flags=()
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .')
if [[ "$cap" =~ ^[0-9]+$ ]]; then arch_flags=(-DCMAKE_CUDA_ARCHITECTURES="${cap}-real"); fi
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi

echo "== build ($build)"
mkdir -p "$build"
if ! cmake -S tests/gpu -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
     "${arch_flags[@]}" >"$build/configure.log" 2>&1; then
  tail -n 40 "$build/configure.log"
  echo "GPU CHECK: FAILED (configure; log in $build/configure.log)"
  exit 1
fi
if ! cmake --build "$build" -j "$(nproc)"; then
  echo "GPU CHECK: FAILED (build)"
  exit 1
fi
echo "== build took $((SECONDS - started)) s"

echo "== tests"
log="$build/ctest.log"
timeout 420 ctest --test-dir "$build" -L cuda --output-on-failure -j 1 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
# Adds a check's outcome to the log in ctest's words (exit 77: skipped).
record() {
  local word="***Failed"
  [[ $3 -eq 0 ]] && word="Passed"
  [[ $3 -eq 77 ]] && word="Skipped"
  echo "Test #$1: $2 ... $word" >>"$log"
}

# The library itself on the GPU, from the build carried beside the checkout
# (tests/gpu/prepare_carry.sh made it on a machine with the -dev libraries).
if [[ -x gpu-carry/bin/device_calls_gpu_test ]]; then
  echo "== carried build ($(cat gpu-carry/COMMIT 2>/dev/null || echo unknown commit))"
  export LD_LIBRARY_PATH="$PWD/gpu-carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  timeout 300 gpu-carry/bin/device_calls_gpu_test 2>&1 | tee -a "$log"
  record 900 device_calls_gpu_test "${PIPESTATUS[0]}"
  # The perf tools on device memory, several ranks on the one GPU, checked, to 256 MiB; and the
  # GPU's copy bandwidth they are set against.
  [[ -x "$build/d2d_bandwidth" ]] && "$build/d2d_bandwidth"
  for tool in all_reduce_perf all_gather_perf; do
    for ranks in 2 4; do
      out="$build/${tool}_t${ranks}.txt"
      timeout 120 gpu-carry/bin/$tool -b 8 -e 256M -f 4 -t "$ranks" -c 1 -n 5 -w 2 2>&1 | tee "$out"
      rc=${PIPESTATUS[0]}
      if [[ $rc -eq 0 ]] && ! grep -q "Buffers in device memory" "$out"; then rc=1; fi
      record "91${ranks}" "${tool}_t${ranks}" "$rc"
    done
  done
  if command -v python3 >/dev/null && python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    timeout 240 python3 tests/gpu/torch_nccl_check.py --weft gpu-carry/lib/libnccl.so.2 2>&1 |
      tee -a "$log"
    record 901 torch_nccl_check "${PIPESTATUS[0]}"
  else
    echo "(no PyTorch with CUDA here: the torch check is skipped)"
  fi
else
  echo "(no gpu-carry/ beside the checkout: the library's own GPU checks are skipped;"
  echo " run tests/gpu/prepare_carry.sh where the library builds and carry gpu-carry)"
fi
passed=$(grep -cE 'Test +#[0-9]+: .* Passed' "$log")
failed=$(grep -cE 'Test +#[0-9]+: .*(\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception|Not Run)' "$log")
skipped=$(grep -cE 'Test +#[0-9]+: .*Skipped' "$log")
echo "== summary: $passed passed, $failed failed, $skipped skipped, $((SECONDS - started)) s in all"
if [[ $status -ne 0 || $failed -ne 0 ]]; then
  echo "GPU CHECK: FAILED"
  exit 1
fi
if [[ $passed -eq 0 ]]; then
  echo "GPU CHECK: NOTHING RAN ON A GPU (no CUDA device?)"
  exit 2
fi
echo "GPU CHECK: PASSED"
