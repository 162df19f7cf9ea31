#!/usr/bin/env bash
# The GPU check in one command, within 6 minutes of the GPU machine's time, its build included:
# nothing is compiled there. The library cannot be built on that machine (it has nvcc but none of
# the -dev libraries the library links), so tests/gpu/prepare_carry.sh builds everything here for
# its GPU (sm_90 machine code) into ./gpu-carry, which travels beside the checkout (the device
# tool's carry: ["gpu-carry"]), and this script only runs it. Steps, each with its own time limit
# (the table below; tests/gpu/check_budget.py checks their sum):
#   info           the GPU and the carried build
#   cuda_unit      the CUDA kernels, the device interpreter, CUDA IPC (carried test programs)
#   device_calls   calls on device memory through the API, 1-4 ranks in one process
#   d2d            the device-to-device copy rate, the reference of the bandwidth goal
#   correct_*      every collective (the perf tools, -c 1 on device buffers) with 1-4 ranks on the
#                  one GPU, as threads of one process and (2-4) as processes (weftrun)
#   hazards        ranks that share one stream, the legacy NULL stream,
#                  CUDA_DEVICE_MAX_CONNECTIONS=1, two processes on one GPU without MPS
#                  (tests/gpu/hazard_gpu_check.cu): each correct or a clear error, never a hang
#   bandwidth      allreduce and allgather, 2-4 ranks, 8 B to 256 MiB: busbw per size, the
#                  roofline columns, and the goals (memory_bound_goal.py)
#   nccl_tests     NVIDIA's nccl-tests built against Weft's libnccl.so.2, 2 and 4 ranks
#   torch          PyTorch's "nccl" backend on Weft's libnccl.so.2 (torch_nccl_check.py)
#   summary        tests/gpu/gpu_summary.py: the README block, then one RESULT line per case and
#                  the verdict, last
# Every case runs under `timeout`: one that fails or hangs is recorded (FAIL, HANG) and the rest
# still run. With WEFT_GPU_DRY_RUN=1, or where there is no GPU, every step goes through its logic
# without running anything and records its cases as SKIP (no GPU).
# WEFT_GPU_REHEARSAL=DRIVER rehearses the run without a GPU: the carried library and perf tools
# run on the fake CUDA driver DRIVER (tests/unit/cuda's weft_fake_stream_driver, host threads in
# place of a GPU), programs of the CUDA runtime find no device and skip, and the verdict says it
# was a rehearsal. For it: WEFT_GPU_CARRY (the carried folder, default gpu-carry), WEFT_GPU_TOOLS
# (the collectives' tools, default all nine), WEFT_GPU_MAX_BYTES and WEFT_GPU_SMALL_BYTES (the
# largest size of the bandwidth and correctness sweeps, default 256M and 8M).
# Output: the whole log and every case's output in $OUT/gpu-check when OUT is set (the device
# tool returns what is written there), else in build-gpu/.
# Exit status: 0 all passed on a GPU, 1 a failure, 2 nothing ran on a GPU. A missed benchmark goal
# is reported, not failed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
started=$SECONDS

# BEGIN STEP LIMITS: seconds per step; their sum is the run's longest time and must stay within
# 360 (6 minutes), which tests/gpu/check_budget.py checks by reading these lines. A case gets at
# most what is left of its step; a case with less than 3 s left is recorded NOTRUN.
declare -A limit=(
  [info]=5
  [cuda_unit]=30
  [device_calls]=25
  [d2d]=10
  [correct_threads]=45
  [correct_procs]=45
  [hazards]=40
  [bandwidth]=70
  [nccl_tests]=35
  [torch]=45
  [summary]=5
)
# END STEP LIMITS

logdir=${OUT:+$OUT/gpu-check}
logdir=${logdir:-build-gpu}
mkdir -p "$logdir/cases" || exit 1
results="$logdir/results.tsv"
: >"$results"
exec > >(tee "$logdir/run.log") 2>&1
tee_pid=$!

carry=${WEFT_GPU_CARRY:-gpu-carry}
rehearsal=${WEFT_GPU_REHEARSAL:-}
dry=0
[[ ${WEFT_GPU_DRY_RUN:-0} == 1 ]] && dry=1
have_gpu=0
if ((!dry)) && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then have_gpu=1; fi
if ((!dry)) && [[ -n $rehearsal ]]; then have_gpu=1; fi
skip_why="no GPU"
((dry)) && skip_why="no GPU (dry run)"

