#!/usr/bin/python3
"""Weft against the peers a CPU user would pick instead, side by side in one run.

For each collective and rank count, one after the other in the same invocation:
  weft     build/perf/<coll>_perf -y 1 under build/perf/weftrun -n N (nccl-tests table; blocking
           calls like the MPI and Gloo calls they are compared with; the out-of-place busbw is the
           number compared, except for broadcast, where MPI_Bcast and Gloo's broadcast work on one
           buffer and Weft's in-place column is compared; both columns are recorded)
  openmpi  mpirun.openmpi ... mpi_bench_openmpi   (MPI_Allreduce, MPI_Allgather,
  mpich    mpirun.mpich ... mpi_bench_mpich        MPI_Reduce_scatter_block, MPI_Bcast, MPI_Alltoall)
  gloo     gloo_bench: allreduce ring / ring_chunked / halving_doubling; allgather, broadcast,
           alltoall (TCP on 127.0.0.1)
plus the machine's memcpy / reduce bandwidth (mem_bench) at the start and at the end. All of it
runs --rounds times (default 3), the library order reversed every other round. A virtual machine's
speed changes in spells of seconds to minutes (where the hypervisor puts its CPUs: a cache line
crosses between them in ~60 ns or ~300 ns), so every measurement is tagged with a reading of that
round trip just before and just after it, and each cell compares the libraries' best rounds within
one spell: the one in which the best peer did best (see spell_matched). Each library's best round
whatever the spell is shown beside it and its goals listed for reference.

Prints a ratio table per collective and rank count (Weft busbw / best peer busbw per size, and the
small-message latency ratio best peer time / Weft time), the memory-traffic bound of a 2-rank
allreduce and Weft's fraction of it, the same bound for every collective and rank count with the
share Weft and the best peer reach and the room it leaves over that peer, and a summary table; writes CSV, the tables and one PNG per
collective and rank count (busbw and time against size) to the output directory.

The peer programs come from perf/compare/build_peers.sh (run automatically when missing).
Run with /usr/bin/python3 (matplotlib from python3-matplotlib).
"""

import argparse
import collections
import csv
import datetime
import math
import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

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


class Log:
    """Progress on stderr with the elapsed time; everything also into run.log."""

    def __init__(self, path):
        self.t0 = time.time()
        self.file = open(path, "w")

    def __call__(self, msg):
        line = "[%6.1fs] %s" % (time.time() - self.t0, msg)
        print(line, file=sys.stderr, flush=True)
        self.file.write(line + "\n")
        self.file.flush()


class Runner:
    """Runs one command (own process group, killed on timeout) and keeps its output in raw/."""

    def __init__(self, out_dir, log):
        self.raw = os.path.join(out_dir, "raw")
        os.makedirs(self.raw, exist_ok=True)
        self.log = log
        self.failures = []
        self.serial = 0

    def run(self, name, cmd, timeout):
        self.serial += 1
        path = os.path.join(self.raw, "%03d_%s.txt" % (self.serial, name))
        start = time.time()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True, errors="replace")
        timed_out = False
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the group this call started
            except ProcessLookupError:
                pass
            out, _ = proc.communicate()
        elapsed = time.time() - start
        with open(path, "w") as f:
            f.write("$ %s\n# rc=%s timed_out=%s elapsed=%.2fs\n" %
                    (" ".join(shlex.quote(c) for c in cmd), proc.returncode, timed_out, elapsed))
            f.write(out)
        ok = proc.returncode == 0 and not timed_out
        if not ok:
            why = "timed out after %ds" % timeout if timed_out else "exit status %s" % proc.returncode
            said = [line.strip() for line in out.splitlines()
                    if re.search(r"timeout|timed out|error|fail|abort", line, re.I)]
            if said:
                row = WEFT_ROW.match(said[-1])  # a message glued to a cut-short table row
                why += ": " + said[-1][row.end() if row else 0:].strip()[:160]
            self.failures.append("%s: %s (see raw/%s)" % (name, why, os.path.basename(path)))
            self.log("  FAILED %s: %s" % (name, why))
        return ok, out


# ---------------------------------------------------------------------------------------------
# Weft


# size count type redop root | time algbw busbw #wrong (out of place) | the same in place
WEFT_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+"
                      r"\s+([0-9.e+]+)\s+\S+\s+\S+\s+(N/A|[0-9.e+]+)"
                      r"(?:\s+([0-9.e+]+)\s+\S+\s+\S+\s+(N/A|[0-9.e+]+))?")


def parse_weft(text):
    """Rows of an nccl-tests table: (bytes, oop_us, oop_wrong, ip_us, ip_wrong); wrong None = N/A.
    A row cut short after the out-of-place columns (the in-place call failed) has ip_us None."""
    rows = []
    for line in text.splitlines():
        m = WEFT_ROW.match(line)
        if not m:
            continue
        try:
            size, oop = int(m.group(1)), float(m.group(3))
            ip = float(m.group(5)) if m.group(5) else None
            wrong = [None if w in (None, "N/A") else int(float(w)) for w in (m.group(4), m.group(6))]
        except ValueError:
            continue
        rows.append((size, oop, wrong[0], ip, wrong[1]))
    return rows


