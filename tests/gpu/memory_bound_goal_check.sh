#!/usr/bin/env bash
# Checks tests/gpu/memory_bound_goal.py on fixed tables (tests/gpu/goal_fixture): an nccl-tests
# allreduce table with 4 ranks that meets the goal, a perf-tool allgather table with 2 ranks that
# misses it, and a table that is absent. Exit status 0: the lines are the expected ones.
set -euo pipefail
cd "$(dirname "$0")/goal_fixture"
actual=$(python3 ../memory_bound_goal.py d2d.txt \
  "allreduce:4:fixture nccl-tests:all_reduce_t4.txt" \
  "allgather:2:fixture perf:all_gather_t2.txt" "allreduce:2:absent:missing.txt")
if ! diff <(echo "$actual") expected.txt; then
  echo "memory_bound_goal_check: FAILED (above: < actual, > expected)"
  exit 1
fi
echo "memory_bound_goal_check: passed"
