#!/usr/bin/env bash
# Builds the MPI flavour (MPI=1) of nccl-tests' all_reduce_perf and all_gather_perf from the
# source that tests/gpu/prepare_carry.sh carries (CARRY/nccl-tests/source), against the carried
# library and headers (CARRY/lib, CARRY/include) with perf/build_nccl_tests.sh, into OUT_DIR.
# Used by tests/gpu/run.sh on the GPU machine; runs anywhere MPI and nvcc are.
# MPI is found from mpicc: MPI_HOME is the folder above the include folder that holds the mpi.h it
# compiles with (Open MPI: .../openmpi/include/mpi.h); set MPI_HOME to choose.
# Usage: tests/gpu/build_nccl_tests_mpi.sh CARRY OUT_DIR [ARCH]   (ARCH: compute capability
#   digits, e.g. 90; default 90)
# Exit status 0: built; 77: no MPI here (mpirun or mpiexec, and mpicc) or no carried source,
# said on one line; 1: the build failed.
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: tests/gpu/build_nccl_tests_mpi.sh CARRY OUT_DIR [ARCH]" >&2
  exit 2
fi
carry=$(cd "$1" && pwd) || exit 2
out=$2
arch=${3:-90}
cd "$(dirname "$0")/../.." || exit 1

launcher=$(command -v mpirun || command -v mpiexec || true)
if [ -z "$launcher" ] || ! command -v mpicc >/dev/null; then
  echo "MPI is absent here (no mpirun/mpiexec or no mpicc): the MPI flavour of nccl-tests is" \
    "skipped"
  exit 77
fi
if [ ! -f "$carry/nccl-tests/source/src/Makefile" ]; then
  echo "no nccl-tests source in $carry/nccl-tests (../shared absent where it was prepared):" \
    "the MPI flavour of nccl-tests is skipped"
  exit 77
fi
if [ -z "${MPI_HOME:-}" ]; then
  header=$(echo '#include <mpi.h>' | mpicc -E -x c - 2>/dev/null |
    grep -o '"[^"]*/mpi\.h"' | head -n 1 | tr -d '"')
  if [ -z "$header" ]; then
    echo "mpicc finds no mpi.h: the MPI flavour of nccl-tests is skipped"
    exit 77
  fi
  MPI_HOME=$(cd "$(dirname "$header")/.." && pwd)
fi
echo "MPI: $launcher ($("$launcher" --version 2>&1 | head -n 1)), MPI_HOME=$MPI_HOME"
mkdir -p "$out"
MPI=1 MPI_HOME="$MPI_HOME" NCCL_TESTS_BINARIES="all_reduce all_gather" \
  NVCC_GENCODE="-gencode=arch=compute_$arch,code=sm_$arch" JOBS="$(nproc)" \
  perf/build_nccl_tests.sh "$carry/nccl-tests/source" "$carry" "$out" || exit 1
for name in all_reduce_perf all_gather_perf; do
  if ! readelf -d "$out/$name" | grep -q 'Shared library: \[libmpi'; then
    echo "$out/$name was built without MPI (no libmpi needed)"
    exit 1
  fi
done
