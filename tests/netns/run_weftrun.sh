#!/usr/bin/env bash
# Runs `weftrun -H host0:S,host1:S,... --netns prog args` across K network-namespace hosts:
#   run_weftrun.sh [--rate RATE] K SLOTS WEFTRUN prog [args...]
# Exits 77 (skipped) where namespaces cannot be made. WEFTRUN_TIMEOUT (seconds, default 240)
# bounds the whole run.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rate=()
if [ "${1:-}" = --rate ]; then rate=(--rate "$2"); shift 2; fi
hosts="$1" slots="$2"
shift 2
exec "$here/netns.sh" run "$hosts" "${rate[@]}" -- bash -c '
  slots="$1"; shift
  spec=""
  for h in $WEFT_NETNS_HOSTS; do spec="$spec${spec:+,}$h:$slots"; done
  weftrun="$1"; shift
  exec "$weftrun" -H "$spec" --netns --timeout "${WEFTRUN_TIMEOUT:-240}" "$@"
' run "$slots" "$@"
