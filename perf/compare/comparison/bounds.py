"""What the machine's memory allows: the memory-traffic bounds of single-copy algorithms and the
copy ceilings of the collectives that only copy, from mem_bench's rows, beside Weft and the best
peer."""

from .common import (BOUND_MIN_BYTES, best_peer_at, fmt_bw, fmt_ratio, fmt_size, weft_at)


def mem_best(mem_rows, test, threads, key):
    vals = [float(r[key]) for r in mem_rows if r["test"] == test and int(r["threads"]) == threads]
    return max(vals) if vals else None


def bound_lines(by, mem_rows):
    copy2 = mem_best(mem_rows, "memcpy", 2, "traffic_GBps")
    red2 = mem_best(mem_rows, "reduce", 2, "traffic_GBps")
    lines = ["## Memory-traffic bound, 2-rank allreduce"]
    if copy2 is None:
        lines.append("(no mem_bench result)")
        return lines, None
    bound = copy2 / 5
    lines += [
        "2-thread memcpy traffic (read+write) = %.2f GB/s (best of the runs at the start and end)"
        % copy2,
        "bound busbw = memcpy traffic / 5 = %.2f GB/s.  Why 5: a 2-rank allreduce of N bytes whose"
        % bound,
        "ranks read each other's buffers directly moves at least 5N bytes through memory, both ranks",
        "together: each rank reduces its half (reads 2 x N/2, writes N/2) and fetches the other half",
        "(reads N/2, writes N/2) = 2.5N per rank. So t >= 5N / traffic, algbw = N/t <= traffic/5, and",
        "busbw = algbw for 2 ranks. (The a+=b reduce traffic, %s GB/s, would give %s GB/s.)" % (
            "%.2f" % red2 if red2 else "-", "%.2f" % (red2 / 5) if red2 else "-"),
    ]
    rows = by.get(("allreduce", 2), [])
    sizes = sorted({r["bytes"] for r in rows if r["bytes"] >= BOUND_MIN_BYTES})
    if sizes:
        lines.append("%10s  %9s  %9s  %9s  %9s" % ("size", "weft", "of bound", "best peer",
                                                   "of bound"))
    for size in sizes:
        w = weft_at(rows, size)
        p = best_peer_at(rows, size, "busbw")
        lines.append("%10s  %9s  %8s%%  %9s  %8s%%" % (
            fmt_size(size), fmt_bw(w["busbw"]) if w else "-",
            "%.0f" % (100 * w["busbw"] / bound) if w else "-",
            fmt_bw(p["busbw"]) if p else "-",
            "%.0f" % (100 * p["busbw"] / bound) if p else "-"))
    return lines, bound


# Least memory traffic of a call, both read and written bytes of every rank together, per byte of
# the nccl-tests size N, for single-copy algorithms (ranks read each other's buffers directly,
# every byte read or written once, results written without a read-for-ownership). n = ranks.
#   allreduce      each rank sums its 1/n (reads n x N/n, writes N/n), then fetches the other
#                  (n-1)/n (reads and writes (n-1)N/n): (3n - 1) N in all
#   allgather      each rank reads its block and n-1 peers' blocks (N) and writes its output (N)
#   alltoall       the same: N read, N written per rank
#   reducescatter  each rank reads its 1/n of every input (N) and writes N/n: (n + 1) N
#   broadcast      each non-root reads N from the root and writes N: 2 (n - 1) N
TRAFFIC_PER_BYTE = {
    "allreduce": lambda n: 3 * n - 1,
    "allgather": lambda n: 2 * n,
    "alltoall": lambda n: 2 * n,
    "reducescatter": lambda n: n + 1,
    "broadcast": lambda n: 2 * (n - 1),
}


BUSBW_FACTOR = {
    "allreduce": lambda n: 2.0 * (n - 1) / n,
    "allgather": lambda n: (n - 1.0) / n,
    "alltoall": lambda n: (n - 1.0) / n,
    "reducescatter": lambda n: (n - 1.0) / n,
    "broadcast": lambda n: 1.0,
}


ALL_BOUNDS_MIN_BYTES = 1 << 20


def traffic_bound_busbw(coll, n, traffic):
    """Highest busbw a single-copy algorithm reaches when memory moves `traffic` GB/s (read +
    written) and no byte comes from cache: t >= traffic_per_byte x N / traffic."""
    return BUSBW_FACTOR[coll](n) * traffic / TRAFFIC_PER_BYTE[coll](n)


def all_bounds_lines(by, mem_rows, colls, ranks):
    """Per collective and rank count (>= 1 MiB): Weft's and the best peer's busbw as a share of the
    memory-traffic bound, and the largest Weft / best-peer ratio the bound leaves (bound / peer).
    Shares above 100% mean the data was (partly) served from cache at that size."""
    copy2 = mem_best(mem_rows, "memcpy", 2, "traffic_GBps")
    lines = ["## Memory-traffic bounds, every collective (sizes >= 1M)"]
    if copy2 is None:
        return lines + ["(no mem_bench result)"]
    lines += [
        "bound busbw = busbw factor x 2-thread memcpy traffic (%.2f GB/s) / least traffic per byte:" % copy2,
        "allreduce 3n-1 (5 at n=2, 11 at n=4), allgather and alltoall 2n, reducescatter n+1,",
        "broadcast 2(n-1) (single-copy: ranks read peers' buffers directly, each byte read or",
        "written once). 'room' = bound / best peer: the largest ratio over that peer any single-copy",
        "algorithm can reach unless the data stays in cache; shares over 100% mean it did.",
    ]
    for coll in colls:
        for n in ranks:
            rows = by.get((coll, n))
            if not rows:
                continue
            bound = traffic_bound_busbw(coll, n, copy2)
            sizes = sorted({r["bytes"] for r in rows if r["bytes"] >= ALL_BOUNDS_MIN_BYTES})
            if not sizes:
                continue
            lines.append("%s, %d ranks: bound %.2f GB/s" % (coll, n, bound))
            lines.append("%10s  %9s  %8s  %9s  %8s  %6s" % ("size", "weft", "of bound",
                                                          "best peer", "of bound", "room"))
            for size in sizes:
                w = weft_at(rows, size)
                p = best_peer_at(rows, size, "busbw")
                pct = lambda r: "%.0f%%" % (100 * r["busbw"] / bound) if r else "-"
                room = fmt_ratio(bound / p["busbw"]) if p and p["busbw"] > 0 else "-"
                lines.append("%10s  %9s  %8s  %9s  %8s  %6s" % (
                    fmt_size(size), fmt_bw(w["busbw"]) if w else "-", pct(w),
                    fmt_bw(p["busbw"]) if p else "-", pct(p), room))
    return lines


