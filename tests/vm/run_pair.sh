#!/bin/bash
# Boots two QEMU guests (TCG) joined by a private virtual Ethernet and runs one script in each.
# Guest i (0 or 1) has eth0 at 198.18.0.(i+1)/24; the link is a TCP connection on the host's
# loopback between the two qemu processes (qemu's socket netdev), so there is no route out of it.
# A stream loses no frames (like RoCE over a lossless fabric): datagram sockets drop frames
# whenever the receiving qemu falls behind, and soft-RoCE's recovery from lost frames under
# emulation is unreliable. (qemu 7.2's newer "stream" netdev stalled for good mid-run.)
# The host's root is the guests' root (read-only 9p), so SCRIPT and the binaries it starts are
# host paths; each guest's /tmp/work is WORKDIR/guestI on the host (writable).
# The guest kernel skips its boot-time timer check (no_timer_check): under emulation on a busy
# host that check finds the timer too slow and panics ("IO-APIC + timer doesn't work").
#
# Usage: run_pair.sh VMDIR WORKDIR SCRIPT [ARGS...]
#   VMDIR    where prepare.sh put vmlinuz and initrd.gz (it is run first)
#   SCRIPT   runs in each guest as `bash SCRIPT ARGS` with WEFT_VM_INDEX, WEFT_VM_ADDR,
#            WEFT_VM_PEER (the other guest's address), WEFT_VM_GUESTS and WEFT_VM_HOSTWORK
#            (WORKDIR as a host path: guest J's /tmp/work is $WEFT_VM_HOSTWORK/guestJ, read-only,
#            in every guest) set, cwd /tmp/work
# Environment: WEFT_VM_TIMEOUT (seconds for the whole run, default 300), WEFT_VM_MEM (MiB per
# guest, default 768), WEFT_VM_CPUS (per guest, default 1), WEFT_VM_GUESTS (1 boots guest 0
# alone, for tests inside one guest; default 2).
# Exit: 0 when the script succeeded in both guests, 77 when a guest could not be booted (the
# test is skipped), 1 otherwise. A run whose emulated link stalled (the guest kernel's NIC
# watchdog fires) is booted once more, each boot with WEFT_VM_TIMEOUT seconds. Each guest's console.log, output.log and rc stay in WORKDIR.
set -uo pipefail
vmdir=${1:?usage: run_pair.sh VMDIR WORKDIR SCRIPT [ARGS...]}
work=${2:?usage: run_pair.sh VMDIR WORKDIR SCRIPT [ARGS...]}
script=${3:?usage: run_pair.sh VMDIR WORKDIR SCRIPT [ARGS...]}
shift 3
here=$(cd "$(dirname "$0")" && pwd)
timeout_s=${WEFT_VM_TIMEOUT:-300}
mem=${WEFT_VM_MEM:-768}
cpus=${WEFT_VM_CPUS:-1}
guests=${WEFT_VM_GUESTS:-2}
case $guests in 1 | 2) ;; *) echo "vm: WEFT_VM_GUESTS must be 1 or 2" >&2; exit 1 ;; esac
last=$((guests - 1))

"$here/prepare.sh" "$vmdir" || exit $?
vmdir=$(cd "$vmdir" && pwd)
script=$(cd "$(dirname "$script")" && pwd)/$(basename "$script")
mkdir -p "$work"
work=$(cd "$work" && pwd)
# The guests' /tmp is a tmpfs of their own: host folders under /tmp that the run reads (the
# checkout, the build tree, WORKDIR, the script and binary arguments) are bound back in at their
# host paths (guest_init's weft.keep), one entry per top-level folder of /tmp.
keep=()
for path in "$(cd "$here/../.." && pwd)" "$work" "$script" "$@"; do
  case $path in /tmp/?*) [ -e "$path" ] || continue ;; *) continue ;; esac
  top=/tmp/$(echo "${path#/tmp/}" | cut -d/ -f1)
  case $top in *[[:space:],]*) echo "vm: cannot share $top with the guests (a space or comma in its name)" >&2
                               exit 1 ;; esac
  case " ${keep[*]-} " in *" $top "*) ;; *) keep+=("$top") ;; esac
