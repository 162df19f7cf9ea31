#!/bin/bash
# Guest side of vm.ib_two_hosts: Weft over soft-RoCE between the two guests (NCCL_NET=IB).
#   1. the transport pair (tests/ib/two_hosts_main.cc): guest 0 holds rank 0, guest 1 rank 1,
#      ending with rank 1 killed and rank 0 failing within 5 s naming it
#   2. the collective correctness grid (tests/netns/grid_main.cc) with PROCS processes of RANKS
#      ranks in each guest, for every "PROCSxRANKS" layout given
#   3. a communicator of 2 ranks per guest whose process in guest 1 is killed: guest 0's ranks
#      fail within 5 s naming a killed rank
# Process 0 lives in guest 0 and writes each unique id into its /tmp/work, which guest 1 reads
# through the host ($WEFT_VM_HOSTWORK/guest0).
# Usage: guest_two_hosts.sh TWO_HOSTS_BINARY GRID_BINARY LAYOUT...
set -uo pipefail
source "$(dirname "$0")/guest_rxe.sh"
ulimit -l unlimited
export NCCL_NET=IB NCCL_SOCKET_IFNAME=eth0
two_hosts=$1 grid=$2
shift 2
me=$WEFT_VM_INDEX
idpath() { if [ "$me" = 0 ]; then echo "/tmp/work/$1"; else echo "$WEFT_VM_HOSTWORK/guest0/$1"; fi; }
status=0
# check NAME EXPECTED_STATUS STATUS
check() {
  if [ "$3" = "$2" ]; then echo "== $1: ok"; else echo "== $1: exit $3, expected $2"; status=1; fi
}

expect=0
[ "$me" = 1 ] && expect=137  # rank 1 kills itself at the end
timeout 400 "$two_hosts" pair "$me" "$(idpath pair.id)"
check "transport pair" $expect $?

for layout in "$@"; do
  procs=${layout%x*} ranks=${layout#*x}
  pids=()
  for ((p = 0; p < procs; p++)); do
    WEFT_RANK=$((me * procs + p)) WEFT_WORLD_SIZE=$((2 * procs)) WEFT_RANKS_PER_PROC=$ranks \
      WEFT_ID_FILE=$(idpath "grid$layout.id") WEFT_HOST_ID=guest$me timeout 400 "$grid" &
    pids+=($!)
  done
  rc=0
  for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
  check "grid, $procs processes x $ranks ranks per guest" 0 $rc
done

timeout 120 "$two_hosts" kill "$me" 2 2 "$(idpath kill.id)" 1
check "communicator with a killed process" $expect $?
exit $status
