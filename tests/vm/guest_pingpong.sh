#!/bin/bash
# Guest side of the harness check: soft-RoCE on eth0, then ibv_rc_pingpong between the guests
# (guest 0 serves, guest 1 connects over RoCE v2, GID index 1 = the IPv4 address).
set -euo pipefail
source "$(dirname "$0")/guest_rxe.sh"
if [ "$WEFT_VM_INDEX" = 0 ]; then
  timeout 120 ibv_rc_pingpong -d rxe0 -g 1 -n 200
else
  # The server may still be booting: retry the connection until it listens.
  for attempt in $(seq 60); do
    timeout 60 ibv_rc_pingpong -d rxe0 -g 1 -n 200 "$WEFT_VM_PEER" && exit 0
    sleep 1
  done
  exit 1
fi
