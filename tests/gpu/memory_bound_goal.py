#!/usr/bin/env python3
"""The benchmark goals of the GPU check: with several ranks on one GPU, allreduce and allgather of
256 MiB reach at least 80% of the memory-traffic bound, the bound computed from the device-to-
device copy bandwidth measured in the same run (tests/gpu/d2d_bandwidth.cu prints "d2d_GBps X",
X in 1e9 bytes copied per second; a copy of B bytes reads B and writes B).

The bound: with n ranks on one GPU a call can be no faster than the memory traffic it must cause,
each input read once and each output written once, moved at the rate the copy engine's cudaMemcpy
moves memory (2 x X GB/s of traffic):
  allreduce, S bytes per rank (the table's size): reads n*S, writes n*S
      t_min = 2*n*S / (2*X) = n*S / X
  allgather, T bytes of output per rank (the table's size; each rank sends S = T/n): the n inputs
      read once (n*S = T), every rank's whole output written (n*T)
      t_min = (n+1)*T / (2*X)
achieved = t_min / t, t the out-of-place time of the 256 MiB row (in-place shown beside it).
The latency goal: an 8-byte allreduce (the table's 8 B row, out of place) under 10 us.

The tables are the perf tools' and nccl-tests' (same columns): size (B), count, type, redop, root,
then time (us), algbw, busbw, #wrong out of place, then the same in place.
Never fails the run on a missed goal: prints one GOAL line per table, and for allreduce tables
one LATENCY line, exit status 0.

Usage: memory_bound_goal.py D2D_OUTPUT_FILE COLLECTIVE:RANKS:LABEL:TABLE_FILE...
  COLLECTIVE is allreduce or allgather; LABEL names the table in the line (e.g. "nccl-tests t4").
"""
import re
import sys

GOAL = 0.80
SIZE = 256 << 20
LATENCY_US = 10.0
LATENCY_SIZE = 8


def copy_rate(path):
    """The d2d_GBps value in PATH, or None."""
    try:
        with open(path) as f:
            for line in f:
                m = re.match(r"\s*d2d_GBps\s+([0-9.eE+-]+)", line)
                if m and float(m.group(1)) > 0:
                    return float(m.group(1))
    except OSError:
        pass
    return None


def row_times(path, size):
    """(out-of-place us, in-place us) of the row for SIZE bytes in the table at PATH, or None."""
    try:
        with open(path) as f:
            lines = f.readlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) < 13 or not fields[0].isdigit() or int(fields[0]) != size:
            continue
        try:
            return float(fields[5]), float(fields[9])
        except ValueError:
            return None
    return None


def bound_us(collective, ranks, size, gbps):
    """The memory-traffic bound in microseconds (see the module's comment)."""
    rate = gbps * 1e3  # bytes copied per microsecond
    if collective == "allreduce":
        return ranks * size / rate
    return (ranks + 1) * size / (2 * rate)


def goal_line(collective, ranks, label, path, gbps):
    head = f"GOAL {collective} t{ranks} 256MiB ({label}):"
    times = row_times(path, SIZE)
    if times is None:
        return f"{head} no 256 MiB result in {path} (not measured)"
    if gbps is None:
        return f"{head} no copy bandwidth measured (d2d_GBps): the bound is unknown"
    bound = bound_us(collective, ranks, SIZE, gbps)
    out_place, in_place = (bound / t if t > 0 else 0.0 for t in times)
    verdict = "met" if out_place >= GOAL else "MISSED"
    return (f"{head} {out_place:.2f} of the memory-traffic bound (>= {GOAL:.2f}: {verdict}; "
            f"{times[0]:.0f} us against {bound:.0f} us at {gbps:.0f} GB/s copy; "
            f"in place {in_place:.2f})")


def latency_line(ranks, label, path):
    head = f"LATENCY allreduce t{ranks} 8B ({label}):"
    times = row_times(path, LATENCY_SIZE)
    if times is None:
        return f"{head} no 8 B result in {path} (not measured)"
    verdict = "met" if 0 < times[0] < LATENCY_US else "MISSED"
    return (f"{head} {times[0]:.2f} us out of place (< {LATENCY_US:.0f} us: {verdict}; "
            f"in place {times[1]:.2f} us)")


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 2
    gbps = copy_rate(argv[1])
    for spec in argv[2:]:
        parts = spec.split(":", 3)
        if len(parts) != 4 or parts[0] not in ("allreduce", "allgather") or not parts[1].isdigit():
            print(f"memory_bound_goal: bad table '{spec}'", file=sys.stderr)
            return 2
        print(goal_line(parts[0], int(parts[1]), parts[2], parts[3], gbps))
        if parts[0] == "allreduce":
            print(latency_line(int(parts[1]), parts[2], parts[3]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
