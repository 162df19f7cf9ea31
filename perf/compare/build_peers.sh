#!/bin/bash
# Builds the peer benchmarks of perf/compare (Open MPI, MPICH, Gloo, memory) out of the source
# tree, into BUILD/perf/compare/ (BUILD: the first argument, default <repo>/build). Installs the
# Debian packages they need first when some are missing (apt-get; needs root). The main CMake
# build never needs MPI or Gloo.
#   perf/compare/build_peers.sh [BUILD]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="${1:-$repo/build}"
out="$build/perf/compare"
src="$here/peers"

packages=(openmpi-bin libopenmpi-dev mpich libmpich-dev libgloo-dev python3-matplotlib)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "build_peers: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

mkdir -p "$out"
flags=(-O3 -march=native -std=c++20 -Wall -Wextra -I"$src" -I"$here/../probes")
mpiflags=(-DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1)
pids=()
waitAll() { for p in "${pids[@]}"; do wait "$p"; done; pids=(); }  # fails on the first failure
mpicxx.openmpi "${flags[@]}" "${mpiflags[@]}" -o "$out/mpi_bench_openmpi" "$src/mpi_bench.cc" & pids+=($!)
mpicxx.mpich "${flags[@]}" "${mpiflags[@]}" -o "$out/mpi_bench_mpich" "$src/mpi_bench.cc" & pids+=($!)
waitAll
g++ "${flags[@]}" -pthread -o "$out/gloo_bench" "$src/gloo_bench.cc" -lgloo & pids+=($!)
g++ "${flags[@]}" -pthread -o "$out/mem_bench" "$src/mem_bench.cc" & pids+=($!)
waitAll
echo "build_peers: built mpi_bench_openmpi mpi_bench_mpich gloo_bench mem_bench in $out"
