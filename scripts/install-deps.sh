#!/usr/bin/env bash
# Installs the Debian packages Weft needs, only when something is missing.
# Usage: scripts/install-deps.sh [--run]
#   --run   only what the main job (./run.sh) builds and runs: the library, the perf tools and
#           weftrun
#   (none)  everything any test or tool of the tree uses (./test.sh): scripts/check-fresh.sh
#           checks on a fresh Debian root that nothing else is needed.
set -euo pipefail
# The library, the perf tools and weftrun; ccache keeps objects across clean rebuilds.
pkgs=(build-essential cmake ninja-build pkg-config libhwloc-dev hwloc libpugixml-dev python3
      ccache)
if [ "${1:-}" != --run ]; then
  pkgs+=(git  # scripts/check_tree.py lists the tracked files
         file  # cpack's DEB generator reads the binaries' types (tests/install)
         libgtest-dev googletest graphviz clang
         clang-format  # the tree's formatting is checked (tests/lint)
         iproute2  # ip/tc for the network-namespace tests (label netns)
         slurm-wlm  # a one-node Slurm the srun launch test starts itself (label slurm),
         libpmix-dev  # with the PMIx library its mpi/pmix plugin loads (libpmix.so)
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
fi
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
# The direct kernel's SASS check (tests/unit/cuda/direct_sass_check.sh) disassembles with
# cuobjdump and nvdisasm: where the CUDA toolkit has nvcc but not them, PyPI's packages.
if [ "${1:-}" != --run ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  for tool in cuobjdump nvdisasm; do
    if [ ! -x /usr/local/cuda/bin/$tool ] && ! command -v $tool >/dev/null &&
       ! python3 -c "import nvidia, glob, sys; sys.exit(not any(glob.glob(p + '/cu*/bin/$tool') for p in nvidia.__path__))" 2>/dev/null; then
      echo "installing: nvidia-cuda-$tool (pip)"
      python3 -m pip install -q "nvidia-cuda-$tool" || echo "nvidia-cuda-$tool not installed: the SASS check skips"
    fi
  done
fi