done
keeparg=
[ ${#keep[@]} -gt 0 ] && keeparg=" weft.keep=$(IFS=,; echo "${keep[*]}")"
# Unix socket paths are short-lived and must fit sun_path.
sockdir=$(mktemp -d /tmp/weft-vm.XXXXXX)
trap 'rm -rf "$sockdir"' EXIT

args=$(printf ' %q' "$@")
# A free loopback port for the link between two guests.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Boots the guests and waits for them. Returns 3 when a guest's kernel reported its virtual NIC's
# transmit queue stalled for good (the emulator's socket netdev stops moving frames now and then
# under load; the guest then sees no peer for the rest of the run), after stopping both guests.
boot_and_wait() {
  pids=()
  for i in $(seq 0 $last); do
    g=$work/guest$i
    rm -rf "$g"
    mkdir -p "$g"
    if [ "$guests" = 1 ]; then
      netdev="dgram,id=n0,local.type=unix,local.path=$sockdir/0,remote.type=unix,remote.path=$sockdir/1"
    elif [ "$i" = 0 ]; then
      netdev="socket,id=n0,listen=127.0.0.1:$port"
    else
      netdev="socket,id=n0,connect=127.0.0.1:$port"
      # The client fails at once where the server does not listen yet.
      for attempt in $(seq 100); do
        ss -Htln "sport = :$port" | grep -q . && break
        sleep 0.1
      done
    fi
    cat >"$g/run.sh" <<RUN
export WEFT_VM_PEER=198.18.0.$((2 - i)) WEFT_VM_GUESTS=$guests WEFT_VM_HOSTWORK=$(printf '%q' "$work")
cd /tmp/work
exec bash $(printf '%q' "$script")$args
RUN
    nice -n 10 timeout --kill-after=10 "$timeout_s" qemu-system-x86_64 \
      -accel tcg,thread=multi,tb-size=256 -cpu max -m "$mem" -smp "$cpus" \
      -nographic -no-reboot -kernel "$vmdir/vmlinuz" -initrd "$vmdir/initrd.gz" \
      -append "console=ttyS0 quiet panic=-1 no_timer_check rdinit=/init weft.index=$i weft.ip=198.18.0.$((i + 1))/24$keeparg" \
      -netdev "$netdev" \
      -device virtio-net-pci,netdev=n0,romfile=,mac=52:54:00:12:34:$((56 + i)) \
      -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap,id=hostroot \
      -virtfs "local,path=$g,mount_tag=work,security_model=none,id=work" \
      </dev/null >"$g/console.log" 2>&1 &
    pids+=($!)
  done
  while :; do
    running=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && running=1; done
    [ $running = 0 ] && break
    if grep -qs "NETDEV WATCHDOG" "$work"/guest*/console.log; then
      for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
      for p in "${pids[@]}"; do wait "$p"; done
      return 3
    fi
    sleep 2
  done
  for p in "${pids[@]}"; do wait "$p"; done
  return 0
}

# One more boot where the emulated link stalled: the stall is the emulator's, not the guests'.
if ! boot_and_wait; then
  echo "vm: a guest's virtual NIC stalled (NETDEV WATCHDOG in its console): booting the pair again" >&2
  grep -h -m1 "NETDEV WATCHDOG" "$work"/guest*/console.log >&2
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  if ! boot_and_wait; then
    echo "vm: the virtual NIC stalled again" >&2
  fi
fi

status=0
for i in $(seq 0 $last); do
  g=$work/guest$i
  if ! grep -q "guest $i up" "$g/console.log"; then
    echo "vm: guest $i did not boot (see $g/console.log); skipping" >&2
    tail -5 "$g/console.log" >&2
    exit 77
  fi
  if [ ! -f "$g/rc" ]; then
    echo "vm: guest $i did not finish within ${timeout_s}s (see $g/console.log)" >&2
    status=1
  elif [ "$(cat "$g/rc")" != 0 ]; then
    echo "vm: guest $i: script exited $(cat "$g/rc")" >&2
    status=1
  fi
  echo "----- guest $i output -----"
  cat "$g/output.log" 2>/dev/null
done
exit $status
