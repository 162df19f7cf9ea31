#!/usr/bin/env bash
# Test "hosts" made of Linux network namespaces on one machine.
#
#   netns.sh run K [--rate RATE] [--mtu MTU] [--prefix P] -- command [args...]
#       makes K hosts, runs the command in the root namespace with the environment below, tears
#       everything down (also on failure or a signal), and exits with the command's status.
#   netns.sh up K [--rate RATE] [--mtu MTU] [--prefix P]   makes K hosts and leaves them up
#   netns.sh down [--prefix P]                              removes what `up` made
#   netns.sh check                                          exit 0 if namespaces can be made here
#
# Layout: namespace P-sw holds a bridge; host i is namespace P-h<i> whose eth0 (198.18.0.<i+1>/24)
# is one end of a veth pair, the other end plugged into the bridge. Only 198.18.0.0/15 (the range
# reserved for network benchmarks, RFC 2544) is ever used. With --rate (a tc rate such as 1gbit),
# both directions of every host link are shaped to it: egress of eth0 and of its bridge port.
#
# The command sees WEFT_NETNS_HOSTS="P-h0 P-h1 ..." and WEFT_NETNS_ADDRS="198.18.0.1 ...";
# `ip netns exec P-h<i> cmd` runs cmd on host i.
#
# Exit status 77 (and a message on stderr) means namespaces cannot be made on this machine: the
# ctest wrapper reports the test as skipped.
set -euo pipefail

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

prefix="weft$$"
rate=""
mtu=""
need_cmd() { command -v "$1" > /dev/null 2>&1; }

can_make_namespaces() {
  if [ "$(id -u)" -ne 0 ]; then echo "netns: not root (namespaces need CAP_NET_ADMIN)"; return 1; fi
  for c in ip tc; do
    need_cmd "$c" || { echo "netns: '$c' not found (install iproute2)"; return 1; }
  done
  local probe="weftprobe$$"
  if ! ip netns add "$probe" 2> /dev/null; then
    echo "netns: 'ip netns add' failed (no permission, or no network namespace support)"
    return 1
  fi
  local ok=0
  ip -n "$probe" link add v0 type veth peer name v1 2> /dev/null || ok=1
  ip netns del "$probe" 2> /dev/null || true
  [ $ok -eq 0 ] || { echo "netns: cannot create veth pairs"; return 1; }
}

down() {
  local p="$1"
  for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep -E "^${p}-(h[0-9]+|sw)$" || true); do
    # Processes still inside would keep the namespace's devices alive.
    for pid in $(ip netns pids "$ns" 2> /dev/null || true); do kill -9 "$pid" 2> /dev/null || true; done
    ip netns del "$ns" 2> /dev/null || true
  done
}

shape() {  # shape NS DEV: tbf at $rate on DEV's egress inside NS
  [ -n "$rate" ] || return 0
  # A burst of a few milliseconds at the rate keeps tbf accurate at gigabit speeds.
  ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$rate" burst 256kb latency 50ms
}

up() {
  local k="$1"
  [ "$k" -ge 1 ] && [ "$k" -le 200 ] || { echo "netns: host count must be 1..200" >&2; exit 2; }
  local sw="${prefix}-sw"
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  for ((i = 0; i < k; i++)); do
    local ns="${prefix}-h$i"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip -n "$ns" link add eth0 type veth peer name "p$i" netns "$sw"
    [ -z "$mtu" ] || { ip -n "$ns" link set eth0 mtu "$mtu"; ip -n "$sw" link set "p$i" mtu "$mtu"; }
    ip -n "$ns" addr add "198.18.0.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$sw" link set "p$i" master br0
    ip -n "$sw" link set "p$i" up
    shape "$ns" eth0
    shape "$sw" "p$i"
  done
  # Wait until every host reaches host 0 (the bridge may take a moment to forward).
  for ((i = 1; i < k; i++)); do
    local tries=0
    until ip netns exec "${prefix}-h$i" ping -c1 -W1 198.18.0.1 > /dev/null 2>&1; do
      tries=$((tries + 1))
      if [ $tries -gt 20 ]; then
        echo "netns: host $i cannot reach host 0" >&2
        return 1
      fi
      need_cmd ping || break
      sleep 0.1
    done
  done
}

cmd="${1:-}"
[ -n "$cmd" ] || usage
shift
k=0
if [ "$cmd" = run ] || [ "$cmd" = up ]; then
  [ $# -ge 1 ] || usage
  k="$1"
  shift
fi
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate="$2"; shift 2 ;;
    --mtu) mtu="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done

case "$cmd" in
  check)
    if msg=$(can_make_namespaces); then exit 0; fi
    echo "$msg" >&2
    exit 77
    ;;
  up)
    if ! msg=$(can_make_namespaces); then echo "$msg" >&2; exit 77; fi
    trap 'down "$prefix"' ERR
    up "$k"
    echo "$prefix"
    ;;
  down)
    down "$prefix"
    ;;
  run)
    [ $# -ge 1 ] || usage
    if ! msg=$(can_make_namespaces); then echo "SKIPPED: $msg" >&2; exit 77; fi
    trap 'down "$prefix"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    up "$k"
    hosts="" addrs=""
    for ((i = 0; i < k; i++)); do
      hosts="$hosts ${prefix}-h$i"
      addrs="$addrs 198.18.0.$((i + 1))"
    done
    export WEFT_NETNS_HOSTS="${hosts# }" WEFT_NETNS_ADDRS="${addrs# }"
    set +e
    "$@"
    status=$?
    set -e
    exit $status
    ;;
  *) usage ;;
esac
