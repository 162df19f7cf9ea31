#!/usr/bin/env python3
"""torch.distributed all_reduce and all_gather through "weft" against "gloo", side by side.

    PYTHONPATH=build/python /usr/bin/python3 perf/torch_compare.py [--worlds 2 4]
        [--min-bytes 8] [--max-bytes 64M] [--iters-scale 1.0] [--plot torch_compare.png]
        [--csv torch_compare.csv]

For each world size it starts that many ranks on this host (env:// on a free port). Each rank
initializes the default group with "weft" and a second group over the same ranks with "gloo",
and for each size times the same float32 collective on both, one after the other. A row's time
is the slowest rank's mean per call (blocking calls, a barrier before each timed loop). The
size is the bytes of the all_reduce buffer, or of the all_gather output (all ranks' parts), as
nccl-tests counts them. Prints the table (and the speed-up of weft over gloo) and draws a plot.
"""

import argparse
import csv
import os
import socket
import subprocess
import sys
import time


def parse_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def sizes(lo, hi):
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= 8 if s < 4096 else 4
    if out[-1] != hi:
        out.append(hi)
    return sorted(set(out) | ({64 << 10} if lo <= 64 << 10 <= hi else set()))


def iterations(nbytes, scale):
    """Few calls for big buffers, more for small ones, at least 3."""
    return max(3, int(min(200, (32 << 20) / max(nbytes, 1)) * scale))


def worker(args):
    import torch
    import torch.distributed as dist
    import weft_torch  # noqa: F401  (registers "weft")

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("weft", init_method="env://", rank=rank, world_size=world)
    groups = {"weft": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    gloo = groups["gloo"]
    rows = []
    for coll in ("all_reduce", "all_gather"):
        for nbytes in sizes(args.min_bytes, args.max_bytes):
            count = max(1, nbytes // 4)
            if coll == "all_gather":
                count = max(1, count // world)
            src = torch.ones(count)
            out = [torch.empty(count) for _ in range(world)]
            n = iterations(nbytes, args.iters_scale)
            times = {}
            for name, group in groups.items():
                def call():
                    if coll == "all_reduce":
                        dist.all_reduce(src, group=group)
                    else:
                        dist.all_gather(out, src, group=group)
                call()  # warm-up: connections, plans
                dist.barrier(group=gloo)
                start = time.perf_counter()
                for _ in range(n):
                    call()
                elapsed = torch.tensor([(time.perf_counter() - start) / n], dtype=torch.float64)
                dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=gloo)
                times[name] = elapsed.item()
            if rank == 0:
                rows.append([coll, world, count * 4 * (world if coll == "all_gather" else 1),
                             n, times["weft"] * 1e6, times["gloo"] * 1e6])
                print(f"  {coll} {rows[-1][2]} B: weft {rows[-1][4]:.1f} us, "
                      f"gloo {rows[-1][5]:.1f} us", file=sys.stderr, flush=True)
    if rank == 0:
        with open(args.rows_out, "w", newline="") as f:
            csv.writer(f).writerows(rows)
    dist.barrier(group=gloo)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_world(args, world, rows_out):
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--rows-out", rows_out,
               "--min-bytes", str(args.min_bytes), "--max-bytes", str(args.max_bytes),
               "--iters-scale", str(args.iters_scale)]
        procs.append(subprocess.Popen(cmd, env=env))
    codes = [p.wait(timeout=args.timeout) for p in procs]
    if any(codes):
        sys.exit(f"world {world}: ranks exited with {codes}")
    with open(rows_out) as f:
        return [[r[0], int(r[1]), int(r[2]), int(r[3]), float(r[4]), float(r[5])]
                for r in csv.reader(f)]


def busbw(coll, world, nbytes, us):
    factor = 2 * (world - 1) / world if coll == "all_reduce" else (world - 1) / world
    return nbytes / (us * 1e-6) * factor / 1e9


def print_table(rows):
    head = (f"{'collective':<11}{'ranks':>6}{'bytes':>11}{'iters':>6}{'weft us':>11}"
            f"{'gloo us':>11}{'weft GB/s':>11}{'gloo GB/s':>11}{'speed-up':>10}")
    print(head)
    print("-" * len(head))
    for coll, world, nbytes, n, weft, gloo in rows:
        print(f"{coll:<11}{world:>6}{nbytes:>11}{n:>6}{weft:>11.1f}{gloo:>11.1f}"
              f"{busbw(coll, world, nbytes, weft):>11.3f}{busbw(coll, world, nbytes, gloo):>11.3f}"
              f"{gloo / weft:>9.2f}x")
    print("(GB/s: bus bandwidth as nccl-tests computes it; speed-up: gloo time / weft time)")


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colls = sorted({r[0] for r in rows}, reverse=True)
    fig, axes = plt.subplots(1, len(colls), figsize=(6 * len(colls), 4.5), squeeze=False)
    for ax, coll in zip(axes[0], colls):
        for world in sorted({r[1] for r in rows}):
            sel = [r for r in rows if r[0] == coll and r[1] == world]
            x = [r[2] for r in sel]
            ax.plot(x, [r[4] for r in sel], "o-", label=f"weft, {world} ranks")
            ax.plot(x, [r[5] for r in sel], "s--", label=f"gloo, {world} ranks")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("bytes")
        ax.set_ylabel("time per call (us)")
        ax.set_title(f"torch.distributed {coll}, CPU tensors")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    p.add_argument("--min-bytes", type=parse_bytes, default=8)
    p.add_argument("--max-bytes", type=parse_bytes, default=64 << 20)
    p.add_argument("--iters-scale", type=float, default=1.0,
                   help="multiplies the number of timed calls per size")
    p.add_argument("--plot", default="torch_compare.png")
    p.add_argument("--csv", default="torch_compare.csv")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per world size")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--rows-out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return
    rows = []
    for world in args.worlds:
        print(f"world {world} ...", file=sys.stderr, flush=True)
        rows += run_world(args, world, f"{args.csv}.world{world}.tmp")
        os.remove(f"{args.csv}.world{world}.tmp")
    with open(args.csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["collective", "ranks", "bytes", "iters", "weft_us", "gloo_us"])
        w.writerows(rows)
    print_table(rows)
    plot(rows, args.plot)


if __name__ == "__main__":
    main()
