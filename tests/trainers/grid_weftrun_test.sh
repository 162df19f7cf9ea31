#!/bin/sh
# weft-train's one code path in processes (trainers/compose):
#   1. weftrun -n 8 --dp 2 --tp 2 --pp 2 logs the losses of the one-process run (1e-5, float);
#   2. checkpoints written by 2x2x1 runs under ZeRO-1 and ZeRO-3 (each dp rank contributing its
#      shard), resumed by 1x1x2 and by 2x1x1 (ZeRO-2), continue with the losses of the
#      uninterrupted run (1e-12, double);
#   3. four ranks started torchrun-style (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), one killed
#      with SIGKILL mid-training: the others exit nonzero within 10 s, each naming the peer that
#      failed its call (Weft names a dead peer by rank and pid; a rank whose call was with a
#      survivor that aborted first reads "rank N failed and abandoned the operation"), at least
#      one of them the killed rank's pid; --resume of the last periodic checkpoint on two ranks
#      gives the uninterrupted run's loss at the resumed step.
# Skipped (77) without the bible-kjv package. usage: grid_weftrun_test.sh WEFTRUN WEFT_TRAIN DIR
set -u
weftrun=$1 train=$2 dir=$3
mkdir -p "$dir" || exit 1
command -v bible >/dev/null 2>&1 || [ -s "$dir/kjv.txt" ] || { echo "no bible-kjv: skipped"; exit 77; }
args="--seq 8 --batch 8 --layers 2 --heads 2 --channels 16 --eval-batches 1 --microbatches 2
      --text-cache $dir/kjv.txt"
fail() { echo "FAIL: $*"; exit 1; }
# compare A.csv B.csv FIRST_STEP TOLERANCE: B's losses from FIRST_STEP on against A's rows.
compare() {
  awk -F, -v first="$3" -v tol="$4" -v what="$2 vs $1" '
    FNR == 1 { next }
    NR == FNR { want[$1] = $2; next }
    $1 >= first { n++; d = $2 - want[$1]; if (d < 0) d = -d
      if (!($1 in want) || d > tol * want[$1]) { print what " step " $1 ": " $2 " vs " want[$1]; bad = 1 } }
    END { if (n == 0) { print what ": no steps"; bad = 1 }; exit bad }' "$1" "$2"
}
rm -rf "$dir/ck" "$dir/kill" "$dir"/*.csv

# 1. 2x2x2 on 8 processes against one.
# shellcheck disable=SC2086
"$train" $args --steps 3 --csv "$dir/one.csv" >"$dir/one.log" 2>&1 || { cat "$dir/one.log"; fail "one process"; }
# shellcheck disable=SC2086
"$weftrun" -n 8 --timeout 120 "$train" $args --steps 3 --dp 2 --tp 2 --pp 2 \
  --csv "$dir/222.csv" >"$dir/222.log" 2>&1 || { cat "$dir/222.log"; fail "2x2x2"; }
compare "$dir/one.csv" "$dir/222.csv" 0 1e-5 || fail "2x2x2 losses"
echo "2x2x2: the one-process losses"

# 2. Checkpoint of one layout resumed by others.
f64="$args --dtype f64"
# shellcheck disable=SC2086
"$train" $f64 --steps 6 --csv "$dir/whole.csv" >/dev/null 2>&1 || fail "uninterrupted f64 run"
for zero in 1 3; do
  rm -rf "$dir/ck"
  # shellcheck disable=SC2086
  "$weftrun" -n 4 --timeout 120 "$train" $f64 --steps 3 --dp 2 --tp 2 --zero $zero \
    --checkpoint "$dir/ck" >"$dir/ck.log" 2>&1 || { cat "$dir/ck.log"; fail "2x2x1 ZeRO-$zero checkpoint"; }
  for layout in "--pp 2" "--dp 2 --zero 2"; do
    # shellcheck disable=SC2086
    "$weftrun" -n 2 --timeout 120 "$train" $f64 --steps 6 $layout --resume "$dir/ck" \
      --csv "$dir/resumed.csv" >"$dir/resumed.log" 2>&1 || { cat "$dir/resumed.log"; fail "resume $layout"; }
    compare "$dir/whole.csv" "$dir/resumed.csv" 3 1e-12 || fail "ZeRO-$zero resumed by $layout"
    rm -f "$dir/resumed.csv"
    echo "2x2x1 ZeRO-$zero checkpoint resumed by $layout: the uninterrupted losses"
  done
done

# 3. A rank killed mid-training.
port=$((20000 + $$ % 30000))
pids=""
for rank in 0 1 2 3; do
  # shellcheck disable=SC2086
  RANK=$rank WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$train" $f64 --steps 1000000 \
    --dp 2 --pp 2 --checkpoint "$dir/kill" --checkpoint-every 2 >"$dir/kill.$rank.log" 2>&1 &
  pids="$pids $!"
done
victim=$(echo $pids | cut -d' ' -f3)
tries=0
until [ -s "$dir/kill/checkpoint.weft" ]; do
  tries=$((tries + 1))
  [ $tries -gt 600 ] && { kill -9 $pids 2>/dev/null; fail "no checkpoint within 60 s"; }
  sleep 0.1
done
sleep 0.3
kill -9 "$victim"
killed_at=$(date +%s)
rank=0
for pid in $pids; do
  if [ "$pid" != "$victim" ]; then
    tries=0
    while kill -0 "$pid" 2>/dev/null; do
      tries=$((tries + 1))
      [ $tries -gt 100 ] && { kill -9 $pids 2>/dev/null; fail "rank $rank still running 10 s after the kill"; }
      sleep 0.1
    done
    wait "$pid" && fail "rank $rank exited 0 after its peer died"
    # The victim (rank 2) is named by its pid where a link saw its process go, or as the rank
    # that failed where the failure reached this rank through another survivor.
    grep -Eq "pid $victim|failed and abandoned|rank 2 failed" "$dir/kill.$rank.log" ||
      { cat "$dir/kill.$rank.log"; fail "rank $rank: no message naming the failed peer"; }
  fi
  rank=$((rank + 1))
done
wait "$victim" 2>/dev/null
grep -q "^weft-train.*pid $victim" "$dir"/kill.[013].log || fail "no rank named pid $victim"
echo "rank 2 killed: the others exited nonzero within $(($(date +%s) - killed_at + 1)) s:"
grep -h "^weft-train" "$dir"/kill.[013].log
# The checkpoint's step, then two more steps on two ranks against the uninterrupted run.
# shellcheck disable=SC2086
from=$("$train" $f64 --steps 0 --resume "$dir/kill" | sed -n 's/.*from step \([0-9]*\).*/\1/p')
[ -n "$from" ] || fail "cannot read the checkpoint's step"
# shellcheck disable=SC2086
"$train" $f64 --steps $((from + 2)) --csv "$dir/whole.csv" >/dev/null 2>&1 || fail "uninterrupted run"
# shellcheck disable=SC2086
"$weftrun" -n 2 --timeout 120 "$train" $f64 --steps $((from + 2)) --pp 2 --resume "$dir/kill" \
  --csv "$dir/after.csv" >"$dir/after.log" 2>&1 || { cat "$dir/after.log"; fail "resume after the kill"; }
compare "$dir/whole.csv" "$dir/after.csv" "$from" 1e-12 || fail "resumed after the kill"
echo "resumed at step $from on 2 ranks: the uninterrupted losses"
rm -rf "$dir/ck" "$dir/kill" "$dir"/*.csv
