#!/usr/bin/env bash
# The main job: builds the library, the perf tool and its launcher (nothing else), then runs the
# default collective perf session on this machine (all_reduce_perf over 2 processes, 8 B to
# 128 MiB). Extra arguments go to the perf binary.
set -euo pipefail
cd "$(dirname "$0")"
start=$SECONDS
bash scripts/build.sh --run weftrun all_reduce_perf
echo "=== build took $((SECONDS - start)) s"
if [ $# -eq 0 ]; then
  set -- -b 8 -e 128M -f 2 -n 20 -w 5
fi
exec build/perf/weftrun -n 2 build/perf/all_reduce_perf "$@"
