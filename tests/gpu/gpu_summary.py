#!/usr/bin/env python3
"""The summary of tests/gpu/run.sh: one parsable block at the end of the run, and the same results
as a block ready to paste into perf/README.md's GPU section.

Input: the results file run.sh writes, one line per case, tab-separated:
    STEP  CASE  STATUS  SECONDS  DETAIL
STATUS is PASS, FAIL, HANG (killed at its time limit, or the case said it hung), SKIP (not
applicable here: no GPU, no PyTorch, ...) or NOTRUN (its step had no time left: a failure).
The perf tables of the bandwidth step (nccl-tests format; the perf tools' roofline columns when
present) give the busbw per size and its fraction of the copy bound (memory_bound_goal.py's
model, from the d2d_bandwidth output of the same run).

Output (stdout): first the README block, between "----- perf/README.md GPU section: paste
below -----" and "----- end of the README block -----" (also written to --readme-out), then the
summary, whose last line is the verdict:
    == summary
    RESULT STEP CASE STATUS SECONDSs DETAIL
    BUSBW COLLECTIVE tRANKS SIZE busbw=GB/s time=us copy_frac=F [hbm_frac=F]
        (8 B and every size from 1 MiB; the README block has every size)
    GOAL ... / LATENCY ...            (copied from the goal file)
    TOTAL pass=P fail=F hang=H skip=S notrun=N
    GPU CHECK: PASSED | FAILED (...) | NOTHING RAN ON A GPU (...)
        (after "REHEARSAL ON THE FAKE DRIVER, NOT A GPU: " with --rehearsal)
Exit status: 0 passed, 1 a failure, 2 nothing ran on a GPU.

Usage: gpu_summary.py --results FILE [--d2d FILE] [--goal FILE] [--title TEXT]
                      [--readme-out FILE] [--table COLLECTIVE:RANKS:LABEL:FILE ...]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memory_bound_goal  # noqa: E402

STATUSES = ("PASS", "FAIL", "HANG", "SKIP", "NOTRUN")
# The sizes the summary's BUSBW lines show: the latency size and the bandwidth sizes.
SHOWN_MIN_BYTES = 1 << 20
LATENCY_BYTES = 8
FAILING = ("FAIL", "HANG", "NOTRUN")


def parse_results(path):
    """[(step, case, status, seconds, detail)] from the results file; a malformed line is a FAIL
    of its own, so that nothing is lost silently."""
    out = []
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return [("summary", "results", "FAIL", 0, f"no results file {path}")]
    for line in lines:
        if not line.strip():
            continue
        parts = line.split("\t", 4)
        while len(parts) < 5:
            parts.append("")
        step, case, status, seconds, detail = parts
        try:
            secs = int(seconds)
        except ValueError:
            secs = 0
        if status not in STATUSES:
            out.append(("summary", "results", "FAIL", 0, f"bad results line: {line!r}"))
            continue
        out.append((step, case, status, secs, detail))
    return out


def table_rows(path):
    """[(size, oop_us, oop_busbw, ip_us, ip_busbw, hbm_frac or None)] of a perf table."""
    rows = []
    try:
        with open(path) as f:
            lines = f.readlines()
    except OSError:
        return rows
    for line in lines:
        fields = line.split()
        if len(fields) < 13 or not fields[0].isdigit():
            continue
        try:
            row = [int(fields[0]), float(fields[5]), float(fields[7]), float(fields[9]),
                   float(fields[11]), None]
            # The perf tools' roofline columns on device memory: bound (us), frac, frac in place.
            if len(fields) >= 16:
                row[5] = float(fields[14])
        except ValueError:
            continue
        rows.append(tuple(row))
    return rows


def nominal(size):
    """The power of two a row's size was asked as (allgather with 3 ranks rounds 1 MiB down to
    1048572 bytes, a whole number of elements per rank)."""
    return 1 << (size - 1).bit_length() if size > 0 else 0


def busbw_lines(tables, gbps):
    """BUSBW lines, and {(collective, ranks): {nominal size: cell text}} for the README table."""
    lines, cells = [], {}
    for collective, ranks, _label, path in tables:
        cell = cells.setdefault((collective, ranks), {})
        for size, us, busbw, _ip_us, _ip_busbw, hbm in table_rows(path):
            text = f"BUSBW {collective} t{ranks} {size} busbw={busbw:g} time={us:g}"
            frac = None
            if gbps:
                bound = memory_bound_goal.bound_us(collective, ranks, size, gbps)
                frac = bound / us if us > 0 else 0.0
                text += f" copy_frac={frac:.2f}"
            if hbm is not None:
                text += f" hbm_frac={hbm:.2f}"
            if size == LATENCY_BYTES or nominal(size) >= SHOWN_MIN_BYTES:
                lines.append(text)
            cell[nominal(size)] = f"{busbw:g}" + (f" ({frac:.2f})" if frac is not None else "")
    return lines, cells


def verdict(results):
    """(line, exit status) for the results."""
    bad = [f"{s}/{c}" for s, c, st, _, _ in results if st in FAILING]
    if bad:
        shown = ", ".join(bad[:12]) + (f", +{len(bad) - 12} more" if len(bad) > 12 else "")
        return f"GPU CHECK: FAILED ({len(bad)}: {shown})", 1
    if not any(st == "PASS" for _, _, st, _, _ in results):
        return "GPU CHECK: NOTHING RAN ON A GPU (every case skipped)", 2
    return "GPU CHECK: PASSED", 0


def readme_block(title, results, goal_lines, cells, gbps):
    out = ["----- perf/README.md GPU section: paste below -----", f"### {title}", ""]
    if gbps:
        out.append(f"Device-to-device copy: {gbps:g} GB/s copied (d2d_bandwidth).")
        out.append("")
    out += ["| step | case | result | s | detail |", "|---|---|---|---|---|"]
    for step, case, status, secs, detail in results:
        out.append(f"| {step} | {case} | {status} | {secs} | {detail.replace('|', '/')} |")
    if cells:
        keys = sorted(cells)
        sizes = sorted({s for k in keys for s in cells[k]})
        out += ["", "busbw GB/s per size (fraction of the copy bound), ranks on the one GPU "
                "(a size rounded down to whole elements per rank is shown as the power of two "
                "asked for):", ""]
        out.append("| size (B) | " + " | ".join(f"{c} t{r}" for c, r in keys) + " |")
        out.append("|---" * (len(keys) + 1) + "|")
        for size in sizes:
            out.append(f"| {size} | " + " | ".join(cells[k].get(size, "") for k in keys) + " |")
    if goal_lines:
        out += [""] + [f"- {g}" for g in goal_lines]
    out.append("----- end of the README block -----")
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", required=True)
    ap.add_argument("--d2d", default="")
    ap.add_argument("--goal", default="")
    ap.add_argument("--title", default="GPU check")
    ap.add_argument("--readme-out", default="")
    ap.add_argument("--rehearsal", action="store_true",
                    help="the run was on the fake driver: the verdict says so")
    ap.add_argument("--table", action="append", default=[])
    args = ap.parse_args(argv[1:])
    results = parse_results(args.results)
    tables = []
    for spec in args.table:
        parts = spec.split(":", 3)
        if len(parts) != 4 or not parts[1].isdigit():
            print(f"gpu_summary: bad table '{spec}'", file=sys.stderr)
            return 2
        tables.append((parts[0], int(parts[1]), parts[2], parts[3]))
    gbps = memory_bound_goal.copy_rate(args.d2d) if args.d2d else None
    goal_lines = []
    if args.goal and os.path.exists(args.goal):
        with open(args.goal) as f:
            goal_lines = [line.rstrip("\n") for line in f if line.strip()]
    lines, cells = busbw_lines(tables, gbps)
    block = "\n".join(readme_block(args.title, results, goal_lines, cells, gbps))
    print(block)
    if args.readme_out:
        with open(args.readme_out, "w") as f:
            f.write(block + "\n")
    print("== summary")
    for step, case, status, secs, detail in results:
        print(f"RESULT {step} {case} {status} {secs}s {detail}".rstrip())
    for line in lines:
        print(line)
    for line in goal_lines:
        print(line)
    counts = {s: sum(1 for r in results if r[2] == s) for s in STATUSES}
    print("TOTAL " + " ".join(f"{s.lower()}={counts[s]}" for s in STATUSES))
    line, status = verdict(results)
    if args.rehearsal:
        line = "REHEARSAL ON THE FAKE DRIVER, NOT A GPU: " + line
    print(line)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
