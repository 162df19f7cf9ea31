#!/usr/bin/env bash
# The TCP / multi-host benchmark (perf/results/2026-11-22-tcp-multi-host.md), everything in one
# run so the ratios compare numbers taken side by side:
#   A. two network-namespace hosts whose links are shaped to RATE (default 1gbit), HOSTRANKS ranks
#      each (default 3): Weft's allreduce (the selector's choice, and the flat ring), Gloo's
#      allreduce algorithms, and iperf3 both ways on the same link;
#   B. plain loopback: the stream test of ../shared/peers (phys_bench, built from its source),
#      raw TCP between two processes one way and both ways (tcp_pair_bench), and a 2-rank
#      tcp-only Weft allreduce at 64 MiB, interleaved REPEAT times (best of each kept).
#
#   perf/tcp/bench_multihost.sh [BUILD]      (root: network namespaces; BUILD default build)
# Writes BUILD/perf/tcp/bench-<time>/{*.txt,summary.txt} and prints the summary.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
rate="${RATE:-1gbit}"
hostranks="${HOSTRANKS:-3}"
repeat="${REPEAT:-3}"
peers="${PEERS:-$repo/../shared/peers}"
out="$build/perf/tcp/bench-$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$out"
weftrun="$build/perf/weftrun"
allreduce="$build/perf/all_reduce_perf"
gloo="$build/perf/tcp/gloo_allreduce_bench"
pair="$build/perf/tcp/tcp_pair_bench"
netrun="$repo/tests/netns/run_weftrun.sh"
for f in "$weftrun" "$allreduce" "$pair"; do
  [ -x "$f" ] || { echo "missing $f: build first (ninja -C $build perf tcp_pair_bench)" >&2; exit 2; }
done
sweep=(-b 1M -e 128M -f 2 -n 5 -w 2)
echo "bench_multihost: writing $out"
{
  echo "date: $(date -u)"
  echo "git: $(git -C "$repo" rev-parse --short HEAD 2> /dev/null || echo '?')"
  echo "host: $(uname -srm), $(nproc) cpus; load: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "rate: $rate, ranks per host: $hostranks"
} > "$out/about.txt"

# ---- A. shaped link between two namespace hosts ----
if command -v iperf3 > /dev/null; then
  "$repo/tests/netns/netns.sh" run 2 --rate "$rate" -- bash -c '
    set -- $WEFT_NETNS_HOSTS
    ip netns exec "$2" iperf3 -s -1 -D > /dev/null; sleep 0.5
    ip netns exec "$1" iperf3 -c 198.18.0.2 -t 5 --bidir' > "$out/iperf3.txt" 2>&1 || true
fi
export WEFTRUN_TIMEOUT=900
"$netrun" --rate "$rate" 2 "$hostranks" "$weftrun" "$allreduce" "${sweep[@]}" \
  > "$out/weft_auto.txt" 2>&1 || echo "weft (auto) failed: see $out/weft_auto.txt"
NCCL_ALGO=ring "$netrun" --rate "$rate" 2 "$hostranks" "$weftrun" "$allreduce" "${sweep[@]}" \
  > "$out/weft_ring.txt" 2>&1 || echo "weft (ring) failed: see $out/weft_ring.txt"
if [ -x "$gloo" ]; then
  "$netrun" --rate "$rate" 2 "$hostranks" "$weftrun" "$gloo" "${sweep[@]}" \
    -a ring,ring_chunked,halving_doubling,new_bcube > "$out/gloo.txt" 2>&1 ||
    echo "gloo failed: see $out/gloo.txt"
  # Gloo's new-API ring stalls tens of ms per message here: small sizes only, or it takes hours.
  "$netrun" --rate "$rate" 2 "$hostranks" "$weftrun" "$gloo" -b 1M -e 4M -f 2 -n 2 -w 1 \
    -a new_ring >> "$out/gloo.txt" 2>&1 || echo "gloo new_ring failed: see $out/gloo.txt"
else
  echo "gloo_allreduce_bench not built (install libgloo-dev and re-run cmake)" > "$out/gloo.txt"
fi

# ---- B. loopback ----
phys="$build/perf/tcp/phys_bench"
if [ ! -x "$phys" ] && [ -f "$peers/src/phys_bench.cpp" ]; then
  g++ -O3 -march=native -std=c++17 -pthread -o "$phys" "$peers/src/phys_bench.cpp"
