#!/usr/bin/env bash
# Rehearses tests/gpu/run.sh without a GPU (WEFT_GPU_REHEARSAL): a carried folder made of this
# build's libnccl.so.2, weftrun and two perf tools, run on the fake CUDA driver, plus a stand-in
# gather_perf that fails, and hangs with two threads. Checks that the real cases pass on "device
# memory", that the failing and hanging ones are recorded as FAIL and HANG while the later steps
# still run, that the bandwidth step's tables reach the summary (BUSBW, GOAL, LATENCY lines), and
# that the verdict names the failures and says it was a rehearsal.
# Usage: rehearsal_check.sh FAKE_DRIVER LIBNCCL PERF_TOOLS_DIR WEFTRUN   Exit status 0: passed.
set -uo pipefail
if [[ $# -ne 4 ]]; then
  echo "usage: rehearsal_check.sh FAKE_DRIVER LIBNCCL PERF_TOOLS_DIR WEFTRUN" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "rehearsal_check: FAILED: $*"
  echo "--- output:"
  cat "$work/stdout"
  exit 1
}
carry=$work/carry
mkdir -p "$carry/bin" "$carry/lib" "$work/out"
ln -s "$2" "$carry/lib/libnccl.so.2"
for t in all_reduce_perf all_gather_perf alltoall_perf; do ln -s "$3/$t" "$carry/bin/$t"; done
ln -s "$4" "$carry/bin/weftrun"
cat >"$carry/bin/gather_perf" <<'TOOL'
#!/bin/sh
# Stand-in: hangs with -t 2, fails otherwise.
case " $* " in *" -t 2 "*) exec sleep 60 ;; esac
echo "stand-in failure" >&2
exit 1
TOOL
chmod +x "$carry/bin/gather_perf"
WEFT_GPU_REHEARSAL=$1 WEFT_GPU_CARRY=$carry WEFT_GPU_TOOLS="all_reduce alltoall gather" \
  WEFT_GPU_MAX_BYTES=64K WEFT_GPU_SMALL_BYTES=64K OUT="$work/out" \
  timeout 400 bash "$here/run.sh" >"$work/stdout" 2>&1
rc=$?
out=$work/stdout
[[ $rc == 1 ]] || fail "exit status $rc, not 1 (the stand-in's failures)"
last=$(tail -n 1 "$out")
[[ $last == "REHEARSAL ON THE FAKE DRIVER, NOT A GPU: GPU CHECK: FAILED (2: "* ]] ||
  fail "verdict: $last"
[[ $last == *"correct_threads/gather_threads"*"correct_procs/gather_procs"* ]] ||
  fail "the verdict does not name the failed cases: $last"
expect() {
  grep -qE "$1" "$out" || fail "no line matching: $1"
}
for tool in all_reduce alltoall; do
  expect "^RESULT correct_threads ${tool}_threads PASS [0-9]+s n1 PASS, n2 PASS, n3 PASS, n4 PASS$"
  expect "^RESULT correct_procs ${tool}_procs PASS [0-9]+s n2 PASS, n3 PASS, n4 PASS$"
done
expect '^RESULT correct_threads gather_threads HANG [0-9]+s n1 FAIL, n2 HANG, n3 FAIL, n4 FAIL$'
expect '^RESULT correct_procs gather_procs FAIL [0-9]+s n2 FAIL, n3 FAIL, n4 FAIL$'
for n in 2 3 4; do
  expect "^RESULT bandwidth all_reduce_t$n PASS "
  expect "^RESULT bandwidth all_gather_t$n PASS "
  expect "^BUSBW allreduce t$n 8 busbw=[0-9.e+-]+ time=[0-9.e+-]+$"
  expect "^LATENCY allreduce t$n 8B \\(perf tools t$n\\): [0-9.]+ us out of place"
  expect "^GOAL allgather t$n 256MiB \\(perf tools t$n\\): no 256 MiB result"
done
# The programs of the CUDA runtime find no device: skipped, not failed.
expect '^RESULT d2d d2d_bandwidth SKIP '
expect '^RESULT hazards same_stream SKIP '
expect '^RESULT nccl_tests nccl_tests_all_reduce_t2 SKIP '
grep -q '^# Buffers in device memory' "$work/out/gpu-check/cases/bandwidth_all_reduce_t2.txt" ||
  fail "the bandwidth table is not on (fake) device memory"
grep -q '^# Roofline: none (' "$work/out/gpu-check/cases/bandwidth_all_reduce_t2.txt" ||
  fail "no roofline line in the bandwidth table"
echo "rehearsal_check: passed"
