#!/bin/sh
# Usage: weftrun_env.sh WEFTRUN
# Checks the environment weftrun gives each process, --tag-output and --separate-output.
set -u
weftrun=$1
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
show='echo "$WEFT_RANK $WEFT_WORLD_SIZE $WEFT_LOCAL_RANK $WEFT_LOCAL_SIZE $RANK $WORLD_SIZE'
show="$show"' $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT $WEFT_ID_FILE"'

out=$("$weftrun" -n 2 --tag-output sh -c "$show") || fail "weftrun exited with $?"
echo "$out"
for r in 0 1; do
  echo "$out" | grep -qE "^\[$r\] $r 2 $r 2 $r 2 $r 2 127\.0\.0\.1 [0-9]+ /.+/unique_id\$" ||
    fail "rank $r environment"
done
ports=$(echo "$out" | awk '{print $11}' | sort -u | wc -l)
[ "$ports" -eq 1 ] || fail "processes disagree on MASTER_PORT"

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$weftrun" -n 3 --separate-output "$dir/logs" sh -c 'echo "out $WEFT_RANK"; echo "err $WEFT_RANK" >&2' ||
  fail "separate-output run"
for r in 0 1 2; do
  grep -qx "out $r" "$dir/logs/rank.$r.log" || fail "rank.$r.log lacks stdout"
  grep -qx "err $r" "$dir/logs/rank.$r.log" || fail "rank.$r.log lacks stderr"
done
echo "weftrun environment OK"