fi
: > "$out/loopback.txt"
for ((i = 0; i < repeat; i++)); do
  [ -x "$phys" ] && "$phys" 2>&1 | grep "tcp loopback  stream" >> "$out/loopback.txt"
  "$pair" 2 >> "$out/loopback.txt"
  NCCL_SHM_DISABLE=1 WEFT_LOCAL_DISABLE=1 "$weftrun" -n 2 "$allreduce" -b 64M -e 64M -n 20 -w 3 \
    | grep -E '^ +67108864' | sed 's/^/weft tcp allreduce 2 ranks: /' >> "$out/loopback.txt"
done

# ---- summary ----
/usr/bin/python3 - "$out" "$rate" <<'EOF' | tee "$out/summary.txt"
import re, sys, os
out, rate = sys.argv[1], sys.argv[2]
m = re.match(r"([\d.]+)([kmg]?)bit", rate)
link = float(m.group(1)) * {"": 1e-9, "k": 1e-6, "m": 1e-3, "g": 1}[m.group(2)] / 8  # GB/s
def weft(path):
    rows = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and f[8] == "0":
            rows[int(f[0])] = (float(f[7]), float(f[11]))  # out-of-place, in-place busbw
    return rows
def gloo(path):
    rows = {}
    for line in open(path):
        f = line.split()
        if len(f) == 6 and f[0].isdigit() and f[5] == "0":
            rows.setdefault(int(f[0]), {})[f[1]] = float(f[4])
    return rows
big = lambda rows: {s: v for s, v in rows.items() if s >= 16 << 20}
w, r = weft(f"{out}/weft_auto.txt"), weft(f"{out}/weft_ring.txt")
print(f"A. 2 hosts x {os.environ.get('HOSTRANKS', '3')} ranks, links shaped to {rate} = {link:.4f} GB/s")
for line in open(f"{out}/iperf3.txt") if os.path.exists(f"{out}/iperf3.txt") else []:
    if "receiver" in line and ("TX-C" in line or "RX-C" in line):
        print("   iperf3 " + " ".join(line.split()[1:]))
g = gloo(f"{out}/gloo.txt")
print(f"   {'size':>10} {'weft busbw':>11} {'(in-place)':>10} {'weft ring':>10} {'gloo best':>10} {'(algo)':>17} {'weft/link':>9} {'weft/gloo':>9}")
worst_link = worst_gloo = None
for s in sorted(w):
    best = max(g.get(s, {}).items(), key=lambda kv: kv[1], default=(None, 0.0))
    wb = w[s][0]
    rl = wb / link
    rg = wb / best[1] if best[1] else float("nan")
    print(f"   {s:>10} {wb:>11.3f} {w[s][1]:>10.3f} {r.get(s, (0, 0))[0]:>10.3f} {best[1]:>10.3f} {str(best[0]):>17} {rl:>9.2f} {rg:>9.2f}")
    if s >= 16 << 20:
        worst_link = rl if worst_link is None else min(worst_link, rl)
        if best[1]:
            worst_gloo = rg if worst_gloo is None else min(worst_gloo, rg)
print(f"   at >= 16 MiB: weft busbw >= {worst_link:.2f} x link rate (target 0.90), "
      f">= {worst_gloo if worst_gloo else float('nan'):.2f} x Gloo's best (target 1.50)")
stream, one, both, wl = [], [], [], []
for line in open(f"{out}/loopback.txt"):
    f = line.split()
    if "stream" in line: stream.append(float(f[-2]))
    elif "one direction" in line: one.append(float(f[-2]))
    elif "both directions" in line: both.append(float(f[-4]))
    elif line.startswith("weft tcp allreduce"): wl.append(max(float(f[12]), float(f[16])))
print("B. loopback, best of", len(wl))
if stream: print(f"   ../shared/peers stream (one way):       {max(stream):.2f} GB/s")
if one: print(f"   tcp_pair_bench one way / both ways:     {max(one):.2f} / {max(both):.2f} GB/s each way")
if wl:
    print(f"   weft tcp allreduce 2 ranks 64 MiB busbw: {max(wl):.2f} GB/s")
    if stream: print(f"   weft / stream: {max(wl) / max(stream):.2f} (target 0.70)")
    if both: print(f"   weft / raw both-ways TCP (its bound: N bytes each way): {max(wl) / max(both):.2f}")
EOF
