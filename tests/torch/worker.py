"""One rank of a weft_torch test: python3 worker.py SCENARIO [env|tcp|tcpstore|filestore].

RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT come from the environment; the second argument
picks how init_process_group meets the others (default env://; filestore reads the file's path
from WEFT_TEST_STORE_FILE).
Every expected value is computed here from the inputs of all ranks; a failed check raises, so
the process exits non-zero with the rank and the check in its message. Scenarios:

  collectives  every collective, dtype and reduce op; uneven all-to-all; subgroups; p2p;
               non-contiguous tensors; refused calls
  timeout      rank 1 skips collectives: Work.wait(timeout) and the group's timeout both raise
  killed       the last rank is killed during a stream of all-reduces: the others raise
  ddp          DistributedDataParallel on "weft" against "gloo", float32 and float64
"""

import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import weft_torch  # registers the "weft" backend

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
R = dist.ReduceOp

# Reduced with every op (the types NCCL and PyTorch share).
REDUCE_DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16,
                 torch.bfloat16, torch.float32, torch.float64]
# Moved as bytes by broadcast, gathers, scatters and all-to-all: any dtype.
MOVE_DTYPES = REDUCE_DTYPES + [torch.bool, torch.int16, torch.complex64, torch.complex128]
OPS = {"SUM": R.SUM, "PRODUCT": R.PRODUCT, "MIN": R.MIN, "MAX": R.MAX, "AVG": R.AVG}
TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-6, torch.float64: 1e-12,
             torch.complex64: 1e-6, torch.complex128: 1e-12}


def fail(what):
    raise AssertionError(f"rank {RANK} of {WORLD}: {what}")


