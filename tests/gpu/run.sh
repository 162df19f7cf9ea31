#!/usr/bin/env bash
# The GPU check in one command: builds the GPU tests from this tree with CUDA (tests/gpu as a
# project of its own, so hwloc, pugixml and GoogleTest need not be installed), runs them, then
# the library itself from the build carried beside the checkout (tests/gpu/prepare_carry.sh):
# the API-level GPU test, the perf tools and NVIDIA's nccl-tests with 2 and 4 ranks on the one
# GPU (threads; processes under MPI when MPI is on the machine), PyTorch's nccl backend on it,
# and the benchmark goal against the copy bandwidth (tests/gpu/memory_bound_goal.py). Prints a
# summary. Exit status 0: all passed on a GPU; 1: a build or test failure; 2: nothing ran on a
# GPU (no device). A missed benchmark goal is reported, not failed.
# The whole run keeps within WEFT_GPU_BUDGET_S seconds (default 470, under the 8 minutes a device
# machine's command is given): each step has a time limit of its own, cut to what is left; a step
# with no time left is recorded as not run (a failure). WEFT_GPU_BUILD chooses the build folder
# (default build-gpu); WEFT_GPU_ARCH the compute capability to build for (e.g. 90) where
# nvidia-smi cannot tell (default: CMake's list).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
build="${WEFT_GPU_BUILD:-build-gpu}"
started=$SECONDS
deadline=$((started + ${WEFT_GPU_BUDGET_S:-470}))

# Seconds a step may run: its own limit, cut to what is left of the run's budget (10 s are kept
# for the summary); at least 1, as `timeout 0` would not limit at all.
budget() {
  local left=$((deadline - SECONDS - 10))
  ((left < 1)) && left=1
  if ((left < $1)); then echo "$left"; else echo "$1"; fi
}

echo "== GPU"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader 2>/dev/null ||
  echo "(nvidia-smi not found)"
have_gpu=0
nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && have_gpu=1

