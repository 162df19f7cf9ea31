#!/bin/bash
# Guest side of a benchmark run (not a ctest; on the host:
#   tests/vm/run_pair.sh build/vm/image build/vm/bench tests/vm/guest_bench.sh \
#     "$PWD/build/tests/ib/ib_two_hosts" 64   (host paths must be absolute)
# ). On the same soft-RoCE devices and virtual link, one after the
# other: perftest's ib_write_bw (RDMA WRITE, 1 MiB messages), Weft's ib transport (a checked
# stream of 128 KiB slots, then the same bytes by reference into a landing: zero copy) and Weft's
# tcp transport (the checked stream; tests/ib/two_hosts_main.cc bench).
# Guest 0 receives (and serves ib_write_bw), guest 1 sends.
# Usage: guest_bench.sh TWO_HOSTS_BINARY MIB
set -uo pipefail
source "$(dirname "$0")/guest_rxe.sh"
ulimit -l unlimited
export NCCL_SOCKET_IFNAME=eth0
me=$WEFT_VM_INDEX
iters=$2  # 1 MiB messages in MIB MiB
echo "== ib_write_bw -d rxe0 -x 1 -s 1048576 -n $iters"
if [ "$me" = 0 ]; then
  timeout 300 ib_write_bw -d rxe0 -x 1 -s 1048576 -n "$iters" --report_gbits
else
  for attempt in $(seq 60); do
    timeout 300 ib_write_bw -d rxe0 -x 1 -s 1048576 -n "$iters" --report_gbits "$WEFT_VM_PEER" &&
      break
    sleep 1
  done
fi
# Weft's rank 0 sends: guest 1 holds rank 0 here, so the direction matches ib_write_bw's.
rank=$((1 - me))
idfile() { if [ "$me" = 1 ]; then echo "/tmp/work/$1"; else echo "$WEFT_VM_HOSTWORK/guest1/$1"; fi; }
echo "== weft ib"
NCCL_NET=IB timeout 300 "$1" bench ib "$rank" "$(idfile ib.id)" "$2"
echo "== weft tcp"
NCCL_NET=Socket timeout 300 "$1" bench tcp "$rank" "$(idfile tcp.id)" "$2"