step=""
step_deadline=0
# Starts step $1: its deadline is now + its limit.
begin_step() {
  step=$1
  step_deadline=$((SECONDS + ${limit[$1]}))
  echo "== $1 (limit ${limit[$1]} s, $((SECONDS - started)) s so far)"
}
# Appends one case's outcome to the results: CASE STATUS SECONDS DETAIL (without a GPU the
# detail is why it was skipped; the case's file holds the command it would have run).
record() {
  local detail=${4:-}
  if ((dry || !have_gpu)); then detail="skipped ($skip_why)"; fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$step" "$1" "$2" "$3" "$detail" >>"$results"
  echo "   $1: $2 ($3 s) $detail"
}
# Runs `command...` for at most LIMIT seconds (less when the step has less left), its output in
# FILE; sets `status` (PASS, FAIL, HANG, SKIP, NOTRUN), `rc` and `took`. Exit status 77 is SKIP;
# 124/137 (killed by timeout) and 3 (the hazard check's own deadline) are HANG where HANG_RC
# says so (default: the timeout's). Without a GPU nothing runs: SKIP.
attempt() {
  local want=$1 file=$2
  shift 2
  took=0
  if ((dry || !have_gpu)); then
    echo "(not run: $skip_why) would run: $*" >"$file"
    status=SKIP rc=77
    return
  fi
  # 4 s of the step are kept for `timeout -k 3`'s grace and the clock's whole seconds, so that
  # a killed case still ends within its step's limit.
  local left=$((step_deadline - SECONDS - 4))
  ((left < want)) && want=$left
  if ((want < 3)); then
    echo "(not run: its step had no time left) $*" >"$file"
    status=NOTRUN rc=notrun
    return
  fi
  local t0=$SECONDS
  timeout -k 3 "$want" "$@" >"$file" 2>&1
  rc=$?
  took=$((SECONDS - t0))
  case $rc in
    0) status=PASS ;;
    77) status=SKIP ;;
    124 | 137)
      status=HANG
      echo "(killed at its $want s limit)" >>"$file"
      ;;
    *) status=FAIL ;;
  esac
  if [[ -n ${HANG_RC:-} && $rc == "$HANG_RC" ]]; then status=HANG; fi
  return 0
}
# The worst of two statuses: HANG, FAIL, NOTRUN, PASS, SKIP.
worst() {
  local order="SKIP PASS NOTRUN FAIL HANG" a b
  a=${order%%"$1"*}
  b=${order%%"$2"*}
  if ((${#a} >= ${#b})); then echo "$1"; else echo "$2"; fi
}
# A perf table's status: FAIL unless its footer reports 0 wrong values and its header says the
# buffers were in device memory (the perf tools; nccl-tests always uses device memory).
table_status() {
  local file=$1 device_line=$2
  [[ $status != PASS ]] && return
  grep -qE '^# Out of bounds values *: 0 OK' "$file" || status=FAIL
  if [[ $device_line == 1 ]] && ! grep -q '^# Buffers in device memory' "$file"; then
    status=FAIL
  fi
}
# The carried libraries first; CUDA_MPS_PIPE_DIRECTORY names an empty folder, so that no MPS
# daemon is reached even where one runs: processes on the GPU share it by time slices.
mps_free=$(mktemp -d)
carried_env=(LD_LIBRARY_PATH="$(realpath "$carry")/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  CUDA_MPS_PIPE_DIRECTORY="$mps_free")
[[ -n $rehearsal ]] && carried_env+=(WEFT_CUDA_DRIVER="$rehearsal")
# FAIL with a clear reason where the carried program $1 is missing on a GPU machine.
need_carried() {
  if ((dry || !have_gpu)) || [[ -x $1 ]]; then return 0; fi
  if [[ -n $rehearsal ]]; then
    record "$2" SKIP 0 "$1 is not in the rehearsal's carried folder"
  else
    record "$2" FAIL 0 "$1 is not in the carried build (run tests/gpu/prepare_carry.sh)"
  fi
  return 1
}

begin_step info
gpu_line=$(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total \
  --format=csv,noheader 2>/dev/null | head -n 1)
carry_commit=$(cat "$carry/COMMIT" 2>/dev/null || echo "none")
echo "   GPU: ${gpu_line:-none}; carried build: $carry_commit; checkout: $(git rev-parse \
  --short HEAD 2>/dev/null || echo unknown)"
if ((dry || !have_gpu)); then
  record gpu SKIP 0 "$skip_why"
elif [[ -n $rehearsal ]]; then
  record gpu SKIP 0 "rehearsal on the fake driver $rehearsal: no GPU"
elif [[ ! -f $carry/lib/libnccl.so.2 ]]; then
  record gpu FAIL 0 "$gpu_line; no $carry/lib/libnccl.so.2: run tests/gpu/prepare_carry.sh here"
else
  record gpu PASS 0 "$gpu_line; carried build $carry_commit"
fi

begin_step cuda_unit
for t in kernels_gpu_test:8 device_interp_gpu_test:14 cuda_ipc_gpu_test:8; do
  name=${t%%:*}
  need_carried "$carry/bin/$name" "$name" || continue
  attempt "${t##*:}" "$logdir/cases/$name.txt" env "${carried_env[@]}" "$carry/bin/$name"
  record "$name" "$status" "$took" "$(tail -n 1 "$logdir/cases/$name.txt")"
done

begin_step device_calls
if need_carried "$carry/bin/device_calls_gpu_test" device_calls_gpu_test; then
  attempt 25 "$logdir/cases/device_calls.txt" env "${carried_env[@]}" \
    "$carry/bin/device_calls_gpu_test"
  record device_calls_gpu_test "$status" "$took" "$(tail -n 1 "$logdir/cases/device_calls.txt")"
fi

begin_step d2d
d2d="$logdir/d2d.txt"
if need_carried "$carry/bin/d2d_bandwidth" d2d_bandwidth; then
  attempt 10 "$d2d" "$carry/bin/d2d_bandwidth"
  record d2d_bandwidth "$status" "$took" "$(head -n 1 "$d2d")"
fi

# Every collective with 1-4 ranks: one case per tool, its rank counts run one after another,
# each under its own limit; the case's status is the worst of them. As processes from 2 ranks
# (one process of one rank is the threads' first case).
read -r -a tools <<<"${WEFT_GPU_TOOLS:-all_reduce all_gather reduce_scatter broadcast reduce \
  alltoall sendrecv gather scatter}"
small=(-b 8 -e "${WEFT_GPU_SMALL_BYTES:-8M}" -f 32 -n 1 -w 1 -c 1)
for mode in threads procs; do
  begin_step "correct_$mode"
  for tool in "${tools[@]}"; do
    need_carried "$carry/bin/${tool}_perf" "${tool}_$mode" || continue
    case_status=SKIP detail="" case_took=0
    ranks=(1 2 3 4)
    [[ $mode == procs ]] && ranks=(2 3 4)
    for n in "${ranks[@]}"; do
      out="$logdir/cases/${tool}_${mode}_$n.txt"
      if [[ $mode == threads ]]; then
        attempt 8 "$out" env "${carried_env[@]}" "$carry/bin/${tool}_perf" "${small[@]}" -t "$n"
      else
        attempt 10 "$out" env "${carried_env[@]}" "$carry/bin/weftrun" -n "$n" \
          "$carry/bin/${tool}_perf" "${small[@]}"
      fi
      table_status "$out" 1
      case_status=$(worst "$case_status" "$status")
      case_took=$((case_took + took))
      detail+="n$n $status, "
    done
    record "${tool}_$mode" "$case_status" "$case_took" "${detail%, }"
  done
done

begin_step hazards
hazard_cases=("same_stream:same-stream 3" "null_stream:null-stream 3"
  "max_connections_1:own-streams 3" "processes_no_mps:processes 2")
for h in "${hazard_cases[@]}"; do
  name=${h%%:*}
  read -r which ranks <<<"${h#*:}"
  need_carried "$carry/bin/hazard_gpu_check" "$name" || continue
  extra=()
  [[ $name == max_connections_1 ]] && extra=(CUDA_DEVICE_MAX_CONNECTIONS=1)
  out="$logdir/cases/hazard_$name.txt"
  # The program's own deadline (6 s) reports a hang before the timeout (9 s) has to kill it.
  HANG_RC=3 attempt 9 "$out" env "${carried_env[@]}" "${extra[@]}" \
    "$carry/bin/hazard_gpu_check" "$which" "$ranks" 6
  record "$name" "$status" "$took" "$(grep -m1 '^hazard ' "$out" || tail -n 1 "$out")"
done

begin_step bandwidth
sweep=(-b 8 -e "${WEFT_GPU_MAX_BYTES:-256M}" -f 2 -n 10 -w 2 -c 1)
tables=()
for n in 2 4 3; do
  for tool in all_reduce all_gather; do
    need_carried "$carry/bin/${tool}_perf" "${tool}_t$n" || continue
    out="$logdir/cases/bandwidth_${tool}_t$n.txt"
    attempt 11 "$out" env "${carried_env[@]}" "$carry/bin/${tool}_perf" "${sweep[@]}" -t "$n"
    table_status "$out" 1
    record "${tool}_t$n" "$status" "$took" "$(grep -m1 '^# Roofline' "$out" | cut -c3-90)"
    tables+=("${tool//_/}:$n:perf tools t$n:$out")
  done
done
goal="$logdir/goal.txt"
python3 tests/gpu/memory_bound_goal.py "$d2d" "${tables[@]}" >"$goal" 2>&1

# NVIDIA's nccl-tests, unmodified, on the carried library. Its thread mode gives thread t the
# device NCCL_TESTS_DEVICE + t and checks it against the device count, so tests/gpu/
# one_gpu_ordinals.c is preloaded: it presents N ordinals that are all the one visible GPU.
begin_step nccl_tests
nt=$carry/nccl-tests
for tool in all_reduce_perf all_gather_perf; do
  for n in 2 4; do
    name="nccl_tests_${tool%_perf}_t$n"
    if ((!dry && have_gpu)) && [[ -z $rehearsal && -f $nt/BUILD_FAILED ]]; then
      record "$name" FAIL 0 "$(head -n 1 "$nt/BUILD_FAILED")"
      continue
    fi
    need_carried "$nt/bin/$tool" "$name" || continue
    out="$logdir/cases/$name.txt"
    thread_env=("${carried_env[@]}" CUDA_VISIBLE_DEVICES=0 NCCL_TESTS_DEVICE=0
      WEFT_GPU_ORDINALS="$n" LD_PRELOAD="$(realpath -m "$nt/lib/libone_gpu_ordinals.so")")
    # The libnccl.so.2 it loads must be the carried one (never NVIDIA's, which RUNPATH may name).
    loaded=$( ( ((dry || !have_gpu)) || env "${thread_env[@]}" ldd "$nt/bin/$tool") 2>/dev/null |
      awk '$1 == "libnccl.so.2" {print $3}')
    attempt 8 "$out" env "${thread_env[@]}" "$nt/bin/$tool" -b 8 -e "${WEFT_GPU_MAX_BYTES:-256M}" \
      -f 4 -n 5 -w 2 -c 1 -g 1 -t "$n"
    table_status "$out" 0
    if [[ $status == PASS && "$(realpath "${loaded:-/none}" 2>/dev/null)" != \
      "$(realpath "$carry/lib/libnccl.so.2" 2>/dev/null)" ]]; then
      status=FAIL
    fi
    record "$name" "$status" "$took" "libnccl.so.2 => ${loaded:-?}"
  done
done

# (The check exits 77, a SKIP, where PyTorch or its CUDA is missing.)
begin_step torch
out="$logdir/cases/torch.txt"
attempt 45 "$out" env "${carried_env[@]}" python3 tests/gpu/torch_nccl_check.py \
  --weft "$carry/lib/libnccl.so.2" --timeout 13
record torch_nccl "$status" "$took" "$(grep -E '^(ok|FAIL|skip)' "$out" | tr '\n' ';' |
  cut -c1-200)"

begin_step summary
rm -rf "$mps_free"
echo "   steps took $((SECONDS - started)) s; the log: $logdir/run.log, the cases' output:" \
  "$logdir/cases/"
title="$(date -u '+%Y-%m-%d %H:%M') UTC, ${gpu_line:-no GPU}, carried build $carry_commit"
rehearsal_flag=()
[[ -n $rehearsal ]] && rehearsal_flag=(--rehearsal)
timeout 5 python3 tests/gpu/gpu_summary.py --results "$results" --d2d "$d2d" --goal "$goal" \
  --title "$title" --readme-out "$logdir/readme_block.md" "${rehearsal_flag[@]}" \
  "${tables[@]/#/--table=}"
verdict=$?
case $verdict in
  0 | 1 | 2) ;;
  *)
    echo "GPU CHECK: FAILED (the summary exited with status $verdict)"
    verdict=1
    ;;
esac
# The log's tee ends with this script's output.
exec >&- 2>&-
wait "$tee_pid"
exit "$verdict"