# Machine code for this machine's GPU only, to keep the build short; the default list otherwise.
arch_flags=()
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .')
cap=${cap:-${WEFT_GPU_ARCH:-}}
if [[ "$cap" =~ ^[0-9]+$ ]]; then arch_flags=(-DCMAKE_CUDA_ARCHITECTURES="${cap}-real"); fi
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
compiler_launcher=()
if command -v ccache >/dev/null; then
  compiler_launcher=(-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

echo "== build ($build)"
mkdir -p "$build"
if ! timeout "$(budget 60)" cmake -S tests/gpu -B "$build" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "${arch_flags[@]}" "${compiler_launcher[@]}" \
  >"$build/configure.log" 2>&1; then
  tail -n 40 "$build/configure.log"
  echo "GPU CHECK: FAILED (configure; log in $build/configure.log)"
  exit 1
fi
if ! timeout "$(budget 240)" cmake --build "$build" -j "$(nproc)"; then
  echo "GPU CHECK: FAILED (build, or out of time)"
  exit 1
fi
echo "== build took $((SECONDS - started)) s"

echo "== tests"
log="$build/ctest.log"
timeout "$(budget 150)" ctest --test-dir "$build" -L cuda --output-on-failure -j 1 2>&1 |
  tee "$log"
status=${PIPESTATUS[0]}
# Adds a check's outcome to the log in ctest's words (exit 77: skipped; "notrun": no time left).
record() {
  local word="***Failed"
  [[ $3 == 0 ]] && word="Passed"
  [[ $3 == 77 ]] && word="Skipped"
  [[ $3 == notrun ]] && word="Not Run (out of time)"
  echo "Test #$1: $2 ... $word" >>"$log"
}
# Runs `command...` for at most LIMIT seconds (less when the budget has less left), its output
# shown and kept in FILE; sets rc to its exit status (124: out of time; notrun: no time left).
timed() {
  local limit=$1 file=$2
  shift 2
  local seconds
  seconds=$(budget "$limit")
  if ((seconds < 5)); then
    echo "(out of time, not run: $*)" | tee "$file"
    rc=notrun
    return
  fi
  timeout -k 5 "$seconds" "$@" 2>&1 | tee "$file"
  rc=${PIPESTATUS[0]}
}
# The libnccl.so.2 a binary loads under `env`'s settings, printed as evidence; true when it is the
# carried one (never NVIDIA's, e.g. PyTorch's or CUDA's lib64, which RUNPATH may name).
loads_carried_nccl() {
  local binary=$1
  shift
  local loaded
  loaded=$(env "$@" ldd "$binary" | awk '$1 == "libnccl.so.2" {print $3}')
  echo "   $(basename "$binary"): libnccl.so.2 => ${loaded:-not found}"
  [[ -n "$loaded" && "$(realpath "$loaded")" == "$(realpath gpu-carry/lib/libnccl.so.2)" ]]
}
# A perf table's outcome: the exit status, made 1 when its footer does not report 0 wrong values
# (both the perf tools and nccl-tests print "# Out of bounds values : 0 OK").
table_rc() {
  if [[ $1 == 0 ]] && ! grep -qE '^# Out of bounds values *: 0 OK' "$2"; then
    echo 1
  else
    echo "$1"
  fi
}

# The collective of a perf tool, as memory_bound_goal.py names it: all_reduce_perf -> allreduce.
collective_of() {
  local name=${1%_perf}
  echo "${name//_/}"
}

# Where nvidia-smi is missing, the copy-bandwidth program tells whether there is a GPU (77: none).
if [[ $have_gpu == 0 && -x "$build/d2d_bandwidth" ]] &&
  timeout 30 "$build/d2d_bandwidth" >/dev/null 2>&1; then
  have_gpu=1
fi
goal_tables=()
rm -f "$build/goal.txt" "$build/d2d.txt"
if [[ -x gpu-carry/bin/device_calls_gpu_test && $have_gpu == 0 ]]; then
  echo "(no GPU here: the carried build's checks are skipped)"
elif [[ -x gpu-carry/bin/device_calls_gpu_test ]]; then
  echo "== carried build ($(cat gpu-carry/COMMIT 2>/dev/null || echo unknown commit))"
  # The carried binaries load the carried libnccl.so.2 and the libraries it needs first.
  carried_env=(LD_LIBRARY_PATH="$PWD/gpu-carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  timed 120 "$build/device_calls.txt" env "${carried_env[@]}" gpu-carry/bin/device_calls_gpu_test
  cat "$build/device_calls.txt" >>"$log"
  record 900 device_calls_gpu_test "$rc"
  # The GPU's copy bandwidth, the reference of the goal below.
  if [[ -x "$build/d2d_bandwidth" ]]; then
    timeout 30 "$build/d2d_bandwidth" | tee "$build/d2d.txt"
  fi
  # Sizes 8 B to 256 MiB (the goal's size), each checked (-c 1); few iterations, as the budget
  # holds every tool and rank count.
  sweep=(-b 8 -e 256M -f 2 -c 1 -n 5 -w 2)

  echo "== perf tools: ranks as threads on the one GPU, device memory"
  # They link the library under its own name, libweft.so.0 (the same sources as libnccl.so.2).
  env "${carried_env[@]}" ldd gpu-carry/bin/all_reduce_perf | grep -E 'lib(weft|nccl)\.' |
    sed 's/^[[:space:]]*/   all_reduce_perf: /'
  for tool in all_reduce_perf all_gather_perf; do
    for ranks in 2 4; do
      out="$build/${tool}_t${ranks}.txt"
      timed 50 "$out" env "${carried_env[@]}" gpu-carry/bin/$tool "${sweep[@]}" -t "$ranks"
      rc=$(table_rc "$rc" "$out")
      if [[ $rc == 0 ]] && ! grep -q "Buffers in device memory" "$out"; then rc=1; fi
      record "91${ranks}" "${tool}_t${ranks}" "$rc"
      goal_tables+=("$(collective_of "$tool"):$ranks:perf tools t$ranks:$out")
    done
  done

  # NVIDIA's nccl-tests, unmodified, on the carried library. Its thread mode gives thread t the
  # device NCCL_TESTS_DEVICE + t (src/common.cu) and checks it against the device count, so with
  # one GPU tests/gpu/one_gpu_ordinals.c is preloaded: it presents N ordinals that are all the
  # visible GPU (CUDA_VISIBLE_DEVICES=0 keeps them on the first GPU where there are several).
  tests_dir=gpu-carry/nccl-tests
  if [[ -x $tests_dir/bin/all_reduce_perf ]]; then
    echo "== nccl-tests: ranks as threads on the one GPU (-g 1 -t N)"
    for tool in all_reduce_perf all_gather_perf; do
      for ranks in 2 4; do
        out="$build/nccl_tests_${tool}_t${ranks}.txt"
        thread_env=("${carried_env[@]}" CUDA_VISIBLE_DEVICES=0 NCCL_TESTS_DEVICE=0
          WEFT_GPU_ORDINALS="$ranks" LD_PRELOAD="$PWD/$tests_dir/lib/libone_gpu_ordinals.so")
        if loads_carried_nccl "$tests_dir/bin/$tool" "${thread_env[@]}"; then
          timed 50 "$out" env "${thread_env[@]}" "$tests_dir/bin/$tool" "${sweep[@]}" \
            -g 1 -t "$ranks"
          rc=$(table_rc "$rc" "$out")
        else
          echo "not the carried libnccl.so.2: not run" | tee "$out"
          rc=1
        fi
        record "92${ranks}" "nccl_tests_${tool}_t${ranks}" "$rc"
        goal_tables+=("$(collective_of "$tool"):$ranks:nccl-tests t$ranks:$out")
      done
    done
  elif [[ -f $tests_dir/BUILD_FAILED ]]; then
    cat "$tests_dir/BUILD_FAILED"
    record 920 nccl_tests_build 1
  else
    echo "(no nccl-tests in gpu-carry: prepared without ../shared or by an older"
    echo " tests/gpu/prepare_carry.sh; nccl-tests is skipped)"
  fi

  if command -v python3 >/dev/null &&
    python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    timed 120 "$build/torch_nccl_check.txt" env "${carried_env[@]}" \
      python3 tests/gpu/torch_nccl_check.py --weft gpu-carry/lib/libnccl.so.2
    cat "$build/torch_nccl_check.txt" >>"$log"
    record 901 torch_nccl_check "$rc"
  else
    echo "(no PyTorch with CUDA here: the torch check is skipped)"
  fi

  # nccl-tests' MPI flavour, built here from the carried source, one process per rank, all on
  # GPU 0 (NCCL_TESTS_DEVICE=0: process p would otherwise take device p).
  echo "== nccl-tests: ranks as MPI processes on the one GPU (-g 1 -t 1)"
  mpi_bin="$build/nccl-tests-mpi"
  timed 150 "$build/nccl_tests_mpi_build.txt" tests/gpu/build_nccl_tests_mpi.sh gpu-carry \
    "$mpi_bin" "${cap:-90}"
  if [[ $rc == 0 ]]; then
    mpi_launcher=$(command -v mpirun || command -v mpiexec)
    mpi_env=("${carried_env[@]}" NCCL_TESTS_DEVICE=0)
    mpi_flags=()
    if "$mpi_launcher" --version 2>&1 | grep -q "Open MPI"; then
      # Open MPI: as root, more processes than cores allowed, and the settings passed on.
      mpi_env+=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
      mpi_flags=(--oversubscribe --bind-to none -x LD_LIBRARY_PATH -x NCCL_TESTS_DEVICE)
    fi
    for tool in all_reduce_perf all_gather_perf; do
      for ranks in 2 4; do
        out="$build/nccl_tests_mpi_${tool}_np${ranks}.txt"
        if loads_carried_nccl "$mpi_bin/$tool" "${mpi_env[@]}"; then
          timed 60 "$out" env "${mpi_env[@]}" "$mpi_launcher" -np "$ranks" "${mpi_flags[@]}" \
            "$mpi_bin/$tool" "${sweep[@]}" -g 1 -t 1
          rc=$(table_rc "$rc" "$out")
        else
          echo "not the carried libnccl.so.2: not run" | tee "$out"
          rc=1
        fi
        record "93${ranks}" "nccl_tests_mpi_${tool}_np${ranks}" "$rc"
        goal_tables+=("$(collective_of "$tool"):$ranks:nccl-tests MPI np$ranks:$out")
      done
    done
  elif [[ $rc != 77 ]]; then
    record 930 nccl_tests_mpi_build "$rc"
  fi

  echo "== benchmark goal: 256 MiB with several ranks on one GPU, against the memory-traffic bound"
  python3 tests/gpu/memory_bound_goal.py "$build/d2d.txt" "${goal_tables[@]}" |
    tee "$build/goal.txt"
else
  echo "(no gpu-carry/ beside the checkout: the library's own GPU checks are skipped;"
  echo " run tests/gpu/prepare_carry.sh where the library builds and carry gpu-carry)"
fi
passed=$(grep -cE 'Test +#[0-9]+: .* Passed' "$log")
failed=$(grep -cE 'Test +#[0-9]+: .*(\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception|Not Run)' "$log")
skipped=$(grep -cE 'Test +#[0-9]+: .*Skipped' "$log")
echo "== summary: $passed passed, $failed failed, $skipped skipped, $((SECONDS - started)) s in all"
[[ -f "$build/goal.txt" ]] && cat "$build/goal.txt"
if [[ $status -ne 0 || $failed -ne 0 ]]; then
  echo "GPU CHECK: FAILED"
  exit 1
fi
if [[ $passed -eq 0 ]]; then
  echo "GPU CHECK: NOTHING RAN ON A GPU (no CUDA device?)"
  exit 2
fi
echo "GPU CHECK: PASSED"