def plan_iters(budget, est_s, min_iters, max_iters):
    fit = budget / max(est_s, 1e-7)
    iters = int(min(max(fit * 0.8, min_iters), max_iters))
    warmup = 1 if fit < 8 else max(1, min(iters // 10, 10))
    return warmup, iters


def estimate_seconds(measured, size):
    """Seconds a call of `size` should take, from the last two sizes measured ((size, seconds)
    pairs): the line through them, between the last one's time (latency-bound sizes take the same
    time) and that time scaled by size (bandwidth-bound ones grow with it). Scaling alone would
    plan small sizes a fraction of their budget: 8 B to 1 KiB all take the same ~10 us with 4
    ranks on 2 cores, and a 1 KiB call planned at 128 times the 8 B one's time ran for 50 ms,
    against the peers' 240."""
    s1, t1 = measured[-1]
    scaled = t1 * size / s1
    if len(measured) < 2 or measured[-2][0] >= s1:
        return scaled
    s0, t0 = measured[-2]
    line = t1 + (t1 - t0) * (size - s1) / (s1 - s0)
    return min(max(line, t1), scaled)


def measure_weft(args, runner, coll, n, sizes):
    """One weftrun invocation per size, iterations sized from the sizes before it (a probe
    invocation first, and wherever the size jumps more than 4x). The probe times 10 calls: the
    first call after the tool's barrier wakes sleeping ranks (~100 us), which would make a
    2-call probe plan far too few iterations for small sizes. A loop that filled under a quarter
    of its budget runs again with iterations planned from its own time, as the peers' loops do
    (bench_util.h's timeCalls), so that every library's number comes from a loop as long."""
    tool = os.path.join(args.build, "perf", WEFT_TOOL[coll])
    weftrun = os.path.join(args.build, "perf", "weftrun")
    results = []
    measured = []  # (size, seconds per call) of the sizes measured since the last probe
    per_variant = args.time / 2  # out-of-place and in-place share the budget
    spell = None
    for size in sizes:
        if elements(coll, size, n) == 0:
            continue
        base = [weftrun, "-n", str(n), tool, "-b", str(size), "-e", str(size), "-a", "3", "-c", "1",
                "-y", "1", "-T", str(args.weft_timeout)]
        probed = not measured or size > 4 * measured[-1][0]
        if probed:
            measured = []
            ok, out = runner.run("weft_%s_n%d_%s_probe" % (coll, n, size),
                                 base + ["-n", "10", "-w", "2"], args.weft_timeout + 30)
            rows = parse_weft(out)
            if not ok or not rows:
                results += weft_results(coll, n, rows, 2)
                if not args.weft_keep_going:
                    runner.log("  weft %s n=%d: stopping the sweep at %s" % (coll, n, fmt_size(size)))
                    break
                continue
            est = max(rows[0][1], rows[0][3] or 0) * 1e-6
        else:
            est = estimate_seconds(measured, size)
        before = spell_probe(args) if probed else spell  # the last reading, unless a probe ran since
        for attempt in range(2):
            warmup, iters = plan_iters(per_variant, est, args.min_iters, args.max_iters)
            ok, out = runner.run("weft_%s_n%d_%s%s" % (coll, n, size, "_again" if attempt else ""),
                                 base + ["-n", str(iters), "-w", str(warmup)],
                                 args.weft_timeout * 2 + 60)
            rows = parse_weft(out)
            complete = ok and rows and rows[0][3] is not None
            if not complete:
                break
            took = max(rows[0][1], rows[0][3]) * 1e-6
            if iters * took >= per_variant / 4 or iters >= args.max_iters:
                break
            est = took
        spell = spell_probe(args)
        results += weft_results(coll, n, rows, iters, (before, spell))
        if not complete:
            if not args.weft_keep_going:
                runner.log("  weft %s n=%d: stopping the sweep at %s" % (coll, n, fmt_size(size)))
                break
            measured = []
            continue
        measured.append((size, took))
    return results


def weft_results(coll, n, rows, iters, spell=(None, None)):
    results = []
    for (b, oop, oop_wrong, ip, ip_wrong) in rows:
        for algo, us, wrong in (("out-of-place", oop, oop_wrong), ("in-place", ip, ip_wrong)):
            if us is not None:
                results.append(make_result("weft", algo, coll, n, b, us, wrong, iters, spell))
    return results


# ---------------------------------------------------------------------------------------------
# Spells
#
# A virtual machine's speed changes with where the hypervisor puts its virtual CPUs: a cache line
# crosses between two of them several times faster for a while, then slower, and back, every few
# seconds to minutes (perf/probes/line_round_trip.h; see perf/README.md, "Spells"). Latency-bound
# cells move with it several-fold, so every measurement is tagged with a reading of the round trip
# taken just before and just after it (the peer benchmarks take theirs between sizes, with the
# other ranks asleep), and each cell compares runs made in the same spell (see spell_matched).

SPELL_TRIPS = 4000  # a steady reading that stays within one spell
SPELL_MIN_SPREAD = 1.5  # two spells only when their typical round trips differ this much
SPELL_VALLEY_SHARE = 0.05  # and few readings fall between them


def spell_probe(args):
    """A cache line's round trip between the first two CPUs this script may use, in ns, or None
    (fewer than two CPUs, not pinned, or the probe failed)."""
    cpus = sorted(os.sched_getaffinity(0))[:2]
    if len(cpus) < 2:
        return None
    try:
        out = subprocess.run([os.path.join(args.build, "perf", "line_pingpong"), str(cpus[0]),
                              str(cpus[1]), str(SPELL_TRIPS)], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"round trip ([0-9.]+) ns", out)
    return float(m.group(1)) if m and "not pinned" not in out else None


def spell_split(rows):
    """The round trip (ns) that splits this run's spell readings into a fast and a slow spell, or
    None for one spell. Otsu's threshold on their logarithms (the split that leaves the two groups
    most apart), kept only when the groups' geometric means differ by SPELL_MIN_SPREAD or more and
    the middle third between them (in log) holds at most SPELL_VALLEY_SHARE of the readings: two
    spells leave a valley there, while one spell with a tail of disturbed readings does not."""
    vals = sorted(math.log(v) for v in spell_readings(rows))
    if len(vals) < 2:
        return None
    total, n = sum(vals), len(vals)
    best, below = None, 0.0
    for k in range(1, n):
        below += vals[k - 1]
        m0, m1 = below / k, (total - below) / (n - k)
        score = k * (n - k) * (m1 - m0) ** 2
        if vals[k] > vals[k - 1] and (best is None or score > best[0]):
            best = (score, k, m0, m1)
    if best is None or best[3] - best[2] < math.log(SPELL_MIN_SPREAD):
        return None
    _, k, m0, m1 = best
    lo, hi = m0 + (m1 - m0) / 3, m1 - (m1 - m0) / 3
    if sum(lo < v < hi for v in vals) > SPELL_VALLEY_SHARE * n:
        return None
    return math.exp((vals[k - 1] + vals[k]) / 2)


def spell_readings(rows):
    """Every spell reading of the rows (before and after each measurement), in ns."""
    return [v for r in rows for v in (r.get("spell_ns"), r.get("spell_after_ns")) if v]


def spell_of(r, split):
    """'fast' or 'slow' when both readings around the measurement agree, 'mixed' when the spell
    changed during it, 'one' when the run saw a single spell, None without readings."""
    before, after = r.get("spell_ns"), r.get("spell_after_ns")
    if not before or not after:
        return None
    if split is None:
        return "one"
    a, b = ("fast" if v < split else "slow" for v in (before, after))
    return a if a == b else "mixed"


# ---------------------------------------------------------------------------------------------
# Peers


PEER_ROW = re.compile(r"^@row (.*)$")


def parse_peer(text, lib):
    results = []
    for line in text.splitlines():
        m = PEER_ROW.match(line.strip())
        if not m:
            continue
        kv = dict(item.split("=", 1) for item in m.group(1).split())
        spell = tuple(positive(kv.get(k)) for k in ("spell_ns", "spell_after_ns"))
        results.append(make_result(lib, kv["algo"], kv["coll"], int(kv["nranks"]), int(kv["bytes"]),
                                   float(kv["time_us"]), int(kv["wrong"]), int(kv["iters"]), spell))
    return results


def positive(text):
    """A float from the text when it is one and > 0 (a spell reading; -1 means none), else None."""
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None


def peer_commands(args, lib, coll, n, sizes):
    """(name, algo, cmd) for each peer run of one collective and rank count."""
    bindir = args.peers_dir
    common = ["-o", coll, "-s", ",".join(str(s) for s in sizes), "-T", str(args.time),
              "-m", str(args.min_iters), "-n", str(args.max_iters)]
    if lib == "openmpi":
        return [("default", ["mpirun.openmpi", "--oversubscribe", "--allow-run-as-root",
                             "--bind-to", "none", "-np", str(n),
                             os.path.join(bindir, "mpi_bench_openmpi")] + common)]
    if lib == "mpich":
        return [("default", ["mpirun.mpich", "-n", str(n),
                             os.path.join(bindir, "mpi_bench_mpich")] + common)]
    if lib == "gloo":
        return [(algo, [os.path.join(bindir, "gloo_bench"), "-p", str(n)] + common +
                 ([] if algo == "default" else ["-a", algo]))
                for algo in GLOO_ALGOS.get(coll, [])]
    return []


def peer_timeout(args, sizes):
    return int(60 + len(sizes) * (args.time * 3 + 5))


def make_result(lib, algo, coll, n, size, us, wrong, iters, spell=(None, None)):
    algbw = size / us / 1e3 if us > 0 else 0.0
    label = lib if algo in ("default", "out-of-place") else (
        "weft_inplace" if lib == "weft" else "%s_%s" % (lib, algo))
    return {"lib": lib, "algo": algo, "label": label, "coll": coll, "nranks": n, "bytes": size,
            "time_us": us, "algbw": algbw, "busbw": algbw * bus_factor(coll, n),
            "wrong": "" if wrong is None else wrong, "iters": iters,
            "spell_ns": spell[0], "spell_after_ns": spell[1]}


# ---------------------------------------------------------------------------------------------
# Memory


def measure_mem(args, runner, tag):
    ok, out = runner.run("mem_%s" % tag, [os.path.join(args.peers_dir, "mem_bench"),
                                          "-r", str(args.mem_reps)], 300)
    rows = []
    for line in out.splitlines():
        if line.startswith("@mem "):
            kv = dict(item.split("=", 1) for item in line[5:].split())
            kv["when"] = tag
            rows.append(kv)
    return rows


def mem_best(mem_rows, test, threads, key):
    vals = [float(r[key]) for r in mem_rows if r["test"] == test and int(r["threads"]) == threads]
    return max(vals) if vals else None


# ---------------------------------------------------------------------------------------------
# Reporting


def index_results(results):
    by = {}
    for r in results:
        by.setdefault((r["coll"], r["nranks"]), []).append(r)
    return by


def good(r):
    return r["wrong"] in ("", 0)


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


def ratio_table(coll, n, rows, any_spell_rows):
    """Per size: Weft and the best peer in the cell's spell, their ratio, and the ratio of each
    library's best round whatever the spell."""
    lines = []
    sizes = sorted({r["bytes"] for r in rows})
    lines.append("## %s, %d ranks   (busbw GB/s; ratio = weft / best peer, > 1: Weft faster)" %
                 (coll, n))
    lines.append("%10s  %9s  %-24s %9s  %7s  %-5s  %9s" % ("size", "weft", "best peer", "busbw",
                                                          "ratio", "spell", "any spell"))
    for size in sizes:
        w = weft_at(rows, size)
        p = best_peer_at(rows, size, "busbw")
        ratio = w["busbw"] / p["busbw"] if w and p and p["busbw"] > 0 else None
        wa, pa = weft_at(any_spell_rows, size), best_peer_at(any_spell_rows, size, "busbw")
        any_ratio = wa["busbw"] / pa["busbw"] if wa and pa and pa["busbw"] > 0 else None
        spell = (w or p or {}).get("spell", "-")
        flag = ""
        if w and not good(w):
            flag = "  WEFT WRONG=%s" % w["wrong"]
        bad_peers = [r["label"] for r in rows
                     if r["lib"] != "weft" and r["bytes"] == size and not good(r)]
        if bad_peers:
            flag += "  (wrong results, excluded: %s)" % ",".join(bad_peers)
        lines.append("%10s  %9s  %-24s %9s  %7s  %-5s  %9s%s" % (
            fmt_size(size), fmt_bw(w["busbw"]) if w else "-", p["label"] if p else "-",
            fmt_bw(p["busbw"]) if p else "-", fmt_ratio(ratio), spell, fmt_ratio(any_ratio), flag))
    lat = latency_row(rows)
    if lat:
        size, w, p = lat
        lines.append("latency at %d B (us): weft %s | best peer %s %s | ratio best_peer_time/weft_time %s"
                     % (size, fmt_us(w["time_us"]), p["label"] if p else "-",
                        fmt_us(p["time_us"]) if p else "-",
                        fmt_ratio(p["time_us"] / w["time_us"]) if p and w["time_us"] > 0 else "-"))
    return lines


def latency_row(rows):
    """(size, weft row, best peer row) at the smallest size Weft measured (8 B, or the smallest
    multiple of nranks floats for the split collectives)."""
    sizes = sorted(r["bytes"] for r in rows
                   if r["lib"] == "weft" and r["algo"] == compared_variant(r["coll"]))
    if not sizes:
        return None
    size = sizes[0]
    return size, weft_at(rows, size), best_peer_at(rows, size, "time_us")


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


def ratios_over(rows, lo, hi=None):
    """(size, ratio) of Weft's busbw over the best peer's at every size in [lo, hi]."""
    out = []
    for size in sorted({r["bytes"] for r in rows if r["bytes"] >= lo and (hi is None or r["bytes"] <= hi)}):
        w, p = weft_at(rows, size), best_peer_at(rows, size, "busbw")
        if w and p and p["busbw"] > 0 and good(w):
            out.append((size, w["busbw"] / p["busbw"]))
    return out


def goal_line(name, pairs, want, fmt="%.2f"):
    """One goal: met when every (size, value) reaches `want`; names the worst size."""
    if not pairs:
        return "- %s: no data" % name
    worst = min(pairs, key=lambda x: x[1])
    met = worst[1] >= want
    return "- %s: %s (least %s at %s; %d sizes)" % (
        name, "met" if met else "NOT met", fmt % worst[1], fmt_size(worst[0]), len(pairs))


def goals_lines(by, mem_rows, colls, ranks, title):
    """The performance goals of the perf issue, each checked on this run's numbers."""
    lines = ["## %s (ratio = Weft busbw / best peer busbw; latency ratio = best peer time / Weft "
             "time)" % title]
    MI = 1 << 20

    def latency(n, peer=None):
        rows = by.get(("allreduce", n), [])
        lat = latency_row(rows)
        if not lat or not lat[1]:
            return []
        size, w = lat[0], lat[1]
        cands = [r for r in rows if r["lib"] != "weft" and r["bytes"] == size and good(r) and
                 (peer is None or r["lib"] == peer)]
        if not cands:
            return []
        p = min(cands, key=lambda r: r["time_us"])
        return [(size, p["time_us"] / w["time_us"])]

    if ("allreduce", 2) in by:
        rows = by[("allreduce", 2)]
        lines.append(goal_line("2 ranks, 8 B allreduce latency no worse than the best peer",
                               latency(2), 1.0))
        lines.append(goal_line("2 ranks, allreduce 64K-1M >= 1.5x", ratios_over(rows, 64 << 10, MI), 1.5))
        lines.append(goal_line("2 ranks, allreduce >= 16M >= 2.5x", ratios_over(rows, 16 * MI), 2.5))
        copy2 = mem_best(mem_rows, "memcpy", 2, "traffic_GBps")
        if copy2:
            bound = copy2 / 5
            share = [(size, w["busbw"] / bound) for size in sorted({r["bytes"] for r in rows})
                     if size >= 16 * MI for w in [weft_at(rows, size)] if w]
            lines.append(goal_line("2 ranks, allreduce >= 16M at >= 70%% of the memory bound "
                                   "(%.2f GB/s)" % bound, share, 0.70, "%.2f"))
    if ("allreduce", 4) in by:
        rows = by[("allreduce", 4)]
        lines.append(goal_line("4 ranks, 8 B allreduce latency no worse than Open MPI's",
                               latency(4, "openmpi"), 1.0))
        lines.append(goal_line("4 ranks, allreduce >= 16M >= 2x", ratios_over(rows, 16 * MI), 2.0))
    for coll in colls:
        if coll == "allreduce":
            continue
        for n in ranks:
            if (coll, n) in by:
                lines.append(goal_line("%s, %d ranks, >= 1M >= 1.5x" % (coll, n),
                                       ratios_over(by[(coll, n)], MI), 1.5))
                short = out_of_room(by, mem_rows, coll, n, 1.5)
                if short:
                    lines.append("  beyond any algorithm at %s: the copy ceiling is under 1.5x "
                                 "the best peer there" % ", ".join(short))
    slow = []
    cells = 0
    for coll in colls:
        for n in ranks:
            for size, ratio in ratios_over(by.get((coll, n), []), 0):
                cells += 1
                if ratio < 0.9:
                    slow.append("%s/%d/%s %.2f" % (coll, n, fmt_size(size), ratio))
    lines.append("- no size slower than the best peer by more than 10%%: %s (%d of %d cells under "
                 "0.9%s)" % ("met" if not slow else "NOT met", len(slow), cells,
                             ": " + ", ".join(slow) if slow else ""))
    return lines


def summary_table(by, colls, ranks):
    """Markdown: per collective and rank count, the small-message latency and busbw ratios."""
    head = ["collective", "ranks", "latency weft / best peer (us)", "lat ratio"]
    head += ["%s weft / best (GB/s)" % fmt_size(s) for s in SUMMARY_SIZES]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for coll in colls:
        for n in ranks:
            rows = by.get((coll, n))
            if not rows:
                continue
            cells = [coll, str(n)]
            lat = latency_row(rows)
            if lat and lat[1] and lat[2]:
                size, w, p = lat
                cells.append("%s / %s %s @%d B" % (fmt_us(w["time_us"]), fmt_us(p["time_us"]),
                                                   p["label"], size))
                cells.append(fmt_ratio(p["time_us"] / w["time_us"]))
            else:
                cells += ["-", "-"]
            for size in SUMMARY_SIZES:
                w, p = weft_at(rows, size), best_peer_at(rows, size, "busbw")
                if w and p and p["busbw"] > 0:
                    cells.append("%s / %s %s = **%.2f**" % (fmt_bw(w["busbw"]), fmt_bw(p["busbw"]),
                                                            p["label"], w["busbw"] / p["busbw"]))
                else:
                    cells.append("-")
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def plot(by, out_dir, bound, log):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        log("no plots: %s (install python3-matplotlib, run with /usr/bin/python3)" % e)
        return []
    paths = []
    colors = {"weft": "black", "weft_inplace": "dimgray", "openmpi": "tab:blue",
              "mpich": "tab:orange", "gloo_ring": "tab:green", "gloo_ring_chunked": "tab:olive",
              "gloo_halving_doubling": "tab:cyan", "gloo": "tab:green"}
    for (coll, n), rows in sorted(by.items()):
        labels = []
        for r in rows:
            if r["label"] not in labels:
                labels.append(r["label"])
        fig, (ax, ax2) = plt.subplots(2, 1, figsize=(9, 9), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 2]})
        for label in labels:
            pts = sorted((r["bytes"], r["busbw"], r["time_us"]) for r in rows
                         if r["label"] == label and good(r))
            if not pts:
                continue
            xs = [p[0] for p in pts]
            style = {"color": colors.get(label), "marker": "o", "markersize": 3}
            if label.startswith("weft"):
                style["linewidth"] = 2.2 if label == "weft" else 1.2
                style["linestyle"] = "-" if label == "weft" else "--"
            ax.plot(xs, [p[1] for p in pts], label=label, **style)
            ax2.plot(xs, [p[2] for p in pts], label=label, **style)
        if coll == "allreduce" and n == 2 and bound:
            ax.axhline(bound, color="red", linestyle=":", linewidth=1,
                       label="memory bound (memcpy traffic / 5)")
        ax.set_xscale("log", base=2)
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title("%s, %d ranks (host memory, float32; Weft vs peers, one run)" % (coll, n))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        ax2.set_xscale("log", base=2)
        ax2.set_yscale("log")
        ax2.set_ylabel("time per call (us)")
        ax2.set_xlabel("size (bytes)")
        ax2.grid(True, which="both", alpha=0.3)
        ticks = sorted({r["bytes"] for r in rows})
        ticks = [t for i, t in enumerate(ticks) if i % max(1, len(ticks) // 12) == 0]
        ax2.set_xticks(ticks)
        ax2.set_xticklabels([fmt_size(t) for t in ticks], rotation=45, fontsize=8)
        fig.tight_layout()
        path = os.path.join(out_dir, "busbw_%s_n%d.png" % (coll, n))
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------------


def measure_round(args, runner, log, colls, ranks, sizes, libs, rnd):
    """Every collective, rank count and library once, in this order; rows tagged with the round."""
    results = []
    for coll in colls:
        for n in ranks:
            csizes = [s for s in sizes if elements(coll, s, n) > 0]
            for lib in libs:
                t0 = time.time()
                if lib == "weft":
                    got = measure_weft(args, runner, coll, n, csizes)
                else:
                    got = []
                    for algo, cmd in peer_commands(args, lib, coll, n, csizes):
                        name = "%s_%s_n%d%s" % (lib, coll, n, "" if algo == "default" else "_" + algo)
                        ok, out = runner.run(name, cmd, peer_timeout(args, csizes))
                        got += parse_peer(out, lib)
                    if not got and lib == "gloo" and coll not in GLOO_ALGOS:
                        continue  # no gloo call for it
                wrong = sum(int(r["wrong"] or 0) for r in got)
                spells = spell_readings(got)
                log("%-13s n=%d %-8s %3d rows %5.1fs  spell %s%s" % (
                    coll, n, lib, len(got), time.time() - t0,
                    "%.0f-%.0f ns" % (min(spells), max(spells)) if spells else "-",
                    "  WRONG RESULTS: %d" % wrong if wrong else ""))
                for r in got:
                    r["round"] = rnd
                results += got
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"),
                    help="Weft build dir with perf/weftrun and perf/*_perf (default: %(default)s)")
    ap.add_argument("--peers-dir", help="peer programs (default: BUILD/perf/compare)")
    ap.add_argument("--ranks", default="2,4", help="rank counts (default: %(default)s)")
    ap.add_argument("--colls", default=",".join(COLLS), help="(default: %(default)s)")
    ap.add_argument("--libs", default=",".join(LIBS), help="(default: %(default)s)")
    ap.add_argument("--min", type=parse_bytes, default=8, help="smallest size (default: 8)")
    ap.add_argument("--max", type=parse_bytes, default=128 << 20,
                    help="largest size (default: 128M)")
    ap.add_argument("--step", type=int, default=2, help="size factor (default: %(default)s)")
    ap.add_argument("--sizes", help="explicit size list, e.g. 8,64K,1M (overrides --min/--max)")
    ap.add_argument("--time", type=float, default=0.3,
                    help="seconds of timed work per size and library (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="measure everything this many times, the library order reversed every "
                         "other round, and compare the libraries' best rounds within one spell "
                         "per cell (default: %(default)s)")
    ap.add_argument("--min-iters", type=int, default=3)
    ap.add_argument("--max-iters", type=int, default=100000,
                    help="most timed calls per size (default: %(default)s; loops of a few ms "
                         "at 4 ranks on 2 cores say more about the scheduler than the calls)")
    ap.add_argument("--mem-reps", type=int, default=5)
    ap.add_argument("--weft-timeout", type=int, default=15,
                    help="Weft's own -T per invocation, seconds (default: %(default)s)")
    ap.add_argument("--weft-keep-going", action="store_true",
                    help="after a failed Weft invocation go on with the next size (default: stop "
                         "that collective's sweep; its partial row is kept)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: sizes 8,64K,1M,16M, 2 ranks, 0.1 s per size")
    ap.add_argument("--out", help="output dir, outside the source tree or in a build folder "
                    "(default: BUILD/perf/results/<UTC timestamp>)")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--report", metavar="DIR",
                    help="measure nothing: print the tables and redraw the plots of the run in DIR")
    args = ap.parse_args()
    if args.report:
        report(os.path.abspath(args.report), Log(os.devnull), not args.no_plots)
        return 0

    if args.quick:
        args.sizes = args.sizes or "8,64K,1M,16M"
        args.ranks = "2"
        args.time = min(args.time, 0.1)
        args.mem_reps = min(args.mem_reps, 3)
        args.rounds = 1
    args.build = os.path.abspath(args.build)
    args.peers_dir = os.path.abspath(args.peers_dir or os.path.join(args.build, "perf", "compare"))
    ranks = [int(x) for x in args.ranks.split(",") if x]
    colls = [c for c in args.colls.split(",") if c]
    libs = [x for x in args.libs.split(",") if x]
    for c in colls:
        if c not in COLLS:
            ap.error("unknown collective %s (one of %s)" % (c, ",".join(COLLS)))
    for x in libs:
        if x not in LIBS:
            ap.error("unknown library %s (some of %s)" % (x, ",".join(LIBS)))
    if args.sizes:
        sizes = sorted({parse_bytes(s) for s in args.sizes.split(",") if s})
    else:
        sizes, s = [], max(1, args.min)
        while s <= args.max:
            sizes.append(s)
            s *= max(2, args.step)

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    out_dir = results_dir(args.out, args.build, stamp)
    if not out_dir:
        sys.exit("--out %s is inside the source tree: results go in a build directory or outside "
                 "the checkout (what a run found goes into perf/README.md's benchmark log)"
                 % args.out)
    os.makedirs(out_dir, exist_ok=True)
    log = Log(os.path.join(out_dir, "run.log"))
    runner = Runner(out_dir, log)

    if "weft" in libs:
        for tool in ["weftrun"] + [WEFT_TOOL[c] for c in colls]:
            if not os.access(os.path.join(args.build, "perf", tool), os.X_OK):
                sys.exit("missing %s/perf/%s: build Weft first (cmake -S %s -B %s -G Ninja && "
                         "ninja -C %s)" % (args.build, tool, REPO, args.build, args.build))
    peer_bins = [os.path.join(args.peers_dir, b)
                 for b in ("mem_bench", "mpi_bench_openmpi", "mpi_bench_mpich", "gloo_bench")]
    peer_srcs = [os.path.join(HERE, "peers", f) for f in os.listdir(os.path.join(HERE, "peers"))]
    peer_srcs.append(os.path.join(REPO, "perf", "probes", "line_round_trip.h"))
    if (not all(os.access(b, os.X_OK) for b in peer_bins) or
            max(map(os.path.getmtime, peer_srcs)) > min(map(os.path.getmtime, peer_bins))):
        log("building the peer programs: perf/compare/build_peers.sh %s" % args.build)
        subprocess.run([os.path.join(HERE, "build_peers.sh"), args.build], check=True)

    load_start = open("/proc/loadavg").read().split()[:3]
    git = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                         capture_output=True, text=True).stdout.strip()
    with open(os.path.join(out_dir, "meta.txt"), "w") as f:
        f.write("command: %s\n" % " ".join(shlex.quote(a) for a in sys.argv))
        f.write("utc: %s\nweft: %s (git %s)\nhost: %s, %d cpus, load %s\n" % (
            stamp, args.build, git, platform.node(), os.cpu_count(),
            open("/proc/loadavg").read().strip()))
        f.write("sizes: %s\nranks: %s\ncolls: %s\nlibs: %s\ntime per size: %.2fs\nrounds: %d\n" % (
            ",".join(fmt_size(s) for s in sizes), ranks, colls, libs, args.time, args.rounds))

    log("out: %s" % out_dir)
    log("sizes %s..%s (%d), ranks %s, %s" % (fmt_size(sizes[0]), fmt_size(sizes[-1]), len(sizes),
                                             ranks, ",".join(colls)))
    mem_rows = measure_mem(args, runner, "start")
    log("memcpy 2 threads: %s GB/s traffic" % mem_best(mem_rows, "memcpy", 2, "traffic_GBps"))

    results = []
    for rnd in range(1, args.rounds + 1):
        if args.rounds > 1:
            log("round %d of %d" % (rnd, args.rounds))
        results += measure_round(args, runner, log, colls, ranks, sizes,
                                 libs if rnd % 2 else libs[::-1], rnd)
    mem_rows += measure_mem(args, runner, "end")

    write_csv(os.path.join(out_dir, "results.csv"), RESULT_FIELDS, results)
    write_csv(os.path.join(out_dir, "mem.csv"), MEM_FIELDS, mem_rows)
    load_end = open("/proc/loadavg").read().split()[:3]
    with open(os.path.join(out_dir, "header.txt"), "w") as f:
        f.write("# Weft vs peers, %s UTC, sizes %s..%s, ranks %s (one run of %d round%s; "
                "each cell: the libraries' best rounds in one spell; busbw in GB/s = 1e9 B/s)\n"
                % (stamp, fmt_size(sizes[0]), fmt_size(sizes[-1]), ",".join(map(str, ranks)),
                   args.rounds, "s" if args.rounds > 1 else ""))
        f.write("# %d cpus; load average %s at the start, %s at the end; %.0f s; Weft git %s\n" % (
            os.cpu_count(), " ".join(load_start), " ".join(load_end), time.time() - log.t0, git))
    with open(os.path.join(out_dir, "failures.txt"), "w") as f:
        f.write("".join(x + "\n" for x in runner.failures))
    report(out_dir, log, not args.no_plots)
    log("done: %s" % out_dir)
    wrong = any(not good(r) for r in results)
    return 1 if wrong or runner.failures else 0


