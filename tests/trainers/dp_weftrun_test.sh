#!/bin/sh
# Usage: dp_weftrun_test.sh WEFT_TRAIN WEFTRUN WORKDIR
# weft-train --dp 2 in two processes under weftrun, in double: ZeRO-1, -2 and -3 and plain DP
# reducing after backward (--overlap 0) log losses identical to every digit (the CSV's %.17g
# step, loss and val_loss columns) to plain DP's with its buckets reduced during backward, which
# match the one-process run within 1e-12 relative; ZeRO-3 also with --pp 2 (four processes)
# against plain DP with --pp 2. Every rank prints its memory next to the ZeRO formula. Exit 77
# (skipped) without the KJV text.
set -u
train=$1
weftrun=$2
work=$3
mkdir -p "$work" || exit 1
if [ ! -s "$work/kjv.txt" ] && ! command -v bible >/dev/null 2>&1; then
  echo "bible (package bible-kjv) is not installed: skipped"
  exit 77
fi
args="--model gpt --steps 4 --seq 16 --batch 4 --layers 2 --heads 2 --channels 32 --dtype f64"
args="$args --eval-batches 1 --eval-every 2 --bucket-mb 0.01 --text-cache $work/kjv.txt"
fail() { echo "FAIL: $*"; exit 1; }
# run NAME PROCESSES FLAGS...: weft-train under weftrun; its step,loss,val_loss columns in NAME.losses.
run() {
  name=$1 n=$2
  shift 2
  # shellcheck disable=SC2086
  "$weftrun" -n "$n" --timeout 120 "$train" $args "$@" --csv "$work/$name.csv" >"$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; fail "$name"; }
  cut -d, -f1-3 "$work/$name.csv" >"$work/$name.losses"
}
rm -f "$work"/*.csv "$work"/*.losses
# shellcheck disable=SC2086
"$train" $args --csv "$work/one.csv" >"$work/one.log" 2>&1 || { cat "$work/one.log"; fail "one process"; }
run dp 2 --dp 2
awk -F, 'FNR == 1 { next } NR == FNR { want[$1] = $2; next }
  { n++; d = $2 - want[$1]; if (d < 0) d = -d; if (d > 1e-12 * want[$1]) { print "step " $1 ": " $2 " vs " want[$1]; bad = 1 } }
  END { if (n != 4) bad = 1; exit bad }' "$work/one.csv" "$work/dp.csv" || fail "--dp 2 against one process"
echo "--dp 2: the one-process losses"
for variant in "zero1 --zero 1" "zero2 --zero 2" "zero3 --zero 3" "no_overlap --overlap 0"; do
  name=${variant%% *}
  # shellcheck disable=SC2086
  run "$name" 2 --dp 2 ${variant#* }
  cmp "$work/dp.losses" "$work/$name.losses" || { diff "$work/dp.losses" "$work/$name.losses"; fail "$name"; }
  echo "--dp 2 ${variant#* }: bitwise plain DP's losses"
done
grep -q "ZeRO-3: Psi" "$work/zero3.log" || { cat "$work/zero3.log"; fail "no memory report"; }
run pp 4 --dp 2 --pp 2 --microbatches 2
run pp_zero3 4 --dp 2 --pp 2 --microbatches 2 --zero 3
cmp "$work/pp.losses" "$work/pp_zero3.losses" || fail "--pp 2 --zero 3"
echo "--dp 2 --pp 2 --zero 3: bitwise plain DP's losses"
grep "memory" "$work/pp_zero3.log"
rm -f "$work"/*.csv "$work"/*.losses
# The MLP on Fashion-MNIST (when installed): ZeRO-3 bitwise plain DP.
if [ -s /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  args="--model mlp --steps 3 --batch 16 --hidden 32,16 --dtype f64 --bucket-mb 0.01"
  run mlp 2 --dp 2
  run mlp_zero3 2 --dp 2 --zero 3
  cmp "$work/mlp.losses" "$work/mlp_zero3.losses" || fail "mlp --zero 3"
  echo "mlp --dp 2 --zero 3: bitwise plain DP's losses"
  rm -f "$work"/*.csv "$work"/*.losses
fi
