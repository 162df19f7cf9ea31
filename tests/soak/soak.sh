#!/usr/bin/env bash
# The long soak: weft_soak for a while, nice'd, its output kept in a log.
#   tests/soak/soak.sh [--minutes M] [--round-minutes R] [--calls N] [--seed X] [--max-ranks R]
#                      [--modes LIST] [--build DIR] [--log FILE] [-- weft_soak options...]
# Defaults: 10 minutes in one round, a seed from the clock, 8 ranks, threads and processes,
# ./build. With --round-minutes, the time is spent in rounds of that length (seeds X, X+1, ...):
# a round that crashes loses only its own figures, and the next one goes on. Prints each
# round's summary (SOAK SUMMARY ... result=PASS|FAIL) and the totals; exits 1 when any round
# failed or crashed. Ctest runs a short version (soak.short).
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
minutes=10 round_minutes="" calls="" seed="" ranks=8 modes=threads,processes build="$here/build"
log=""
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --round-minutes) round_minutes=$2; shift 2 ;;
    --calls) calls=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --max-ranks) ranks=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --log) log=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

binary="$build/tests/soak/weft_soak"
[[ -x "$binary" ]] || { echo "no $binary: build the weft_soak target first" >&2; exit 2; }
seed=${seed:-$(date +%s)}
log=${log:-"$build/soak-$(date +%Y%m%d-%H%M%S).log"}
: >"$log"
run() {  # run <seed> <weft_soak time or call options...>
  local s=$1 status=0
  shift
  echo "soak: nice -n 10 $binary --max-ranks $ranks --modes $modes --seed $s $* ${extra[*]:-}" |
    tee -a "$log"
  LD_LIBRARY_PATH="$build/src/api${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    nice -n 10 "$binary" --max-ranks "$ranks" --modes "$modes" --seed "$s" --status-seconds 60 \
    "$@" "${extra[@]}" >>"$log" 2>&1 || status=$?
  if ((status > 128)); then
    echo "soak: seed $s: weft_soak died of signal $((status - 128))" | tee -a "$log"
  fi
  return "$status"
}

failed=0 crashed=0 rounds=0
if [[ -n "$calls" ]]; then
  run "$seed" --seconds 0 --calls "$calls" || failed=1
else
  round=$(( ${round_minutes:-$minutes} * 60 ))
  deadline=$((SECONDS + minutes * 60))
  while ((SECONDS + 30 < deadline)); do
    left=$((deadline - SECONDS))
    status=0
    run $((seed + rounds)) --seconds $((left < round ? left : round)) || status=$?
    ((status > 128)) && crashed=$((crashed + 1))
    ((status != 0)) && failed=1
    rounds=$((rounds + 1))
  done
fi
grep -E '^(FAIL|slow|flatness|errors)' "$log" | head -60 || true
grep -E '^SOAK SUMMARY' "$log" || true
# Totals over the rounds that finished (a crashed round prints no summary).
grep -E '^SOAK SUMMARY' "$log" | awk -v crashed="$crashed" '
  { for (i = 1; i <= NF; ++i) { split($i, kv, "="); if (kv[1] == "jobs" || kv[1] == "calls" ||
      kv[1] == "kills" || kv[1] == "aborts" || kv[1] == "hangs" || kv[1] == "wrong" ||
      kv[1] == "failed_jobs" || kv[1] == "timeout_detections") sum[kv[1]] += kv[2];
      if (kv[1] == "seconds") secs += kv[2];
      if (kv[1] == "survived") { if (kills_seen++ % 2 == 0) ks += kv[2]; else as += kv[2] } } }
  END { printf "SOAK TOTAL rounds=%d crashed_rounds=%d seconds=%d jobs=%d calls=%d kills=%d " \
        "kills_survived=%d aborts=%d aborts_survived=%d timeout_detections=%d hangs=%d wrong=%d " \
        "failed_jobs=%d\n", NR, crashed, secs, sum["jobs"], sum["calls"], sum["kills"], ks,
        sum["aborts"], as, sum["timeout_detections"], sum["hangs"], sum["wrong"],
        sum["failed_jobs"] }' | tee -a "$log"
echo "log: $log"
exit "$failed"