def results_dir(out, build, stamp):
    """Where a run writes: `out`, or BUILD/perf/results/<stamp>. Never the source tree outside a
    build folder (BUILD, or a top-level build* folder): result files committed there pile up,
    and the benchmark log of perf/README.md keeps what a run found. Returns None for such an
    `out`."""
    path = os.path.abspath(out or os.path.join(build, "perf", "results", stamp))
    def under(folder):
        rel = os.path.relpath(path, folder)
        return rel == os.curdir or not rel.startswith(os.pardir)
    if not under(REPO) or under(os.path.abspath(build)):
        return path
    top = os.path.relpath(path, REPO).split(os.sep)[0]
    return path if top.startswith("build") else None


RESULT_FIELDS = ["lib", "algo", "label", "coll", "nranks", "bytes", "time_us", "algbw", "busbw",
                 "wrong", "iters", "round", "spell_ns", "spell_after_ns"]
MEM_FIELDS = ["when", "test", "threads", "bytes", "reps", "time_us", "copy_GBps", "bw_GBps",
              "traffic_GBps", "cached_GBps", "streamed_GBps"]


def write_csv(path, fields, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: ("%.6g" % r[k] if isinstance(r.get(k), float) else r.get(k, ""))
                        for k in fields})


def read_results(path):
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            for k in ("nranks", "bytes", "iters"):
                r[k] = int(r[k])
            for k in ("time_us", "algbw", "busbw"):
                r[k] = float(r[k])
            r["wrong"] = int(r["wrong"]) if r["wrong"] != "" else ""
            r["round"] = int(r.get("round") or 1)
            for k in ("spell_ns", "spell_after_ns"):
                r[k] = positive(r.get(k))
            rows.append(r)
    return rows


