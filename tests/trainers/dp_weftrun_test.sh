#!/bin/sh
# Usage: dp_weftrun_test.sh WEFT_TRAIN WEFTRUN WORKDIR
# weft-train --dp 2 in two processes under weftrun, plain DP and ZeRO-3, prints the losses of
# the one-process run step by step (within 1e-5 relative, float32). Exit 77 (skipped) without
# the KJV text.
set -u
train=$1
weftrun=$2
work=$3
mkdir -p "$work" || exit 1
if [ ! -s "$work/kjv.txt" ] && ! command -v bible >/dev/null 2>&1; then
  echo "bible (package bible-kjv) is not installed: skipped"
  exit 77
fi
args="--model gpt --steps 4 --seq 16 --batch 4 --layers 2 --heads 2 --channels 32"
args="$args --eval-batches 1 --text-cache $work/kjv.txt"
# shellcheck disable=SC2086
"$train" $args >"$work/one.log" || { cat "$work/one.log"; exit 1; }
awk '/^step /{print $2, $4}' "$work/one.log" >"$work/one.losses"
for zero in 0 3; do
  # shellcheck disable=SC2086
  "$weftrun" -n 2 "$train" $args --dp 2 --zero "$zero" --bucket-mb 0.01 >"$work/dp$zero.log" ||
    { cat "$work/dp$zero.log"; exit 1; }
  awk '/^step /{print $2, $4}' "$work/dp$zero.log" >"$work/dp$zero.losses"
  paste -d ' ' "$work/one.losses" "$work/dp$zero.losses" | awk -v zero="$zero" '
    { n++; d = $2 - $4; if (d < 0) d = -d;
      if ($1 != $3 || d > 1e-5 * $2) { print "ZeRO-" zero " step " $1 ": loss " $4 " vs " $2; bad = 1 } }
    END { if (n != 4) { print "ZeRO-" zero ": " n " steps, wanted 4"; bad = 1 }
          if (bad) exit 1; print "ZeRO-" zero ": 4 losses match the one-process run" }' ||
    { cat "$work/one.log" "$work/dp$zero.log"; exit 1; }
done
