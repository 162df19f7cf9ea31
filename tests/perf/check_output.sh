#!/bin/sh
# Usage: check_output.sh WEFTRUN ALL_REDUCE_PERF
# Runs a 2-process all_reduce_perf sweep and checks the nccl-tests output format: header, table
# header, one row per size, footer, and that only process 0 printed.
set -u
weftrun=$1
perf=$2
. "$(dirname "$0")/output_checks.sh"

run_checked "$weftrun" -n 2 "$perf" -b 8 -e 64K -f 4 -n 2 -w 1 -c 1

expect_count '^# Weft perf tests version [0-9.]+ nccl-headers=[0-9]+ nccl-library=[0-9]+$' 1
expect_line '# Collective test starting: all_reduce_perf'
expect_count '^# nThread 1 nGpus 1 minBytes 8 maxBytes 65536 step: 4\(factor\) warmup iters: 1 iters: 2 agg iters: 1 validation: 1 graph: 0 unalign: 0$' 1
expect_line '# Using devices'
expect_count '^#  Rank  [01] Group  0 Pid +[0-9]+ on +[^ ]+ cpu$' 2
expect_count '^# Collective test starting' 1
expect_line '#                                                              out-of-place                       in-place'
expect_line '#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong'
expect_count '^#        \(B\)    \(elements\)                               \(us\)  \(GB/s\)  \(GB/s\)             \(us\)  \(GB/s\)  \(GB/s\) *$' 1
# 8, 32, 128, 512, 2048, 8192, 32768 bytes: one row each, both placements checked and right.
row=' +[0-9.e+]+ +[0-9.e+]+ +[0-9.e+]+ +0'
expect_count "^ +[0-9]+ +[0-9]+ +float +sum +-1${row}${row}\$" 7
expect_count '^ +8 +2 +float +sum +-1 ' 1
expect_count '^ +32768 +8192 +float +sum +-1 ' 1
expect_line '# Out of bounds values : 0 OK'
expect_count '^# Avg bus bandwidth    : [0-9.e+-]+ $' 1
expect_line '# Collective test concluded: all_reduce_perf'
echo "output format OK"
