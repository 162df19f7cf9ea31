#!/usr/bin/env bash
# Checks the machine code (SASS) of the direct peer-memory kernel (weftDirect,
# src/cuda/direct_kernels.h) for sm_90 (H100/H200), compiled from the library's own kernel source
# as the image is (nvcc --fmad=false), with the direct kernel alone (-DWEFT_DIRECT_ONLY):
#  - the reduce loop of a 4-byte type (float Sum) and the 16-byte copy loop load and store with
#    128-bit global accesses (LDG.E.128 / STG.E.128), several loads in flight per round (each loop is a device
#    function of its own: nvdisasm names them);
#  - the kernel keeps its parameter in the constant bank: no local-memory copy of it (the
#    kernel's own frame is empty: no STL/LDL in weftDirect itself) and no stack.
# Skips (exit 77) where nvcc, cuobjdump or nvdisasm is missing: they come with the CUDA toolkit,
# or from PyPI's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm (scripts/install-deps.sh installs
# them where the toolkit lacks them).
# Usage: direct_sass_check.sh <nvcc> <source root>
set -euo pipefail
nvcc=${1:-}
root=${2:?source root}
if [ -z "$nvcc" ] || ! [ -x "$nvcc" ]; then
  echo "SKIP: no nvcc to compile the direct kernel for sm_90"
  exit 77
fi
# cuobjdump and nvdisasm: beside nvcc, on PATH, or from PyPI (nvidia/cu*/bin).
find_tool() {
  local name=$1 c py site d
  for c in "$(dirname "$nvcc")/$name" "$(command -v "$name" || true)"; do
    if [ -n "$c" ] && [ -x "$c" ]; then echo "$c"; return; fi
  done
  for py in python3 python; do
    command -v "$py" >/dev/null || continue
    site=$("$py" -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null || true)
    for d in $site; do
      for c in "$d"/cu*/bin/"$name"; do
        if [ -x "$c" ]; then echo "$c"; return; fi
      done
    done
  done
}
cuobjdump=$(find_tool cuobjdump)
nvdisasm=$(find_tool nvdisasm)
if [ -z "$cuobjdump" ] || [ -z "$nvdisasm" ]; then
  echo "SKIP: no cuobjdump or nvdisasm (CUDA toolkit, or pip install nvidia-cuda-cuobjdump" \
       "nvidia-cuda-nvdisasm)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$nvcc" -cubin -arch=sm_90 -std=c++17 --fmad=false -DWEFT_DIRECT_ONLY \
  -Werror cross-execution-space-call -I"$root" -I"$root/include" \
  -o "$work/direct.cubin" "$root/src/cuda/interp_kernel.cu"
"$nvdisasm" -c "$work/direct.cubin" >"$work/sass.txt"
"$cuobjdump" -res-usage "$work/direct.cubin" >"$work/res.txt" 2>&1
fail=0
# The body of the device function whose mangled name matches $1 (nvdisasm labels each one
# "$weftDirect$<name>:" and ends it with the next .type / .size line).
body() {
  awk -v pat="$1" '$0 ~ "^[$]weftDirect[$].*" pat ".*:$" { on = 1; next }
                   on && /^[ \t]*[.](type|size)/ { on = 0 } on' "$work/sass.txt"
}
# The kernel's own code: from its label to its first device function.
entry() {
  awk '/^[.]text[.]weftDirect:$/ { on = 1; next } on && /^[ \t]*[.](type|size)/ { on = 0 } on' \
    "$work/sass.txt"
}
# reduceRange<FloatElem<float>, OpSum, false, false> and moveWords<uint4>.
reduce_f32=$(body 'reduceRangeINS_8elements9FloatElemIfEENS._5OpSumELb0ELb0E')
copy16=$(body 'moveWordsI5uint4E')
for what in reduce_f32 copy16; do
  text=${!what}
  if [ -z "$text" ]; then
    echo "FAIL: $what: function not found in the SASS"
    fail=1
    continue
  fi
  loads=$(grep -cE 'LDG\.E\.128|LDG\.E\.EL\.128|LDG\.E\.[A-Z.]*128' <<<"$text" || true)
  stores=$(grep -cE 'STG\.E\.128|STG\.E\.[A-Z.]*128' <<<"$text" || true)
  echo "$what: $loads 128-bit loads, $stores 128-bit stores"
  if [ "$loads" -lt 4 ] || [ "$stores" -lt 4 ]; then
    echo "FAIL: $what does not move 16-byte words, several per round"
    fail=1
  fi
done
entry=$(entry)
if [ -z "$entry" ]; then
  echo "FAIL: weftDirect not found in the SASS"
  fail=1
elif grep -qE '\b(STL|LDL)\b' <<<"$entry"; then
  echo "FAIL: weftDirect uses local memory (its parameter copied to the stack?):"
  grep -E '\b(STL|LDL)\b' <<<"$entry" | head -5
  fail=1
fi
usage=$(grep -A1 'Function weftDirect:' "$work/res.txt" | tail -1 || true)
echo "weftDirect resources: $usage"
if ! grep -qE 'STACK:0( |$)' <<<"$usage"; then
  echo "FAIL: weftDirect has a stack frame"
  fail=1
fi
exit $fail
