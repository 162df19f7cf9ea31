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
import datetime
import os
import platform
import shlex
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ among the sources (comparison/ is imported)

from comparison.bounds import mem_best
from comparison.common import (COLLS, GLOO_ALGOS, LIBS, WEFT_TOOL, elements, fmt_size, good,
                               parse_bytes)
from comparison.measure import (Log, Runner, measure_mem, measure_weft, parse_peer,
                                peer_commands, peer_timeout)
from comparison.report import MEM_FIELDS, RESULT_FIELDS, report, write_csv
from comparison.spells import spell_readings

# Read through this module by tests/perf/compare_spells_test.py.
from comparison.common import best_peer_at, make_result, weft_at  # noqa: F401
from comparison.measure import estimate_seconds  # noqa: F401
from comparison.spells import best_of_rounds, spell_matched, spell_of, spell_split  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


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


if __name__ == "__main__":
    sys.exit(main())