def expect_equal(actual, expected, what):
    expected = expected.to(actual.dtype)
    if actual.shape != expected.shape:
        fail(f"{what}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    tol = TOLERANCE.get(actual.dtype, 0)
    if tol:
        ok = torch.allclose(actual, expected, rtol=tol, atol=tol)
    else:
        ok = torch.equal(actual, expected)
    if not ok:
        fail(f"{what}: got {actual.flatten()[:8].tolist()}..., "
             f"expected {expected.flatten()[:8].tolist()}...")


def rank_values(rank, n, op="SUM", salt=0):
    """Rank `rank`'s input as int64: small values, so sums and products fit every dtype."""
    base = torch.arange(n, dtype=torch.int64) + salt * 7
    if op == "PRODUCT":
        return 1 + (base + rank) % 2
    return (base * 3 + rank * 5) % 11


def as_dtype(values, dtype):
    return (values % 2).to(dtype) if dtype == torch.bool else values.to(dtype)


def reduced(inputs, op, dtype):
    """What reducing the ranks' int64 inputs with `op` gives, in `dtype`."""
    stack = torch.stack(inputs)
    if dtype == torch.bool:
        stack = stack % 2
        return {"SUM": stack.amax(0), "MAX": stack.amax(0), "PRODUCT": stack.amin(0),
                "MIN": stack.amin(0)}[op].to(torch.bool)
    if op == "SUM":
        return stack.sum(0).to(dtype)
    if op == "PRODUCT":
        return stack.prod(0).to(dtype)
    if op == "MIN":
        return stack.amin(0).to(dtype)
    if op == "MAX":
        return stack.amax(0).to(dtype)
    if dtype.is_floating_point or dtype.is_complex:
        return (stack.sum(0).double() / len(inputs)).to(dtype)
    return torch.div(stack.sum(0), len(inputs), rounding_mode="trunc").to(dtype)


def check_all_reduce(group, ranks):
    me = ranks.index(RANK)
    for n in (1, 37):
        for dtype in REDUCE_DTYPES + [torch.bool, torch.complex64, torch.complex128]:
            for name, op in OPS.items():
                if dtype == torch.bool and name == "AVG":
                    continue
                if dtype.is_complex and name not in ("SUM", "AVG"):
                    continue
                t = as_dtype(rank_values(me, n, name), dtype)
                dist.all_reduce(t, op=op, group=group)
                inputs = [rank_values(r, n, name) for r in range(len(ranks))]
                expect_equal(t, reduced(inputs, name, dtype), f"all_reduce {name} {dtype} n={n}")
    # Sizes that take the pipelined, sliced paths.
    for n in (4099, 1 << 20):
        t = rank_values(me, n).float()
        dist.all_reduce(t, group=group)
        expect_equal(t, reduced([rank_values(r, n) for r in range(len(ranks))], "SUM",
                                torch.float32), f"all_reduce SUM float32 n={n}")


def check_reduce():
    root = WORLD - 1
    for dtype in REDUCE_DTYPES:
        for name, op in OPS.items():
            t = as_dtype(rank_values(RANK, 37, name), dtype)
            dist.reduce(t, dst=root, op=op)
            if RANK == root:
                inputs = [rank_values(r, 37, name) for r in range(WORLD)]
                expect_equal(t, reduced(inputs, name, dtype), f"reduce {name} {dtype}")


def check_broadcast_and_gathers():
    root = 1 % WORLD
    n = 29
    for dtype in MOVE_DTYPES:
        every = [as_dtype(rank_values(r, n), dtype) for r in range(WORLD)]
        t = every[RANK].clone()
        dist.broadcast(t, src=root)
        expect_equal(t, every[root], f"broadcast {dtype}")

        outs = [torch.empty_like(every[0]) for _ in range(WORLD)]
        dist.all_gather(outs, every[RANK])
        for r in range(WORLD):
            expect_equal(outs[r], every[r], f"all_gather {dtype} slot {r}")

        flat = torch.empty(WORLD * n, dtype=dtype)
        dist.all_gather_into_tensor(flat, every[RANK])
        expect_equal(flat, torch.cat(every), f"all_gather_into_tensor {dtype}")

        gathered = [torch.empty_like(every[0]) for _ in range(WORLD)] if RANK == root else None
        dist.gather(every[RANK], gather_list=gathered, dst=root)
        if RANK == root:
            for r in range(WORLD):
                expect_equal(gathered[r], every[r], f"gather {dtype} slot {r}")

        pieces = [as_dtype(rank_values(r, n, salt=3), dtype) for r in range(WORLD)]
        out = torch.empty_like(pieces[0])
        dist.scatter(out, scatter_list=pieces if RANK == root else None, src=root)
        expect_equal(out, pieces[RANK], f"scatter {dtype}")
    # A 2-D output of the base all-gather.
    out = torch.empty(WORLD, 5)
    dist.all_gather_into_tensor(out, torch.full((5,), float(RANK)))
    expect_equal(out, torch.arange(WORLD).float().unsqueeze(1).expand(WORLD, 5), "2-D allgather")


def check_reduce_scatter():
    n = 23
    for dtype in REDUCE_DTYPES:
        for name in OPS:
            mine = [as_dtype(rank_values(RANK, n, name, salt=j), dtype) for j in range(WORLD)]
            out = torch.empty(n, dtype=dtype)
            dist.reduce_scatter(out, mine, op=OPS[name])
            inputs = [rank_values(r, n, name, salt=RANK) for r in range(WORLD)]
            expect_equal(out, reduced(inputs, name, dtype), f"reduce_scatter {name} {dtype}")

            out2 = torch.empty(n, dtype=dtype)
            dist.reduce_scatter_tensor(out2, torch.cat(mine), op=OPS[name])
            expect_equal(out2, reduced(inputs, name, dtype), f"reduce_scatter_tensor {name} {dtype}")


def a2a_value(src, dst, index):
    return src * 10000 + dst * 100 + index


def check_all_to_all():
    n = 6
    for dtype in (torch.int64, torch.float64, torch.float16, torch.int8):
        # Equal splits; values below 128 survive int8.
        src = torch.tensor([(RANK * WORLD + i) % 97 for i in range(WORLD * n)]).to(dtype)
        out = torch.empty_like(src)
        dist.all_to_all_single(out, src)
        want = torch.cat([torch.tensor([(r * WORLD + RANK * n + i) % 97 for i in range(n)])
                          for r in range(WORLD)])
        expect_equal(out, want, f"all_to_all_single equal {dtype}")
    # Uneven splits (some empty), rows of a 2-D tensor: rank s sends (2s + d) % 3 rows to d.
    sends = [(2 * RANK + d) % 3 for d in range(WORLD)]
    recvs = [(2 * s + RANK) % 3 for s in range(WORLD)]
    rows = [torch.tensor([[a2a_value(RANK, d, i), -i] for i in range(sends[d])],
                         dtype=torch.int64).reshape(-1, 2) for d in range(WORLD)]
    out = torch.full((sum(recvs), 2), -1, dtype=torch.int64)
    dist.all_to_all_single(out, torch.cat(rows), output_split_sizes=recvs,
                           input_split_sizes=sends)
    want = torch.cat([torch.tensor([[a2a_value(s, RANK, i), -i] for i in range(recvs[s])],
                                   dtype=torch.int64).reshape(-1, 2) for s in range(WORLD)])
    expect_equal(out, want, "all_to_all_single uneven")
    # The list form with uneven sizes.
    outs = [torch.empty(recvs[s], 2, dtype=torch.int64) for s in range(WORLD)]
    dist.all_to_all(outs, rows)
    for s in range(WORLD):
        expect_equal(outs[s], want[sum(recvs[:s]):sum(recvs[:s + 1])], f"all_to_all from {s}")


def check_point_to_point():
    nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    mine = torch.arange(1000, dtype=torch.float32) + RANK
    got = torch.empty_like(mine)
    if RANK % 2 == 0:
        dist.send(mine, dst=nxt)
        dist.recv(got, src=prv)
    else:
        dist.recv(got, src=prv)
        dist.send(mine, dst=nxt)
    expect_equal(got, torch.arange(1000, dtype=torch.float32) + prv, "send/recv ring")
    # A ring exchange of 1 MiB in one batch: every rank sends before it receives.
    big = torch.full((1 << 18,), float(RANK))
    into = torch.empty_like(big)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, big, nxt),
                                   dist.P2POp(dist.irecv, into, prv)])
    for req in reqs:
        req.wait()
    expect_equal(into, torch.full((1 << 18,), float(prv)), "batch_isend_irecv ring")


