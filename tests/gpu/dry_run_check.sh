#!/usr/bin/env bash
# Runs tests/gpu/run.sh in its dry-run mode (WEFT_GPU_DRY_RUN=1: every step's logic, nothing run
# on a GPU) and checks what it leaves: exit status 2, one RESULT line per case, all SKIP with
# "skipped (no GPU", every step of the limit table started, the verdict as the last line, and the
# log, results and README block written under $OUT/gpu-check. Then syntax-checks every shell
# script of the GPU check (bash -n). Exit status 0: passed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "dry_run_check: FAILED: $*"
  exit 1
}
for s in "$here"/*.sh; do
  bash -n "$s" || fail "bash -n $s"
done
start=$SECONDS
WEFT_GPU_DRY_RUN=1 OUT="$work" timeout 120 bash "$here/run.sh" >"$work/stdout" 2>&1
rc=$?
[[ $rc == 2 ]] || fail "exit status $rc, not 2 (nothing ran on a GPU); output in $work/stdout"
((SECONDS - start < 60)) || fail "the dry run took $((SECONDS - start)) s"
out="$work/stdout"
[[ "$(tail -n 1 "$out")" == "GPU CHECK: NOTHING RAN ON A GPU (every case skipped)" ]] ||
  fail "last line: $(tail -n 1 "$out")"
results=$(grep -c '^RESULT ' "$out")
skipped=$(grep -cE '^RESULT [a-z_0-9]+ [a-z_0-9]+ SKIP [0-9]+s skipped \(no GPU' "$out")
((results >= 30)) || fail "only $results RESULT lines"
[[ $results == "$skipped" ]] || fail "$((results - skipped)) RESULT lines are not skipped (no GPU)"
grep -q "^TOTAL pass=0 fail=0 hang=0 skip=$results notrun=0$" "$out" || fail "no TOTAL line"
for name in $(sed -n '/^# BEGIN STEP LIMITS/,/^# END STEP LIMITS/s/^ *\[\([a-z_0-9]*\)\]=.*/\1/p' \
  "$here/run.sh"); do
  grep -q "^== $name (limit " "$out" || fail "step $name did not start"
done
for case in hazards\ same_stream hazards\ null_stream hazards\ max_connections_1 \
  hazards\ processes_no_mps torch\ torch_nccl bandwidth\ all_reduce_t4 \
  correct_procs\ scatter_procs; do
  grep -q "^RESULT $case SKIP" "$out" || fail "no RESULT line for $case"
done
for f in run.log results.tsv readme_block.md; do
  [[ -s $work/gpu-check/$f ]] || fail "no $f under \$OUT/gpu-check"
done
grep -q -- '----- perf/README.md GPU section: paste below -----' "$out" || fail "no README block"
echo "dry_run_check: passed ($results cases skipped, $((SECONDS - start)) s)"