# Collectives whose ranks only copy: every rank writes N bytes of output, each read from some
# input. At most the machine's copy rate at the same footprint (mem_bench copyat), so busbw <=
# factor x N / (n N / copy rate). An allgather that reads each input once and writes it into
# every output (loads N, stores n N in all) can pass this ceiling; an alltoall cannot (each of its
# n N bytes is read once and written once, whatever the algorithm).
COPY_COLLS = ("allgather", "alltoall")


def copy_at(mem_rows, footprint):
    """Best 2-thread copy rate (GB/s copied) at the smallest measured footprint >= `footprint`
    (the largest measured one beyond that); None without copyat rows."""
    rates = {}
    for r in mem_rows:
        if r["test"] == "copyat":
            f = int(r["bytes"])
            rates[f] = max(rates.get(f, 0.0), float(r["copy_GBps"]))
    if not rates:
        return None
    fits = [f for f in rates if f >= footprint]
    return rates[min(fits) if fits else max(rates)]


def copy_ceiling(mem_rows, coll, n, size):
    """Highest busbw of `coll` on n ranks at `size` when copying runs at the machine's 2-thread
    copy rate: each rank copies `size` bytes (its footprint: read `size`, write `size`), n / 2
    ranks per core."""
    rate = copy_at(mem_rows, size * max(1, n // 2))
    return None if rate is None else BUSBW_FACTOR[coll](n) * rate / n


def copy_ceiling_lines(by, mem_rows, colls, ranks):
    lines = ["## Copy ceilings, allgather and alltoall (sizes >= 1M)",
             "ceiling busbw = busbw factor x copy rate / n: every rank copies N bytes, at the 2-thread",
             "copy rate mem_bench measures at that footprint per core (cached or non-temporal stores,",
             "whichever is faster; caches included). 'room' = ceiling / best peer: the largest ratio",
             "any algorithm that copies each byte once can reach. An alltoall cannot copy less; an",
             "allgather that writes each input into every output while it is loaded can. With more",
             "ranks than cores (footprint n/2 x N per core) and near the cache cliff the footprint",
             "match is rough: shares over 100% there mean caches served more than mem_bench saw."]
    if copy_at(mem_rows, 1) is None:
        return lines + ["(no copyat rows in mem.csv)"]
    for coll in colls:
        if coll not in COPY_COLLS:
            continue
        for n in ranks:
            rows = by.get((coll, n))
            sizes = sorted({r["bytes"] for r in rows or [] if r["bytes"] >= ALL_BOUNDS_MIN_BYTES})
            if not sizes:
                continue
            lines.append("%s, %d ranks" % (coll, n))
            lines.append("%10s  %9s  %9s  %8s  %9s  %8s  %6s" % (
                "size", "ceiling", "weft", "of ceil", "best peer", "of ceil", "room"))
            for size in sizes:
                ceil = copy_ceiling(mem_rows, coll, n, size)
                w, p = weft_at(rows, size), best_peer_at(rows, size, "busbw")
                pct = lambda r: "%.0f%%" % (100 * r["busbw"] / ceil) if r else "-"
                lines.append("%10s  %9s  %9s  %8s  %9s  %8s  %6s" % (
                    fmt_size(size), fmt_bw(ceil), fmt_bw(w["busbw"]) if w else "-", pct(w),
                    fmt_bw(p["busbw"]) if p else "-", pct(p),
                    fmt_ratio(ceil / p["busbw"]) if p and p["busbw"] > 0 else "-"))
    return lines


def out_of_room(by, mem_rows, coll, n, want):
    """Sizes >= 1M where the copy ceiling leaves less than `want` x the best peer. Alltoall on 2
    ranks only: there the ceiling binds every algorithm and mem_bench's 2 threads have the ranks'
    footprint; with more ranks than cores the footprint is an estimate."""
    if coll != "alltoall" or n != 2:
        return []
    out = []
    for size in sorted({r["bytes"] for r in by.get((coll, n), []) if r["bytes"] >= ALL_BOUNDS_MIN_BYTES}):
        ceil, p = copy_ceiling(mem_rows, coll, n, size), best_peer_at(by[(coll, n)], size, "busbw")
        w = weft_at(by[(coll, n)], size)
        # Where a run beat the ceiling, caches served more than mem_bench saw: no claim there.
        beaten = any(r["busbw"] > ceil for r in (w, p) if r) if ceil else True
        if ceil and p and p["busbw"] > 0 and ceil / p["busbw"] < want and not beaten:
            out.append("%s (room %.2f)" % (fmt_size(size), ceil / p["busbw"]))
    return out
