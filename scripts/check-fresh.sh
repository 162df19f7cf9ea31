#!/usr/bin/env bash
# Release check: the README's two commands on a fresh Debian machine. Builds a minimal root of
# this machine's Debian release with debootstrap, clones the checkout's HEAD into its /tmp,
# and runs `./run.sh` and then `./test.sh` inside it (chroot in a mount namespace of its own, with
# /proc, /sys, /dev, /dev/shm and /dev/pts; the network is the host's, for apt). Nothing but the
# base system is in the root: whatever a command or test needs, the project's own scripts install.
# The CUDA toolkit under /usr/local/cuda (not a Debian package) is bound in read-only, as machines
# that have it provide it; --no-cuda leaves it out. ../shared is copied beside the checkout where
# present (--no-shared leaves it out: the tests that read it skip with a message).
#
# Usage: scripts/check-fresh.sh [--dir DIR] [--keep] [--no-cuda] [--no-shared] [-- TEST_ARGS...]
#   --dir DIR   where the root is built (default /var/tmp/weft-fresh-root; emptied first)
#   --keep      leave the root in place afterwards (default: removed)
#   TEST_ARGS   passed to ./test.sh (e.g. --all)
# Prints each step's wall time and a summary; exits non-zero when a step failed. Needs root.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=/var/tmp/weft-fresh-root
keep=0
cuda=1
shared=1
test_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --dir) dir=${2:?--dir needs a folder}; shift 2 ;;
    --keep) keep=1; shift ;;
    --no-cuda) cuda=0; shift ;;
    --no-shared) shared=0; shift ;;
    --) shift; test_args=("$@"); break ;;
    *) echo "check-fresh: unknown argument $1 (see the usage at the top of $0)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "check-fresh: needs root (debootstrap, chroot, mounts)" >&2; exit 2; }
case $dir in / | /usr | /var | /tmp | "") echo "check-fresh: refusing --dir $dir" >&2; exit 2 ;; esac
. /etc/os-release
release=${VERSION_CODENAME:?check-fresh: /etc/os-release names no release}
if ! command -v debootstrap >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null ||
    { echo "check-fresh: cannot install debootstrap" >&2; exit 1; }
fi
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
mirror=${mirror:-http://deb.debian.org/debian}

summary=()
failed=0
step() {  # step NAME LOG COMMAND...: runs it (output also into LOG), records wall time and status
  local name=$1 log=$2 start=$SECONDS status=0
  shift 2
  echo "=== check-fresh: $name"
  "$@" 2>&1 | tee "$log" | grep --line-buffered -E '^(=== |installing: |.*tests passed|The following tests)'
  local codes=("${PIPESTATUS[@]}")
  status=${codes[0]}
  summary+=("$(printf '%-12s %5d s  exit %d' "$name" $((SECONDS - start)) "$status")")
  [ "$status" -eq 0 ] || { failed=1; tail -30 "$log"; }
  return "$status"
}
cleanup() {
  for m in dev/pts dev/shm dev sys proc usr/local/cuda; do
    mountpoint -q "$dir/$m" 2>/dev/null && umount -l "$dir/$m"
  done
  [ "$keep" = 1 ] || rm -rf --one-file-system "$dir"
  true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

total=$SECONDS
rm -rf --one-file-system "$dir"
mkdir -p "$dir"
step debootstrap "$dir.debootstrap.log" debootstrap --variant=minbase "$release" "$dir" "$mirror" ||
  exit 1
# The same package sources as this machine (updates and security too), and its name servers.
rm -f "$dir/etc/apt/sources.list"
cp /etc/apt/sources.list.d/*.sources "$dir/etc/apt/sources.list.d/" 2>/dev/null
[ -f /etc/apt/sources.list ] && cp /etc/apt/sources.list "$dir/etc/apt/"
cp -L /etc/resolv.conf "$dir/etc/resolv.conf"
# A user's clone of HEAD, under /tmp as a newcomer might make it, with git (what cloned it).
git clone -q --no-local "$here" "$dir/tmp/weft"
if [ "$shared" = 1 ] && [ -d "$here/../shared" ]; then
  cp -a "$here/../shared" "$dir/tmp/shared"
fi
inside() {  # inside COMMAND: runs it in the root, in a mount namespace of its own
  unshare --mount --propagation private -- bash -c '
    set -e
    root=$1; cuda=$2; shift 2
    # The root is a mount point of its own, as on a machine: ip netns (the netns tests) remounts it.
    mount --bind "$root" "$root"
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"  # with /sys/fs/cgroup, which slurmd needs
    mount --rbind /dev "$root/dev"
    mount -t tmpfs tmpfs "$root/dev/shm"
    if [ "$cuda" = 1 ] && [ -d /usr/local/cuda ]; then
      mkdir -p "$root/usr/local/cuda"
      mount --rbind -o ro /usr/local/cuda "$root/usr/local/cuda"
    fi
    exec chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin CI=true bash -c "$*"
  ' inside "$dir" "$cuda" "$@"
}
step git "$dir.git.log" inside "apt-get update -qq && apt-get install -y -qq git >/dev/null" || exit 1
step run.sh "$dir.run.log" inside "cd /tmp/weft && ./run.sh"
step test.sh "$dir.test.log" inside "cd /tmp/weft && ./test.sh ${test_args[*]-}"
echo "=== check-fresh: $release root at $dir, logs $dir.{debootstrap,git,run,test}.log"
printf '%s\n' "${summary[@]}"
echo "total $((SECONDS - total)) s"
exit "$failed"
