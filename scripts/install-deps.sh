#!/usr/bin/env bash
# Installs the Debian packages Weft's build and tests need, only when something is missing.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config libhwloc-dev hwloc libpugixml-dev
      libgtest-dev googletest python3 graphviz clang
      clang-format  # the tree's formatting is checked (tests/lint)
      iproute2  # ip/tc for the network-namespace tests (label netns)
      slurm-wlm  # a one-node Slurm the srun launch test starts itself (label slurm)
      libz3-dev)  # Z3 for exact synthesis (synth/solver; skipped when absent)
# trainers/: OpenBLAS GEMMs, zlib, the KJV text and Fashion-MNIST read at run time, and PyTorch
# for the reference check (tests/trainers; skipped when absent).
pkgs+=(libopenblas-dev zlib1g-dev bible-kjv dataset-fashion-mnist python3-torch)
# RDMA: verbs headers (transports/ib loads libibverbs with dlopen; it is no link dependency),
# the soft-RoCE provider and tools, and what tests/vm boots its QEMU guests with (the guest
# kernel package itself is downloaded by tests/vm/prepare.sh, never installed).
pkgs+=(libibverbs-dev ibverbs-providers ibverbs-utils rdma-core perftest
       qemu-system-x86 busybox-static kmod cpio)
# python/weft_torch: the torch.distributed backend "weft" builds against libtorch's headers and
# pybind11 (tests/torch runs it with pytest; skipped when absent).
pkgs+=(libtorch-dev pybind11-dev python3-pytest)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
