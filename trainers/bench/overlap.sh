#!/usr/bin/env bash
# The overlap benchmark of data parallelism: the MLP under weft-train on two hosts
# made of network namespaces (tests/netns/netns.sh), one rank each, talking tcp over a veth link
# shaped with tc tbf so that one step's gradient reduction takes about as long as its backward.
# Runs the step with the gradient buckets reduced after backward (--overlap 0) and during it,
# for each pair of runs (no overlap, then overlap)
#   comm     the reductions after backward in the no-overlap run (packing, reduce-scatter,
#            all-gather): bound by the shaped link, so the same for both runs
#   compute  forward + backward, each run its own (the machine's load changes between runs)
#   step     forward + backward + the communication it did not hide (the step less AdamW)
#   ratio    step / max(compute, comm): 1 is perfect overlap, (compute + comm) / max none
# and the median over the pairs of the overlapped ratio.
#
#   trainers/bench/overlap.sh [BUILD_DIR]          (default: build; needs root and iproute2)
#
# Environment: OVERLAP_RATE (a tc rate such as 200mbit; default: calibrated), OVERLAP_STEPS
# (timed steps after 3 warm-up steps, default 10), OVERLAP_REPEATS (pairs, default 3),
# OVERLAP_HIDDEN, OVERLAP_BATCH. Calibration
# runs the no-overlap step unshaped, takes backward as 2/3 of forward + backward (two GEMMs per
# linear layer against one) and sets the rate that moves the gradients in that time: each of two
# ranks sends half the gradient bytes in the reduce-scatter and half in the all-gather.
# Exit status 77: namespaces cannot be made here.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
weftrun="$build/perf/weftrun"
bench="$build/trainers/weft-train"
netns="$root/tests/netns/netns.sh"
for f in "$weftrun" "$bench"; do
  [ -x "$f" ] || { echo "overlap.sh: $f not built" >&2; exit 2; }
done
if ! "$netns" check; then exit 77; fi

steps="${OVERLAP_STEPS:-10}"
repeats="${OVERLAP_REPEATS:-3}"
warmup=3
# Many equal layers, each its own bucket: only the last bucket's reduction (one layer) is left
# when backward ends. The narrow first layer keeps the 784-wide input layer small.
hidden="${OVERLAP_HIDDEN:-64,512,512,512,512,512,512,512,512}"
batch="${OVERLAP_BATCH:-1024}"
prefix="wovl$$"
"$netns" up 2 --prefix "$prefix" > /dev/null
trap '"$netns" down --prefix "$prefix"' EXIT

# shape RATE: tbf on both directions of both host links (as netns.sh --rate does).
shape() {
  for i in 0 1; do
    ip netns exec "$prefix-h$i" tc qdisc replace dev eth0 root tbf rate "$1" burst 256kb \
      latency 200ms
    ip netns exec "$prefix-sw" tc qdisc replace dev "p$i" root tbf rate "$1" burst 256kb \
      latency 200ms
  done
}

# run [flags...]: prints the run's output (rank 0's lines) and a closing line
#   timing steps N step_ms S compute_ms C comm_wait_ms W optimizer_ms O
# of the means over the steps after the warm-up, from weft-train's step lines (comm_s: the
# communication the computation did not hide; compute_s includes AdamW, optimizer_s): step_ms
# the whole step, compute_ms forward + backward (compute less AdamW); fails if the run fails.
run() {
  local out
  out="$(nice -n 10 "$weftrun" -H "$prefix-h0:1,$prefix-h1:1" --netns --timeout 600 "$bench" \
    --model mlp --dp 2 --hidden "$hidden" --batch "$batch" --steps $((steps + warmup)) \
    --bucket-mb 0.5 --lr 1e-3 "$@")"
  echo "$out"
  awk -v warmup="$warmup" '$1 == "step" && $2 >= warmup {
      for (i = 3; i < NF; ++i) v[$i] = $(i + 1)
      n++; step += v["comm_s"] + v["compute_s"]; compute += v["compute_s"] - v["optimizer_s"]
      comm += v["comm_s"]; opt += v["optimizer_s"] }
    END { if (n) printf "timing steps %d step_ms %.3f compute_ms %.3f comm_wait_ms %.3f optimizer_ms %.3f\n",
      n, 1e3 * step / n, 1e3 * compute / n, 1e3 * comm / n, 1e3 * opt / n }' <<< "$out"
}

# field NAME LINE: the number after NAME in a "timing ..." line.
field() { awk -v name="$1" '{for (i = 1; i < NF; ++i) if ($i == name) print $(i + 1)}' <<< "$2"; }

rate="${OVERLAP_RATE:-}"
if [ -z "$rate" ]; then
  out="$(run --overlap 0)"
  params="$(awk '/^mlp:/ {print $2}' <<< "$out")"
  compute_ms="$(field compute_ms "$(grep '^timing' <<< "$out")")"
  rate="$(awk -v p="$params" -v c="$compute_ms" \
    'BEGIN {printf "%dkbit", p * 4 * 8 / (c * 2 / 3 / 1000) / 1000}')"
  echo "calibration: $params parameters, forward + backward ${compute_ms} ms unshaped: rate $rate"
fi
shape "$rate"

# Pairs of runs, no overlap then overlap, so both see about the same load on a shared machine.
echo "rate $rate, $repeats pairs of $steps timed steps"
ratios=""
for ((k = 1; k <= repeats; k++)); do
  baseline="$(run --overlap 0 | grep '^timing')"
  overlapped="$(run | grep '^timing')"
  echo "pair $k no overlap: $baseline"
  echo "pair $k overlap:    $overlapped"
  line="$(awk -v c0="$(field compute_ms "$baseline")" -v m="$(field comm_wait_ms "$baseline")" \
    -v s0="$(field step_ms "$baseline")" -v o0="$(field optimizer_ms "$baseline")" \
    -v c1="$(field compute_ms "$overlapped")" -v s1="$(field step_ms "$overlapped")" \
    -v o1="$(field optimizer_ms "$overlapped")" 'BEGIN {
      b0 = c0 > m ? c0 : m; b1 = c1 > m ? c1 : m
      printf "%.3f %.3f comm %.1f ms (comm/backward %.2f); no overlap: compute %.1f step %.1f ms = %.3f x max; overlap: compute %.1f step %.1f ms = %.3f x max\n",
        (s1 - o1) / b1, (s0 - o0) / b0, m, m / (c0 * 2 / 3), c0, s0 - o0, (s0 - o0) / b0,
        c1, s1 - o1, (s1 - o1) / b1
    }')"
  echo "pair $k ${line#* * }"
  ratios="$ratios${line%% *}"$'\n'
done
sort -n <<< "${ratios%$'\n'}" | awk '{r[NR] = $1} END {
  printf "median step with overlap / max(compute, comm): %.3f (of %d pairs; min %.3f, max %.3f)\n",
    r[int((NR + 1) / 2)], NR, r[1], r[NR]
}'
