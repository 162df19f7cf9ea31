#!/bin/sh
# Usage: expect_status.sh STATUS command [args...]
# Passes when the command exits with exactly STATUS.
want=$1
shift
"$@"
got=$?
if [ "$got" -ne "$want" ]; then
  echo "expected exit status $want, got $got from: $*" >&2
  exit 1
fi
echo "exit status $got as expected"