def best_of_rounds(rows):
    """One row per library variant and cell: its fastest round, or a wrong one if any round was
    wrong (a wrong result is never hidden by a right one)."""
    best = {}
    for r in rows:
        key = variant(r)
        old = best.get(key)
        if old is None or (good(old) and (not good(r) or r["busbw"] > old["busbw"])):
            best[key] = r
    return list(best.values())


def spell_matched(rows, split):
    """Per cell (collective, ranks, size), each library variant's best round within one spell, the
    same spell for all of them: of the spells in which Weft's compared variant and at least one
    peer ran right, the one in which the best peer was fastest (the hardest on Weft). Rows carry
    'spell': that spell, or 'any' where no spell holds both (there: each library's best round
    whatever the spell). A variant's wrong round, in any spell, replaces its row: a wrong result
    is never hidden."""
    cells = {}
    for r in rows:
        cells.setdefault((r["coll"], r["nranks"], r["bytes"]), []).append(r)
    out = []
    for (coll, n, size), cell in sorted(cells.items()):
        everywhere = best_of_rounds(cell)
        picked, spell, peer_best = everywhere, "any", None
        for candidate in ("fast", "slow", "one"):
            best = best_of_rounds([r for r in cell if spell_of(r, split) == candidate])
            w, p = weft_at(best, size), best_peer_at(best, size, "busbw")
            if w and good(w) and p and (peer_best is None or p["busbw"] > peer_best):
                picked, spell, peer_best = best, candidate, p["busbw"]
        wrong = {variant(r): r for r in everywhere if not good(r)}
        for r in picked:
            out.append(dict(wrong.pop(variant(r), r), spell=spell))
        out += [dict(r, spell=spell) for r in wrong.values()]
    return out