def check_non_contiguous():
    base = torch.arange(48, dtype=torch.float32).reshape(6, 8) + RANK
    view = base[:, ::2]  # every other column: not contiguous
    assert not view.is_contiguous()
    dist.all_reduce(view)
    want = sum(torch.arange(48, dtype=torch.float32).reshape(6, 8)[:, ::2] + r for r in range(WORLD))
    expect_equal(view, want, "all_reduce non-contiguous")
    expect_equal(base[:, 1::2], (torch.arange(48).reshape(6, 8)[:, 1::2] + RANK).float(),
                 "all_reduce left the other columns alone")
    t = (torch.arange(12).reshape(3, 4) * (RANK + 1)).t()
    dist.broadcast(t, src=0)
    expect_equal(t, torch.arange(12).reshape(3, 4).t(), "broadcast transposed")
    outs = [torch.empty(4, 3, dtype=torch.int64).t() for _ in range(WORLD)]
    dist.all_gather(outs, torch.full((3, 4), RANK, dtype=torch.int64))
    for r in range(WORLD):
        expect_equal(outs[r], torch.full((3, 4), r, dtype=torch.int64), "all_gather into views")


def check_async_and_futures():
    ts = [torch.full((1000,), float(RANK + i)) for i in range(8)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    fut = works[-1].get_future()
    chained = fut.then(lambda f: f.value()[0] * 2)
    for w in works:
        w.wait()
        assert w.is_completed() and w.is_success()
    total = sum(range(WORLD))
    for i, t in enumerate(ts):
        expect_equal(t, torch.full((1000,), float(total + WORLD * i)), f"async all_reduce {i}")
    expect_equal(chained.wait(), torch.full((1000,), 2.0 * (total + WORLD * 7)), "future.then")


def check_subgroups():
    evens = list(range(0, WORLD, 2))
    odds = list(range(1, WORLD, 2))
    g_even = dist.new_group(evens)
    g_odd = dist.new_group(odds) if odds else None
    g_pair = dist.new_group([0, WORLD - 1])
    mine, group = (evens, g_even) if RANK % 2 == 0 else (odds, g_odd)
    t = torch.tensor([float(RANK)])
    dist.all_reduce(t, group=group)
    expect_equal(t, torch.tensor([float(sum(mine))]), "subgroup all_reduce")
    if RANK in (0, WORLD - 1):
        check_all_reduce(g_pair, sorted({0, WORLD - 1}))
        t = torch.tensor([RANK], dtype=torch.int64)
        dist.broadcast(t, src=WORLD - 1, group=g_pair)  # a global rank
        expect_equal(t, torch.tensor([WORLD - 1]), "subgroup broadcast from global rank")
    # The default group still works after (and between) subgroup calls.
    t = torch.ones(3)
    dist.all_reduce(t)
    expect_equal(t, torch.full((3,), float(WORLD)), "world all_reduce after subgroups")


def check_refusals():
    def refused(call, words, what):
        try:
            call()
        except RuntimeError as e:
            if not all(w in str(e) for w in words):
                fail(f"{what}: message {str(e)!r} lacks {words}")
            return
        fail(f"{what}: was not refused")
    refused(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32), op=R.BAND),
            ["weft", "BAND"], "bitwise op")
    refused(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16)),
            ["weft", "cannot be reduced"], "int16 reduction")
    refused(lambda: dist.all_to_all_single(torch.empty(5), torch.empty(5), [5] + [0] * WORLD,
                                           None),
            ["weft", "split"], "bad splits")


