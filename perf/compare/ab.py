#!/usr/bin/env python3
"""Weft against an earlier Weft: cell by cell, from compare.py runs of each build.

Run compare.py with `--libs weft` on the two builds in turn, twice each, interleaved (before,
after, before, after), then:

    perf/compare/ab.py --before DIR DIR --after DIR DIR

For every cell (collective, ranks, size, in place or not) a run's time is its best round; a
build's time is its best run. The noise of a cell is how far the runs of one build lie apart
(the larger spread of the two builds, as a fraction of the faster run), or, with one run per
build, how far its rounds lie apart. A cell is slower only where after / before - 1 exceeds that
noise. Prints one table per collective and the cells that are slower beyond noise; exits 1 when
there are any.
"""
import argparse
import collections
import csv
import math
import os
import sys


def read_runs(dirs):
    """Per run: {cell: (best round time, worst round time)}."""
    runs = []
    for d in dirs:
        best = {}
        with open(os.path.join(d, "results.csv"), newline="") as f:
            for r in csv.DictReader(f):
                if r["lib"] != "weft" or r.get("wrong") not in ("", "0"):
                    continue
                t = float(r["time_us"])
                if t <= 0:
                    continue
                cell = (r["coll"], int(r["nranks"]), int(r["bytes"]), r["algo"])
                lo, hi = best.get(cell, (math.inf, 0.0))
                best[cell] = (min(lo, t), max(hi, t))
        runs.append(best)
    return runs


def spread(values):
    return max(values) / min(values) - 1 if len(values) > 1 else 0.0


def compare(before_runs, after_runs):
    cells = set.intersection(*(set(r) for r in before_runs + after_runs))
    rows = []
    for cell in sorted(cells):
        b = [r[cell][0] for r in before_runs]
        a = [r[cell][0] for r in after_runs]
        if len(b) > 1 or len(a) > 1:
            noise = max(spread(b), spread(a))
        else:  # one run each: the rounds' spread
            noise = max(spread(before_runs[0][cell]), spread(after_runs[0][cell]))
        before, after = min(b), min(a)
        rows.append({"cell": cell, "before": before, "after": after,
                     "ratio": after / before, "noise": noise})
    return rows


def size_text(n):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return "%d%s" % (n // scale, unit)
    return str(n)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", nargs="+", required=True, help="compare.py result dirs")
    ap.add_argument("--after", nargs="+", required=True, help="compare.py result dirs")
    args = ap.parse_args()
    rows = compare(read_runs(args.before), read_runs(args.after))
    if not rows:
        print("no cell measured in every run")
        return 2
    by_coll = collections.defaultdict(list)
    for r in rows:
        by_coll[r["cell"][0]].append(r)
    slower = [r for r in rows if r["ratio"] - 1 > r["noise"]]
    print("us a call (best round of the best run); ratio = after / before (< 1: faster now); "
          "noise = spread of one build's runs")
    for coll, rs in by_coll.items():
        print("\n| %s | ranks | mode | before us | after us | ratio | noise |" % coll)
        print("|---|---|---|---|---|---|---|")
        for r in rs:
            _, nranks, nbytes, mode = r["cell"]
            mark = " **slower**" if r in slower else ""
            print("| %s | %d | %s | %.3g | %.3g | %.2f%s | %.2f |"
                  % (size_text(nbytes), nranks, mode, r["before"], r["after"], r["ratio"], mark,
                     r["noise"]))
    logs = [math.log(r["ratio"]) for r in rows]
    print("\n%d cells; geometric mean ratio %.3f; %d slower beyond noise"
          % (len(rows), math.exp(sum(logs) / len(logs)), len(slower)))
    for r in slower:
        coll, nranks, nbytes, mode = r["cell"]
        print("  slower: %s %d ranks %s %s: %.3g -> %.3g us (ratio %.2f, noise %.2f)"
              % (coll, nranks, size_text(nbytes), mode, r["before"], r["after"], r["ratio"],
                 r["noise"]))
    return 1 if slower else 0


if __name__ == "__main__":
    sys.exit(main())
