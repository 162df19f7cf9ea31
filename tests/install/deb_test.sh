#!/bin/sh
# Usage: deb_test.sh BUILD_DIR SOURCE_DIR VERSION
# cpack -G DEB from the build, then checks the package: name, version, the runtime libraries
# the ELF files need declared in Depends (dpkg-shlibdeps), the shlibs file and ldconfig in
# postinst; that apt would install it on this system (a simulation: nothing is installed); and,
# unpacked into a scratch root with dpkg -x, the smoke test of check_installed_tree.sh on its usr/.
# Exits 77 (skipped) without cpack's DEB tools (dpkg-deb).
set -eu
build=$1
source=$2
version=$3
command -v dpkg-deb >/dev/null || { echo "dpkg-deb not found: DEB test skipped"; exit 77; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/weft-deb.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

"${CPACK:-cpack}" --config "$build/CPackConfig.cmake" -G DEB -B "$scratch/package" \
  >"$scratch/cpack.log" 2>&1 || fail "cpack: $(cat "$scratch/cpack.log")"
deb=$(ls "$scratch"/package/weft_*.deb)
dpkg-deb --info "$deb"

[ "$(dpkg-deb --field "$deb" Package)" = weft ] || fail "package name"
[ "$(dpkg-deb --field "$deb" Version)" = "$version" ] || fail "package version is not $version"
depends=$(dpkg-deb --field "$deb" Depends)
# What libnccl.so.2 itself links (besides the C/C++ runtime) must be a declared dependency.
for needed in libhwloc libpugixml libstdc++ libc6; do
  echo "$depends" | grep -q "$needed" || fail "Depends lacks $needed: $depends"
done
dpkg-deb --control "$deb" "$scratch/control"
grep -q '^libnccl 2 weft' "$scratch/control/shlibs" || fail "shlibs lacks libnccl 2"
grep -q ldconfig "$scratch/control/postinst" || fail "postinst does not run ldconfig"

if command -v apt-get >/dev/null; then
  # A simulation resolves Depends and Conflicts against this system without changing it.
  apt-get --simulate install "$deb" >"$scratch/apt.log" 2>&1 ||
    fail "apt-get --simulate: $(cat "$scratch/apt.log")"
  grep -q '^Inst weft ' "$scratch/apt.log" ||
    fail "apt would not install weft: $(cat "$scratch/apt.log")"
fi

dpkg-deb --extract "$deb" "$scratch/root"
sh "$source/tests/install/check_installed_tree.sh" "$scratch/root/usr" \
  "$source/tests/install/consumer" "$scratch/work" "$source/include"
