#!/bin/sh
# Usage: check_installed_tree.sh PREFIX CONSUMER_SOURCE WORKDIR [SOURCE_INCLUDE_DIR]
# Checks an installed Weft (cmake --install, or an unpacked DEB's usr/) the way users meet it:
#   - the layout: public headers only (equal to SOURCE_INCLUDE_DIR when given), libnccl.so.2 and
#     libweft.so with their soname links, the network plugin libnccl-net-weft.so, the CMake
#     package, the .pc files, tools in bin/ only;
#   - the installed programs find their libraries in PREFIX/lib by themselves (RUNPATH), and a
#     2-process all_reduce_perf under the installed weftrun runs;
#   - a program outside the tree (CONSUMER_SOURCE) builds with find_package(Weft) and with
#     pkg-config, and its 2-rank allreduce runs on PREFIX/lib's library and checks the sums.
set -eu
prefix=$(cd "$1" && pwd)
consumer=$2
work=$3
source_include=${4:-}
lib=$prefix/lib
mkdir -p "$work"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
step() { echo "== $*"; }
# The programs run with the environment a user has: no LD_LIBRARY_PATH pointing anywhere.
unset LD_LIBRARY_PATH

step "layout of $prefix"
for f in include/nccl.h include/weft/weft.h include/weft/weft_mpi.h \
  lib/libnccl.so lib/libnccl.so.2 lib/libweft.so lib/libweft.so.0 \
  lib/cmake/Weft/WeftConfig.cmake lib/cmake/Weft/WeftConfigVersion.cmake \
  lib/cmake/Weft/WeftTargets.cmake lib/pkgconfig/weft.pc lib/pkgconfig/nccl.pc \
  bin/weftrun bin/all_reduce_perf; do
  [ -e "$prefix/$f" ] || fail "missing $f"
done
for link in lib/libnccl.so lib/libnccl.so.2 lib/libweft.so lib/libweft.so.0; do
  [ -L "$prefix/$link" ] || fail "$link is not a symbolic link"
done
soname() { readelf -d "$1" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p'; }
[ "$(soname "$lib/libnccl.so")" = libnccl.so.2 ] || fail "libnccl.so's soname is not libnccl.so.2"
[ "$(soname "$lib/libweft.so")" = libweft.so.0 ] || fail "libweft.so's soname is not libweft.so.0"
if [ -n "$source_include" ]; then
  diff -r "$source_include" "$prefix/include" || fail "installed headers differ from the source's"
fi
# Nothing but the public headers, the libraries with their package files, and the tools.
expected='^\./(include/.*\.h|lib/lib(nccl|weft)\.so[.0-9]*|lib/libnccl-net-weft\.so|lib/cmake/Weft/[A-Za-z-]+\.cmake'
expected="$expected|lib/pkgconfig/(weft|nccl)\.pc|bin/([a-z_]+_perf|weftrun|weft-[a-z]+))\$"
unexpected=$(cd "$prefix" && find . -type f -o -type l | grep -vE "$expected" || true)
[ -z "$unexpected" ] || fail "unexpected files installed: $unexpected"

step "installed programs find their libraries"
for program in "$prefix"/bin/*; do
  missing=$(ldd "$program" | grep 'not found' || true)
  [ -z "$missing" ] || fail "$program: $missing"
  for weft in $(ldd "$program" | awk '/lib(nccl|weft)\.so/ {print $3}'); do
    [ "$(cd "$(dirname "$weft")" && pwd -P)" = "$(cd "$lib" && pwd -P)" ] ||
      fail "$program loads $weft, not the installed library"
  done
done
timeout 120 "$prefix/bin/weftrun" -n 2 "$prefix/bin/all_reduce_perf" -b 8 -e 4K -f 8 -n 1 -w 1 \
  -c 1 >"$work/all_reduce_perf.out" || fail "installed weftrun + all_reduce_perf failed"
grep -q '# Out of bounds values : 0 OK' "$work/all_reduce_perf.out" ||
  fail "installed all_reduce_perf: $(cat "$work/all_reduce_perf.out")"

step "consumer built with find_package(Weft)"
generator=
command -v ninja >/dev/null && generator="-G Ninja"
# Only PREFIX may provide Weft: no package registries, no build trees.
# shellcheck disable=SC2086
"${CMAKE:-cmake}" -S "$consumer" -B "$work/cmake" $generator -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF \
  >"$work/cmake.log" 2>&1 || fail "consumer configure: $(cat "$work/cmake.log")"
grep -qF "from $prefix/lib/cmake/Weft" "$work/cmake.log" ||
  fail "find_package(Weft) did not use $prefix: $(cat "$work/cmake.log")"
"${CMAKE:-cmake}" --build "$work/cmake" >"$work/build.log" 2>&1 ||
  fail "consumer build: $(cat "$work/build.log")"
for library in nccl weft; do
  timeout 60 "$work/cmake/allreduce_with_$library" "$lib" || fail "allreduce_with_$library"
done

step "consumer built with pkg-config"
PKG_CONFIG_PATH=$lib/pkgconfig
export PKG_CONFIG_PATH
header_version=$(awk '/^#define NCCL_(MAJOR|MINOR|PATCH) / {printf "%s%s", sep, $3; sep="."}' \
  "$prefix/include/nccl.h")
[ "$(pkg-config --modversion nccl)" = "$header_version" ] ||
  fail "nccl.pc version $(pkg-config --modversion nccl), nccl.h says $header_version"
weft_version=$(pkg-config --modversion weft)
for library in nccl weft; do
  # shellcheck disable=SC2046
  cc -o "$work/pc_allreduce_with_$library" "$consumer/allreduce_consumer.c" \
    -DWEFT_EXPECTED_VERSION="\"$weft_version\"" $(pkg-config --cflags --libs $library) ||
    fail "pkg-config build with $library.pc"
  LD_LIBRARY_PATH=$lib timeout 60 "$work/pc_allreduce_with_$library" "$lib" ||
    fail "pc_allreduce_with_$library"
done
echo "installed tree $prefix: OK"
