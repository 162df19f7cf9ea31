#!/usr/bin/env bash
# Runs shrink_recovery across network-namespace hosts made by tests/netns/netns.sh:
#   run_shrink_netns.sh NETNS_SH SHRINK_RECOVERY MODE HOSTS PROCS_PER_HOST
# Process p is rank p on host p / PROCS_PER_HOST. In modes "death" and "unreachable" rank 1
# kills itself (status 137); every other rank must exit 0. Exits 77 (skipped) where namespaces cannot be made.
set -euo pipefail
netns="$1" prog="$2" mode="$3" hosts="$4" per_host="$5"
exec "$netns" run "$hosts" -- bash -c '
  set -u
  prog="$1" mode="$2" per_host="$3"
  read -r -a ns <<< "$WEFT_NETNS_HOSTS"
  procs=$(( ${#ns[@]} * per_host ))
  dir=$(mktemp -d)
  trap "rm -rf \"$dir\"" EXIT
  pids=()
  for ((p = 0; p < procs; p++)); do
    ip netns exec "${ns[$((p / per_host))]}" env WEFT_RANK=$p WEFT_WORLD_SIZE=$procs \
      WEFT_ID_FILE="$dir/id" timeout 240 "$prog" "$mode" "$procs" &
    pids+=($!)
  done
  status=0
  for ((p = 0; p < procs; p++)); do
    s=0
    wait "${pids[$p]}" || s=$?
    want=0
    case "$mode" in death|unreachable) [ $p -ne 1 ] || want=137 ;; esac
    if [ $s -ne $want ]; then
      echo "rank $p exited with $s, expected $want" >&2
      status=1
    fi
  done
  echo "netns shrink $mode: ${#ns[@]} hosts x $per_host processes: status $status"
  exit $status
' shrink "$prog" "$mode" "$per_host"
