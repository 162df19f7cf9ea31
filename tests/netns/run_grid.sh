#!/usr/bin/env bash
# Runs grid_main across network-namespace hosts made by netns.sh:
#   run_grid.sh GRID_MAIN HOSTS PROCS_PER_HOST [RANKS_PER_PROC]
# Process p runs on host p / PROCS_PER_HOST with WEFT_HOST_ID set to that host's namespace.
# Exits 77 (skipped) where namespaces cannot be made.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
grid="$1" hosts="$2" per_host="$3" per_proc="${4:-1}"
exec "$here/netns.sh" run "$hosts" -- bash -c '
  set -u
  grid="$1" per_host="$2" per_proc="$3"
  read -r -a ns <<< "$WEFT_NETNS_HOSTS"
  procs=$(( ${#ns[@]} * per_host ))
  dir=$(mktemp -d)
  trap "rm -rf \"$dir\"" EXIT
  pids=()
  for ((p = 0; p < procs; p++)); do
    host=${ns[$((p / per_host))]}
    ip netns exec "$host" env WEFT_RANK=$p WEFT_WORLD_SIZE=$procs WEFT_RANKS_PER_PROC=$per_proc \
      WEFT_ID_FILE="$dir/id" WEFT_HOST_ID="$host" timeout 240 "$grid" &
    pids+=($!)
  done
  status=0
  for pid in "${pids[@]}"; do
    wait "$pid" || { s=$?; [ $status -ne 0 ] || status=$s; }
  done
  echo "netns grid: ${#ns[@]} hosts x $per_host processes x $per_proc ranks: status $status"
  exit $status
' grid "$grid" "$per_host" "$per_proc"
