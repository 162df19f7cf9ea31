#!/usr/bin/env bash
# The long soak (issue 24): weft_soak for a while, nice'd, its output kept in a log.
#   tests/soak/soak.sh [--minutes M] [--calls N] [--seed X] [--max-ranks R] [--modes LIST]
#                      [--build DIR] [--log FILE] [-- weft_soak options...]
# Defaults: 10 minutes, a seed from the clock, 8 ranks, threads and processes, ./build.
# The last line is weft_soak's summary (SOAK SUMMARY ... result=PASS|FAIL); the exit status is
# weft_soak's. Ctest runs a short version (soak.short).
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
minutes=10 calls="" seed="" ranks=8 modes=threads,processes build="$here/build" log=""
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --calls) calls=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --max-ranks) ranks=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --log) log=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

binary="$build/tests/soak/weft_soak"
[[ -x "$binary" ]] || { echo "no $binary: build the weft_soak target first" >&2; exit 2; }
args=(--max-ranks "$ranks" --modes "$modes" --status-seconds 60)
if [[ -n "$calls" ]]; then args+=(--seconds 0 --calls "$calls"); else args+=(--seconds $((minutes * 60))); fi
[[ -n "$seed" ]] && args+=(--seed "$seed")
log=${log:-"$build/soak-$(date +%Y%m%d-%H%M%S).log"}
echo "soak: $binary ${args[*]} ${extra[*]:-} (log: $log)"
status=0
LD_LIBRARY_PATH="$build/src/api${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
  nice -n 10 "$binary" "${args[@]}" "${extra[@]}" >"$log" 2>&1 || status=$?
grep -E '^(FAIL|slow|flatness|errors)' "$log" | head -40 || true
tail -n 1 "$log"
exit "$status"