def variant(r):
    return (r["lib"], r["algo"], r["coll"], r["nranks"], r["bytes"])


def spell_lines(raw, split, matched):
    """What the spell readings showed and how the cells were matched."""
    vals = sorted(spell_readings(raw))
    lines = ["## Spells (a cache line's round trip between the two first CPUs, read before and "
             "after every measurement)"]
    if not vals:
        return lines + ["(no spell readings: each library's best round per cell is compared)"]
    line = "%d readings, %.0f-%.0f ns (median %.0f)" % (len(vals), vals[0], vals[-1],
                                                         vals[len(vals) // 2])
    if split is None:
        lines.append(line + "; one spell (no two groups %.1fx apart)" % SPELL_MIN_SPREAD)
    else:
        fast = sum(v < split for v in vals)
        lines.append(line + "; split at %.0f ns: fast %d%%, slow %d%%" % (
            split, 100 * fast // len(vals), 100 - 100 * fast // len(vals)))
    tags = collections.Counter(spell_of(r, split) for r in raw)
    lines.append("measurements: %s" % ", ".join("%s %d" % (k or "unread", v)
                                               for k, v in sorted(tags.items(), key=str)))
    cells = {(r["coll"], r["nranks"], r["bytes"]): r["spell"] for r in matched}
    counts = collections.Counter(cells.values())
    lines.append("cells compared within one spell: %s ('any': no spell held Weft and a peer; each "
                 "library's best round there)" % ", ".join(
                     "%s %d" % kv for kv in sorted(counts.items())))
    return lines


def report(out_dir, log, plots):
    """Tables (stdout, tables.txt, summary.md) and plots from the files of one run."""
    raw = read_results(os.path.join(out_dir, "results.csv"))
    split = spell_split(raw)
    results = spell_matched(raw, split)
    by_any_spell = index_results(best_of_rounds(raw))
    with open(os.path.join(out_dir, "mem.csv"), newline="") as f:
        mem_rows = list(csv.DictReader(f))
    def lines(name):
        path = os.path.join(out_dir, name)
        return open(path).read().splitlines() if os.path.exists(path) else []

    text = lines("header.txt") + [""]
    failures = lines("failures.txt")
    colls = [c for c in COLLS if any(r["coll"] == c for r in results)]
    ranks = sorted({r["nranks"] for r in results})
    by = index_results(results)

    reps = sorted({r.get("reps") or "?" for r in mem_rows})
    text.append("## Memory (mem_bench, 256 MiB, best of %s; at the start and the end of the run)"
                % ",".join(reps))
    for when in sorted({r["when"] for r in mem_rows if r["test"] == "copyat"}, reverse=True):
        text.append("%-5s copy at a footprint per thread, 2 threads (GB/s copied): %s" % (when, ", ".join(
            "%s %s" % (fmt_size(int(r["bytes"])), r["copy_GBps"])
            for r in mem_rows if r["test"] == "copyat" and r["when"] == when)))
    for r in mem_rows:
        if r["test"] == "copyat":
            continue
        text.append("%-5s %-6s %d thread%s: %7s GB/s %-13s %7s GB/s memory traffic" % (
            r["when"], r["test"], int(r["threads"]), "s" if int(r["threads"]) > 1 else " ",
            r.get("copy_GBps") or r.get("bw_GBps"),
            "copied," if r["test"] == "memcpy" else "(bytes of a),", r["traffic_GBps"]))
    text.append("")
    text += spell_lines(raw, split, results) + [""]
    for coll in colls:
        for n in ranks:
            if (coll, n) in by:
                text += ratio_table(coll, n, by[(coll, n)], by_any_spell[(coll, n)]) + [""]
    blines, bound = bound_lines(by, mem_rows)
    text += blines + [""]
    text += all_bounds_lines(by, mem_rows, colls, ranks) + [""]
    text += copy_ceiling_lines(by, mem_rows, colls, ranks) + [""]
    text += goals_lines(by, mem_rows, colls, ranks, "Goals, checked on this run") + [""]
    text += goals_lines(by_any_spell, mem_rows, colls, ranks,
                        "The same goals on each library's best round whatever the spell "
                        "(for reference)") + [""]
    text.append("## Summary (Weft out-of-place, broadcast in-place; best peer per size; ratio > 1: Weft faster)")
    text += summary_table(by, colls, ranks) + [""]
    if failures:
        text.append("## Failed runs")
        text += ["- " + x for x in failures] + [""]
    out = "\n".join(text)
    print(out)
    with open(os.path.join(out_dir, "tables.txt"), "w") as f:
        f.write(out + "\n")
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write("\n".join(summary_table(by, colls, ranks)) + "\n")
    if plots:
        paths = plot(by, out_dir, bound, log)
        log("%d plots in %s" % (len(paths), out_dir))


if __name__ == "__main__":
    sys.exit(main())
