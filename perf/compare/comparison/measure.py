"""Running the measurements: Weft's perf tools under weftrun, the peer benchmarks and mem_bench,
each command in its own process group with a timeout, its output kept in raw/."""

import os
import re
import shlex
import signal
import subprocess
import sys
import time

from .common import GLOO_ALGOS, WEFT_TOOL, elements, fmt_size, make_result, positive
from .spells import spell_probe


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