def scenario_collectives():
    check_all_reduce(None, list(range(WORLD)))
    check_reduce()
    check_broadcast_and_gathers()
    check_reduce_scatter()
    check_all_to_all()
    check_point_to_point()
    check_non_contiguous()
    check_async_and_futures()
    check_subgroups()
    check_refusals()
    dist.barrier()


def scenario_timeout():
    store = dist.distributed_c10d._get_default_store()
    t = torch.ones(16)
    dist.all_reduce(t)  # the communicator works
    slow = dist.new_group(list(range(WORLD)), timeout=datetime.timedelta(seconds=2))
    if RANK == 0:
        work = dist.all_reduce(t, async_op=True)
        start = time.monotonic()
        try:
            work.wait(timeout=datetime.timedelta(seconds=1))
            fail("wait(timeout) returned although rank 1 never joined")
        except RuntimeError as e:
            took = time.monotonic() - start
            if "timed out" not in str(e) or not 0.9 <= took < 10:
                fail(f"wait(timeout): {e!r} after {took:.1f} s")
        try:
            dist.all_reduce(t)
            fail("an all_reduce after the timeout succeeded")
        except RuntimeError as e:
            if "weft" not in str(e):
                fail(f"later all_reduce: {e!r}")
        # The group's own timeout (2 s) bounds a plain blocking call.
        start = time.monotonic()
        try:
            dist.all_reduce(torch.ones(4), group=slow)
            fail("all_reduce on the 2 s group returned although rank 1 never joined")
        except RuntimeError as e:
            took = time.monotonic() - start
            if "timed out" not in str(e) or not 1.9 <= took < 12:
                fail(f"group timeout: {e!r} after {took:.1f} s")
        store.set("timeout/checked", "1")
        store.wait(["timeout/leaving"], datetime.timedelta(seconds=60))
    else:
        # Stays alive (a dead peer would be another error) until rank 0 has checked.
        store.wait(["timeout/checked"], datetime.timedelta(seconds=60))
        store.set("timeout/leaving", "1")
    print(f"rank {RANK}: timeouts raised as expected", flush=True)
    os._exit(0)  # the broken communicators need no orderly shutdown


