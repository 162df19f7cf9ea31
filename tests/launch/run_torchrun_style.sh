#!/usr/bin/env bash
# Starts N processes of a program the way torchrun does (RANK, WORLD_SIZE, LOCAL_RANK,
# MASTER_ADDR=127.0.0.1, MASTER_PORT=a free port) with no WEFT_ID_FILE, so that they must find
# each other through MASTER_ADDR:MASTER_PORT, and fails unless every process exits 0 and prints
# EXPECT (a regular expression; "" for no check) once per process or once from rank 0 (ONCE=1).
#   run_torchrun_style.sh N EXPECT prog [args...]
# Inside tests/netns/netns.sh (WEFT_NETNS_HOSTS and WEFT_NETNS_ADDRS set), process r runs on
# namespace host r % K with WEFT_HOST_ID naming it, and MASTER_ADDR is host 0's address.
set -euo pipefail
n="$1" expect="$2"
shift 2
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# A port that was free a moment ago; rank 0 binds it again within a second.
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
unset WEFT_ID_FILE WEFT_RANK WEFT_WORLD_SIZE WEFT_MASTER_ADDR WEFT_MASTER_PORT OMPI_COMM_WORLD_RANK \
  OMPI_COMM_WORLD_SIZE PMI_RANK PMI_SIZE SLURM_PROCID SLURM_STEP_NUM_TASKS
read -r -a hosts <<<"${WEFT_NETNS_HOSTS:-}"
read -r -a addrs <<<"${WEFT_NETNS_ADDRS:-127.0.0.1}"
pids=()
for ((r = 0; r < n; r++)); do
  place=()
  local_rank=$r
  if [ "${#hosts[@]}" -gt 0 ]; then
    host="${hosts[$((r % ${#hosts[@]}))]}"
    place=(ip netns exec "$host" env WEFT_HOST_ID="$host")
    local_rank=$((r / ${#hosts[@]}))
  fi
  "${place[@]}" env RANK=$r WORLD_SIZE=$n LOCAL_RANK=$local_rank MASTER_ADDR="${addrs[0]}" \
    MASTER_PORT=$port timeout 120 "$@" >"$out/$r.log" 2>&1 &
  pids+=($!)
done
status=0
for ((r = 0; r < n; r++)); do
  if ! wait "${pids[$r]}"; then
    echo "process $r of $n failed:"
    status=1
  fi
  sed "s/^/[$r] /" "$out/$r.log"
done
[ "$status" = 0 ] || exit 1
if [ -n "$expect" ]; then
  found="$(cat "$out"/*.log | grep -cE "$expect" || true)"
  want=$n
  [ "${ONCE:-0}" = 1 ] && want=1
  if [ "$found" != "$want" ]; then
    echo "expected '$expect' $want times, found it $found times"
    exit 1
  fi
fi
echo "torchrun-style launch of $n processes passed"
