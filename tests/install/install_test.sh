#!/bin/sh
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
# cmake --install into a scratch prefix, moves the tree elsewhere (an installed Weft must not
# depend on where it was installed: RUNPATH, CMake package and .pc files are all relative), and
# checks the moved tree with check_installed_tree.sh.
set -eu
build=$1
source=$2
scratch=$(mktemp -d "${TMPDIR:-/tmp}/weft-install.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

"${CMAKE:-cmake}" --install "$build" --prefix "$scratch/installed" >"$scratch/install.log" ||
  { cat "$scratch/install.log"; exit 1; }
mv "$scratch/installed" "$scratch/moved"
sh "$source/tests/install/check_installed_tree.sh" "$scratch/moved" \
  "$source/tests/install/consumer" "$scratch/work" "$source/include"
