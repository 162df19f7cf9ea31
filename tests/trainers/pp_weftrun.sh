#!/bin/sh
# weft-train --pp under weftrun: 2 processes (GPipe) and 4 (1F1B), one stage each, log the same
# losses, to every digit of the CSV's loss and val_loss columns, as one process accumulating the
# same micro-batches. Skipped (77) without the bible-kjv package.
# usage: pp_weftrun.sh WEFTRUN WEFT_TRAIN SCRATCH_DIR
set -eu
weftrun=$1 train=$2 dir=$3
command -v bible >/dev/null 2>&1 || [ -f "$dir/kjv.txt" ] || { echo "no bible-kjv: skipped"; exit 77; }
mkdir -p "$dir"
args="--steps 4 --seq 16 --batch 8 --layers 4 --heads 2 --channels 16 --microbatches 8
      --text-cache $dir/kjv.txt"
"$train" $args --csv "$dir/one.csv" >/dev/null
"$weftrun" -n 2 --timeout 120 "$train" $args --pp 2 --schedule gpipe --csv "$dir/gpipe2.csv"
"$weftrun" -n 4 --timeout 120 "$train" $args --pp 4 --schedule 1f1b --csv "$dir/1f1b4.csv"
status=0
cut -d, -f1-3 "$dir/one.csv" >"$dir/one.losses"
for run in gpipe2 1f1b4; do
  cut -d, -f1-3 "$dir/$run.csv" >"$dir/$run.losses"
  if ! cmp "$dir/one.losses" "$dir/$run.losses"; then
    echo "$run differs from the single process:"; diff "$dir/one.losses" "$dir/$run.losses" || true
    status=1
  fi
done
rm -f "$dir"/*.csv "$dir"/*.losses
exit $status
