#!/usr/bin/env python3
"""PyTorch's own "nccl" backend running on Weft's libnccl.so.2, unmodified: N processes on the
one GPU (NCCL itself refuses two ranks on one device), with all_reduce, all_gather,
reduce_scatter, broadcast and send/recv on CUDA tensors checked against values computed here;
then the same script on NCCL itself with one process, as the baseline. Weft is put in place of
NCCL with LD_PRELOAD, and each worker checks in /proc/self/maps which libnccl it runs on: the
expected one must be mapped, no other libnccl may be, and ncclAllReduce as the process resolves it
must lie inside the expected library's mapping.

Usage: torch_nccl_check.py --weft PATH/libnccl.so.2 [--ranks 2] [--timeout SECONDS]
  --timeout: how long each run's processes may take (default 180), then they are killed
Exit status 0: every check passed, 1: a failure, 77: no PyTorch or no CUDA device.
"""
import argparse
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loaded_nccl():
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "libnccl" in line}
    return sorted(paths)


def library_problems(expect):
    """What is wrong with the libnccl this process runs on, [] when it is `expect` alone."""
    import ctypes

    problems = []
    libs = loaded_nccl()
    real = os.path.realpath(expect)
    if not any(os.path.realpath(p) == real for p in libs):
        problems.append(f"libnccl loaded: {libs}, expected {expect}")
    others = [p for p in libs if os.path.realpath(p) != real]
    if others:
        problems.append(f"another libnccl is mapped as well: {others}")
    # The address the process's own symbol lookup gives ncclAllReduce, inside which mapping.
    address = ctypes.cast(ctypes.CDLL(None).ncclAllReduce, ctypes.c_void_p).value
    owner = None
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            low, high = (int(x, 16) for x in fields[0].split("-"))
            if low <= address < high and len(fields) >= 6:
                owner = fields[-1]
    if owner is None or os.path.realpath(owner) != real:
        problems.append(f"ncclAllReduce resolves into {owner}, not {expect}")
    return problems


def worker(rank, world, port, expect):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    dev = torch.device("cuda", 0)
    failures = []

    def check(name, got, want):
        if not torch.equal(got.cpu(), want.cpu()):
            failures.append(f"{name}: got {got.flatten()[:4].tolist()} want "
                            f"{want.flatten()[:4].tolist()}")

    n = 1 << 18
    base = torch.arange(n, dtype=torch.float32, device=dev) % 7
    x = base + rank + 1
    dist.all_reduce(x)
    check("all_reduce", x, base * world + world * (world + 1) / 2)
    for dtype in (torch.float16, torch.bfloat16, torch.int32, torch.float64):
        y = torch.full((4097,), rank + 1, dtype=dtype, device=dev)
        dist.all_reduce(y, op=dist.ReduceOp.MAX)
        check(f"all_reduce max {dtype}", y, torch.full_like(y, world))
    out = torch.empty(world * n, device=dev)
    dist.all_gather_into_tensor(out, base + rank)
    check("all_gather", out, torch.cat([base + r for r in range(world)]))
    rs = torch.empty(n, device=dev)
    dist.reduce_scatter_tensor(rs, torch.cat([base + r for r in range(world)]))
    check("reduce_scatter", rs, (base + rank) * world)
    b = base + rank
    dist.broadcast(b, src=world - 1)
    check("broadcast", b, base + world - 1)
    if world > 1:
        if rank == 0:
            dist.send(base + 100, dst=1)
        elif rank == 1:
            r = torch.empty(n, device=dev)
            dist.recv(r, src=0)
            check("send/recv", r, base + 100)
    dist.barrier()
    torch.cuda.synchronize()
    if expect:
        failures += library_problems(expect)
    dist.destroy_process_group()
    for f in failures:
        print(f"FAIL rank {rank}: {f}", flush=True)
    return 1 if failures else 0


def run(world, preload, label, timeout, weft):
    port = free_port()
    env = dict(os.environ)
    if preload:
        env["LD_PRELOAD"] = os.path.abspath(preload)
    else:
        # The baseline: Weft's folder off the library path, so torch finds its own NCCL.
        weft_dir = os.path.realpath(os.path.dirname(weft))
        kept = [d for d in env.get("LD_LIBRARY_PATH", "").split(":")
                if d and os.path.realpath(d) != weft_dir]
        env["LD_LIBRARY_PATH"] = ":".join(kept)
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(r), str(world),
                               str(port), os.path.abspath(preload) if preload else ""],
                              env=env) for r in range(world)]
    codes = []
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append(124)
    ok = all(c == 0 for c in codes)
    print(f"{'ok  ' if ok else 'FAIL'} {label}: {world} process(es) on GPU 0, exit codes {codes}",
          flush=True)
    return ok


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        rank, world, port = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
        expect = sys.argv[5] if len(sys.argv) > 5 else ""
        sys.exit(worker(rank, world, port, expect))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weft", required=True, help="Weft's libnccl.so.2")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=180)
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"skip: no PyTorch ({e})")
        sys.exit(77)
    if not torch.cuda.is_available():
        print("skip: no CUDA device")
        sys.exit(77)
    w = args.weft
    ok = run(1, "", "torch's own NCCL (baseline)", args.timeout, w)
    ok = run(args.ranks, w, "torch's nccl backend on Weft", args.timeout, w) and ok
    ok = run(1, w, "torch's nccl backend on Weft, one process", args.timeout, w) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
