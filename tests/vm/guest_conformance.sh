#!/bin/bash
# Guest side of vm.ib_conformance: the transport conformance suite's ib cases, two ranks of one
# process on the guest's soft-RoCE device (rxe loopback), then the ib peer checks (forged setup
# messages, garbage control messages, setup timeout, doorbell, and last the port going down).
# Then zero copy: references, landings, registrations and hostile offers (LANDING_BINARY).
# Last, Weft's collective grid over its own network plugin (libnccl-net-weft.so loaded back),
# whose device 0 is then this rxe port: the plugin's ib flavour.
# Usage: guest_conformance.sh CONFORMANCE_BINARY PEER_CHECKS_BINARY LANDING_BINARY
#        [NET_PLUGIN_GRID_BINARY]
set -euo pipefail
source "$(dirname "$0")/guest_rxe.sh"
ulimit -l unlimited
export WEFT_TEST_IB=1
# The 1 GiB stream takes minutes under TCG (the later checks stream 256 MiB instead).
timeout 400 "$1" --gtest_filter='Transports/Conformance.*/ib*:-*OneGiBStream*'
timeout 200 "$3"
WEFT_TEST_IB_NETDEV=eth0 timeout 200 "$2"
if [ $# -ge 4 ]; then
  timeout 300 "$4" --gtest_filter='Processes/PluginLoop.*/p2'
fi
