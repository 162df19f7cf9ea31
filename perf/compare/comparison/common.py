"""Collectives, libraries, sizes and formats of the comparison, and the result rows with
the lookups every table makes on them."""

import argparse
import math
import re


COLLS = ["allreduce", "allgather", "reducescatter", "broadcast", "alltoall"]


WEFT_TOOL = {
    "allreduce": "all_reduce_perf",
    "allgather": "all_gather_perf",
    "reducescatter": "reduce_scatter_perf",
    "broadcast": "broadcast_perf",
    "alltoall": "alltoall_perf",
}


SPLIT = {"allgather", "reducescatter", "alltoall"}  # element count must be a multiple of nranks


GLOO_ALGOS = {
    "allreduce": ["ring", "ring_chunked", "halving_doubling"],
    "allgather": ["default"],
    "broadcast": ["default"],
    "alltoall": ["default"],
}


LIBS = ["weft", "openmpi", "mpich", "gloo"]


SUMMARY_SIZES = [64 << 10, 1 << 20, 16 << 20, 128 << 20]


BOUND_MIN_BYTES = 16 << 20


def bus_factor(coll, n):
    if coll == "allreduce":
        return 2.0 * (n - 1) / n
    if coll == "broadcast":
        return 1.0
    return (n - 1) / n


def parse_bytes(text):
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kKmMgG]?)[bB]?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError("bad size '%s'" % text)
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]
    return int(float(m.group(1)) * scale)


def fmt_size(b):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= scale and b % scale == 0:
            return "%d%s" % (b // scale, unit)
    return "%d" % b


def fmt_bw(x):
    if x is None:
        return "-"
    if x < 0.01:
        return "%.1e" % x
    return "%.3f" % x if x < 10 else "%.2f" % x


def fmt_us(x):
    if x is None:
        return "-"
    return "%.1f" % x if x < 1000 else "%.0f" % x


def fmt_ratio(x):
    if x is None or math.isinf(x) or math.isnan(x):
        return "-"
    return "%.2f" % x


def elements(coll, size, n):
    count = size // 4
    if coll in SPLIT:
        count -= count % n
    return count


def make_result(lib, algo, coll, n, size, us, wrong, iters, spell=(None, None)):
    algbw = size / us / 1e3 if us > 0 else 0.0
    label = lib if algo in ("default", "out-of-place") else (
        "weft_inplace" if lib == "weft" else "%s_%s" % (lib, algo))
    return {"lib": lib, "algo": algo, "label": label, "coll": coll, "nranks": n, "bytes": size,
            "time_us": us, "algbw": algbw, "busbw": algbw * bus_factor(coll, n),
            "wrong": "" if wrong is None else wrong, "iters": iters,
            "spell_ns": spell[0], "spell_after_ns": spell[1]}


def positive(text):
    """A float from the text when it is one and > 0 (a spell reading; -1 means none), else None."""
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None


def good(r):
    return r["wrong"] in ("", 0)


def index_results(results):
    by = {}
    for r in results:
        by.setdefault((r["coll"], r["nranks"]), []).append(r)
    return by


def best_peer_at(rows, size, key):
    """The best correct peer row at `size`: max busbw (key='busbw') or min time (key='time_us')."""
    cands = [r for r in rows if r["lib"] != "weft" and r["bytes"] == size and good(r)]
    if not cands:
        return None
    return max(cands, key=lambda r: r["busbw"]) if key == "busbw" else min(
        cands, key=lambda r: r["time_us"])


def compared_variant(coll):
    """The Weft column compared with the peers: the one with the peers' buffer semantics."""
    return "in-place" if coll == "broadcast" else "out-of-place"


def weft_at(rows, size, algo=None):
    for r in rows:
        if (r["lib"] == "weft" and r["algo"] == (algo or compared_variant(r["coll"])) and
                r["bytes"] == size):
            return r
    return None


def latency_row(rows):
    """(size, weft row, best peer row) at the smallest size Weft measured (8 B, or the smallest
    multiple of nranks floats for the split collectives)."""
    sizes = sorted(r["bytes"] for r in rows
                   if r["lib"] == "weft" and r["algo"] == compared_variant(r["coll"]))
    if not sizes:
        return None
    size = sizes[0]
    return size, weft_at(rows, size), best_peer_at(rows, size, "time_us")
