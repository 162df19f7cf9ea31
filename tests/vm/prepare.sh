#!/bin/bash
# Prepares what a QEMU guest for the vm tests boots: the stock Debian kernel (its package
# unpacked, never installed), and an initramfs holding busybox, the module chain for virtio,
# 9p and soft-RoCE (rdma_rxe), and tests/vm/guest_init as /init. The guest then runs the host's
# own root file system, read-only over 9p, so host binaries (the build tree, ibverbs-utils) run
# unchanged inside it.
#
# Usage: prepare.sh OUTDIR
# Leaves OUTDIR/vmlinuz and OUTDIR/initrd.gz, rebuilt only when the kernel package or the init
# script changed. Exit 77 (skip) when a tool or the kernel package cannot be had.
set -euo pipefail
out=${1:?usage: prepare.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "vm: cannot prepare a guest: $*" >&2; exit 77; }

for tool in qemu-system-x86_64 busybox dpkg-deb depmod modprobe cpio gzip apt-get apt-cache; do
  command -v "$tool" >/dev/null || skip "$tool is missing (scripts/install-deps.sh installs it)"
done
busybox_bin=$(command -v busybox)
case $(ldd "$busybox_bin" 2>&1 || true) in *"not a dynamic"*) ;; *) skip "$busybox_bin is not static (busybox-static)" ;; esac

mkdir -p "$out"
out=$(cd "$out" && pwd)
# The kernel package linux-image-amd64 points at (linux-image-6.1.0-NN-amd64 on bookworm).
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
       awk '/Depends: linux-image-[0-9]/{print $2; exit}')
[ -n "$kpkg" ] || skip "apt-cache knows no linux-image-amd64 (run apt-get update)"
stamp="$kpkg $(sha256sum "$here/guest_init" | cut -c1-16)"
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ] &&
   [ -f "$out/vmlinuz" ] && [ -f "$out/initrd.gz" ]; then
  exit 0
fi

cd "$out"
rm -rf kern initrd-root ./*.deb
(apt-get download "$kpkg" >download.log 2>&1) || skip "apt-get download $kpkg failed (see $out/download.log)"
dpkg-deb -x "$kpkg"_*.deb kern
rm -f "$kpkg"_*.deb
kv=$(ls kern/lib/modules)
depmod -b "$out/kern" "$kv"  # the package ships without modules.dep

# Every module the targets need, dependencies first, each once.
targets="virtio_pci virtio_net 9pnet_virtio 9p crc32_generic rdma_rxe"
: > modules.list
for t in $targets; do
  modprobe -d "$out/kern" -S "$kv" --show-depends "$t" | awk '$1=="insmod"{print $2}' >>modules.list
done
r=initrd-root
mkdir -p $r/bin $r/proc $r/sys $r/dev $r/host $r/lib/modules
cp "$busybox_bin" $r/bin/busybox
awk '!seen[$0]++' modules.list | while read -r path; do
  name=$(basename "$path")
  case $name in *.ko.xz) xz -dc "$path" >$r/lib/modules/"${name%.xz}"; name=${name%.xz} ;;
                *) cp "$path" $r/lib/modules/"$name" ;; esac
  echo "${name%.ko}" >>$r/lib/modules/load-order
done
cp "$here/guest_init" $r/init
chmod +x $r/init
(cd $r && find . | cpio -o -H newc --quiet | gzip -1) >initrd.gz
cp kern/boot/vmlinuz-"$kv" vmlinuz
rm -rf kern $r
echo "$stamp" >stamp
echo "vm: guest prepared from $kpkg in $out"
