#!/usr/bin/env python3
"""PyTorch's own "nccl" backend running on Weft's libnccl.so.2, unmodified: N processes on the
one GPU (NCCL itself refuses two ranks on one device), with all_reduce, all_gather,
reduce_scatter, broadcast and send/recv on CUDA tensors checked against values computed here;
then the same script on NCCL itself with one process, as the baseline. Weft is put in place of
NCCL with LD_PRELOAD, and each worker checks in /proc/self/maps which libnccl it runs on.

Usage: torch_nccl_check.py --weft PATH/libnccl.so.2 [--ranks 2]
Exit status 0: every check passed, 1: a failure, 77: no CUDA device.
"""
import argparse
import os
import socket
import subprocess
import sys


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loaded_nccl():
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "libnccl" in line}
    return sorted(paths)


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
    libs = loaded_nccl()
    if expect and not any(os.path.realpath(p) == os.path.realpath(expect) for p in libs):
        failures.append(f"libnccl loaded: {libs}, expected {expect}")
    dist.destroy_process_group()
    for f in failures:
        print(f"FAIL rank {rank}: {f}", flush=True)
    return 1 if failures else 0


def run(world, preload, label):
    port = free_port()
    env = dict(os.environ)
    if preload:
        env["LD_PRELOAD"] = os.path.abspath(preload)
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(r), str(world),
                               str(port), os.path.abspath(preload) if preload else ""],
                              env=env) for r in range(world)]
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=180))
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
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("skip: no CUDA device")
        sys.exit(77)
    ok = run(1, "", "torch's own NCCL (baseline)")
    ok = run(args.ranks, args.weft, "torch's nccl backend on Weft") and ok
    ok = run(1, args.weft, "torch's nccl backend on Weft, one process") and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