def scenario_killed():
    victim = WORLD - 1
    t = torch.ones(1 << 18)
    for step in range(1000):
        if RANK == victim and step == 20:
            os.kill(os.getpid(), signal.SIGKILL)
        start = time.monotonic()
        try:
            dist.all_reduce(t)
            t.fill_(1.0)
        except RuntimeError as e:
            took = time.monotonic() - start
            if step < 20:
                fail(f"step {step} failed before the kill: {e!r}")
            if took > 20:
                fail(f"the dead rank was noticed only after {took:.1f} s: {e!r}")
            print(f"rank {RANK}: step {step} raised after {took:.2f} s: {e}", flush=True)
            os._exit(0)
    fail("1000 all_reduces succeeded with a dead rank")


def train(group, dtype, steps=20, python_hook=False):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(),
                                torch.nn.Linear(32, 4)).to(dtype)
    ddp = DDP(model, process_group=group)
    if python_hook:
        # A comm hook written in Python: its future's callbacks run on weft's completer thread.
        ddp.register_comm_hook(group, default_hooks.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    data = torch.Generator().manual_seed(100 + RANK)
    for _ in range(steps):
        x = torch.randn(8, 16, generator=data).to(dtype)
        y = torch.randn(8, 4, generator=data).to(dtype)
        loss = ((ddp(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def scenario_ddp():
    gloo = dist.new_group(backend="gloo")
    for dtype, rtol, hook in ((torch.float32, 1e-6, False), (torch.float64, 1e-12, False),
                              (torch.float32, 1e-6, True)):
        on_weft = train(dist.group.WORLD, dtype, python_hook=hook)
        on_gloo = train(gloo, dtype, python_hook=hook)
        rel = ((on_weft - on_gloo).abs().max() / on_gloo.abs().max()).item()
        if rel > rtol:
            fail(f"DDP {dtype}: weft and gloo parameters differ by {rel:.3g} (relative)")
        everyone = [torch.empty_like(on_weft) for _ in range(WORLD)]
        dist.all_gather(everyone, on_weft)
        for r in range(WORLD):
            expect_equal(everyone[r], on_weft, f"DDP {dtype}: rank {r}'s parameters")
        print(f"rank {RANK}: DDP {dtype}{' (Python comm hook)' if hook else ''} weft vs gloo "
              f"relative difference {rel:.3g}", flush=True)


def init(how):
    """init_process_group("weft") by env://, tcp://, or a store made here (TCPStore, FileStore)."""
    timeout = datetime.timedelta(seconds=60)
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    kwargs = {}
    if how == "env":
        kwargs["init_method"] = "env://"
    elif how == "tcp":
        kwargs["init_method"] = f"tcp://{addr}:{port}"
    elif how == "tcpstore":
        kwargs["store"] = dist.TCPStore(addr, port, WORLD, RANK == 0, timeout)
    elif how == "filestore":
        kwargs["store"] = dist.FileStore(os.environ["WEFT_TEST_STORE_FILE"], WORLD)
    else:
        fail(f"unknown init {how}")
    dist.init_process_group("weft", rank=RANK, world_size=WORLD, timeout=timeout, **kwargs)


def main():
    scenario = sys.argv[1]
    init(sys.argv[2] if len(sys.argv) > 2 else "env")
    assert dist.get_backend() == "weft"
    assert isinstance(dist.distributed_c10d._get_default_group(), weft_torch.ProcessGroupWeft)
    {"collectives": scenario_collectives, "timeout": scenario_timeout, "killed": scenario_killed,
     "ddp": scenario_ddp}[scenario]()
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {RANK}: {scenario} passed", flush=True)


if __name__ == "__main__":
    main()
