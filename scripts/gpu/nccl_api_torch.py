"""PyTorch through the NCCL API, unmodified: run under torchrun with or
without the NCCL-API library in LD_PRELOAD (scripts/gpu/nccl-api.sh).

MODE=correct: all_reduce (sum, max, avg), reduce_scatter_tensor (sum, avg),
all_gather_into_tensor, broadcast and all_to_all_single on random bf16,
fp16 and fp32 data (1 to 4,194,304 elements a rank), eager and inside
torch.cuda.graph, and eagerly two all_reduce calls coalesced into one NCCL
group (PyTorch's _coalescing_manager), checked against a float64 reference computed on the CPU
from every rank's input (each rank draws the others' from their seeds);
the same on subgroups made by split_group (halves at world 4 and up,
pairs; up to 65,539 elements); destroy_process_group.
MODE=perf: the collectives in PERF_OPS (all_reduce, reduce_scatter,
all_gather, all_to_all (all_to_all_single, equal blocks), and
all_reduce_avg and reduce_scatter_avg with ReduceOp.AVG; default
all_reduce, reduce_scatter and all_gather) on bf16 from 1 KiB (the
all_reduce) or 1 KiB a rank to PERF_MAX bytes (default 256 MiB), the mean time per call in a CUDA-graph replay of
ITERS calls and eagerly (and the eager calls' host time until the last
is queued, before the wait for them); rank 0 prints a table.
MODE=coalesced: three 1 KiB all_reduce calls in one coalesced group, twice,
checked.
MODE=kill: rank 1 exits after the first accelerated call; rank 0's next
all_reduce must end in an error, and it prints how long that took.
MODE=first: the first three all_reduce calls of 1 KiB bf16 on the world
group and on each subgroup, each waited for, the ranks lined up on a gloo
barrier first; with the library the first one includes its bootstrap.
"""

import os
import sys
import time

import torch
import torch.distributed as dist

MODE = os.environ.get("MODE", "correct")
# On nonblocking communicators PyTorch 2.11 with NCCL 2.28.9 raises "NCCL
# Error 7: NCCL operation in progress" from all_to_all_single, with or
# without intranode's library (docs/results/2026-11-29-h200x2-a/), so the
# check leaves all-to-all out there.
NONBLOCKING = os.environ.get("TORCH_NCCL_USE_COMM_NONBLOCKING") == "1"
T0 = time.perf_counter()
if os.environ.get("DUMP_AFTER"):
    # Where each rank is, should the run stall: every thread's stack on
    # stderr after DUMP_AFTER seconds (and again every as many).
    import faulthandler

    faulthandler.dump_traceback_later(float(os.environ["DUMP_AFTER"]), repeat=True)
print(f"STEP start pid {os.getpid()} t={time.perf_counter() - T0:.1f}s", flush=True)
rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dev = torch.device("cuda", local)
import datetime  # noqa: E402

dist.init_process_group("nccl", device_id=dev, timeout=datetime.timedelta(seconds=30 if MODE == "kill" else 600))
print(f"STEP rank {rank} initialised t={time.perf_counter() - T0:.1f}s", flush=True)
cpu = dist.new_group(backend="gloo")
# Subgroups as tensor parallelism makes them: one split of the default
# group (ncclCommSplit) that every rank enters, each rank landing in the
# group of its set. (With new_group of a subset and the default group
# bound to a device, no rank reached its first check at world 4; see
# docs/NCCL.md.)
SUBGROUPS = {}


def split(name, sets):
    g = dist.split_group(split_ranks=sets, group_desc=name)
    if g is not None:
        SUBGROUPS[name] = g


if world >= 4:
    split("half", [[r for r in range(world) if r % 2 == h] for h in (0, 1)])
split("pair", [[r, r + 1] for r in range(0, world - 1, 2)])
print(f"STEP rank {rank} groups made t={time.perf_counter() - T0:.1f}s", flush=True)

TOL = {torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10, torch.float32: 2.0**-20}


def draw(r, count, n, dtype):
    """Rank r's input: count * n random elements from the seed
    1000 * r + count, so every rank can draw every other's too."""
    g = torch.Generator(device=dev).manual_seed(1000 * r + count)
    return torch.randn(count * n, device=dev, dtype=dtype, generator=g)


def close(got, want, dtype, n, what):
    tol = TOL[dtype] * n
    err = (got.to("cpu", torch.float64) - want).abs() - tol * want.abs()
    bad = int((err > tol).sum())
    if bad:
        print(f"WRONG rank {rank} {what}: {bad} of {want.numel()} elements", flush=True)
    return bad


coalescing = torch.distributed.distributed_c10d._coalescing_manager


def check_ops(group, tag):
    n = dist.get_world_size(group)
    me = dist.get_rank(group)
    members = list(range(world)) if group is None else dist.get_process_group_ranks(group)
    wrong = 0
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        # 1 << 22 elements a rank: past 8 MiB of reduce-scatter and
        # all-gather data at world 2, where intranode's pipelined kernels
        # take them (collective/thresholds.go).
        for count in (1, 1000, 65536 + 3, 1 << 20, 1 << 22) if group is None else (1, 1000, 65536 + 3):
            x = draw(rank, count, n, dtype)
            ins = [draw(m, count, n, dtype).to("cpu", torch.float64) for m in members]
            what = f"{tag} {dtype} count {count}"
            for graph in (False, True):
                w = what + (" graph" if graph else " eager")
                if os.environ.get("STEPS_VERBOSE"):
                    print(f"STEP rank {rank} {w} t={time.perf_counter() - T0:.1f}s", flush=True)
                outs = {}

                def ops():
                    a = x[:count].clone()
                    dist.all_reduce(a, group=group)
                    m = x[:count].clone()
                    dist.all_reduce(m, op=dist.ReduceOp.MAX, group=group)
                    av = x[:count].clone()
                    dist.all_reduce(av, op=dist.ReduceOp.AVG, group=group)
                    rs = torch.empty(count, device=dev, dtype=dtype)
                    dist.reduce_scatter_tensor(rs, x, group=group)
                    rsa = torch.empty(count, device=dev, dtype=dtype)
                    dist.reduce_scatter_tensor(rsa, x, op=dist.ReduceOp.AVG, group=group)
                    ag = torch.empty(count * n, device=dev, dtype=dtype)
                    dist.all_gather_into_tensor(ag, x[:count], group=group)
                    b = x[:count].clone()
                    dist.broadcast(b, src=dist.get_global_rank(group, n - 1) if group else n - 1, group=group)
                    outs.update(a=a, m=m, av=av, rs=rs, rsa=rsa, ag=ag, b=b)
                    if not graph:
                        # PyTorch's coalesced calls: one NCCL group of
                        # several collectives on the communicator (one
                        # reduction for all: PyTorch applies the first's).
                        ca, cb = x[:count].clone(), x[:count].clone()
                        with coalescing(group=group, device=dev):
                            dist.all_reduce(ca, group=group)
                            dist.all_reduce(cb, group=group)
                        outs.update(ca=ca, cb=cb)
                    if not NONBLOCKING:
                        a2a = torch.empty(count * n, device=dev, dtype=dtype)
                        dist.all_to_all_single(a2a, x, group=group)
                        outs.update(a2a=a2a)

                if graph:
                    s = torch.cuda.Stream()
                    s.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(s):
                        ops()  # warm up outside capture
                    torch.cuda.current_stream().wait_stream(s)
                    gr = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(gr):
                        ops()
                    gr.replay()
                else:
                    ops()
                torch.cuda.synchronize()
                heads = [i[:count] for i in ins]
                wrong += close(outs["a"], sum(heads), dtype, n, w + " all_reduce")
                wrong += close(outs["m"], torch.stack(heads).max(0).values, dtype, 1, w + " all_reduce max")
                wrong += close(outs["av"], sum(heads) / n, dtype, n, w + " all_reduce avg")
                blk = [i[me * count:(me + 1) * count] for i in ins]
                wrong += close(outs["rs"], sum(blk), dtype, n, w + " reduce_scatter")
                wrong += close(outs["rsa"], sum(blk) / n, dtype, n, w + " reduce_scatter avg")
                wrong += close(outs["ag"], torch.cat(heads), dtype, 1, w + " all_gather")
                wrong += close(outs["b"], heads[n - 1], dtype, 1, w + " broadcast")
                if "ca" in outs:
                    wrong += close(outs["ca"], sum(heads), dtype, n, w + " coalesced all_reduce")
                    wrong += close(outs["cb"], sum(heads), dtype, n, w + " coalesced all_reduce, second")
                if "a2a" in outs:
                    wrong += close(outs["a2a"], torch.cat(blk), dtype, 1, w + " all_to_all")
    return wrong


def perf_op(op, size):
    """The call and bus-bandwidth factor of op at size bytes (nccl-tests'
    size: the all-reduce's buffer, the reduce-scatter's input, the
    all-gather's output)."""
    n = size // 2
    red = dist.ReduceOp.AVG if op.endswith("_avg") else dist.ReduceOp.SUM
    if op.startswith("all_reduce"):
        x = torch.ones(n, device=dev, dtype=torch.bfloat16)
        return (lambda: dist.all_reduce(x, op=red)), 2 * (world - 1) / world
    if op.startswith("reduce_scatter"):
        x = torch.ones(n, device=dev, dtype=torch.bfloat16)
        y = torch.empty(n // world, device=dev, dtype=torch.bfloat16)
        return (lambda: dist.reduce_scatter_tensor(y, x, op=red)), (world - 1) / world
    if op == "all_to_all":
        # nccl-tests' size: what a rank sends (and receives).
        x = torch.ones(n, device=dev, dtype=torch.bfloat16)
        y = torch.empty(n, device=dev, dtype=torch.bfloat16)
        return (lambda: dist.all_to_all_single(y, x)), (world - 1) / world
    x = torch.ones(n // world, device=dev, dtype=torch.bfloat16)
    y = torch.empty(n, device=dev, dtype=torch.bfloat16)
    return (lambda: dist.all_gather_into_tensor(y, x)), (world - 1) / world


def perf():
    iters = int(os.environ.get("ITERS", "20"))
    top = int(os.environ.get("PERF_MAX", str(256 << 20)))
    rows = []
    for op in os.environ.get("PERF_OPS", "all_reduce reduce_scatter all_gather").split():
        size = 1024 if op.startswith("all_reduce") else 1024 * world
        while size <= top:
            call, factor = perf_op(op, size)
            for _ in range(3):
                call()
            torch.cuda.synchronize()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                call()
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(iters):
                    call()
            g.replay()
            torch.cuda.synchronize()
            dist.barrier(group=cpu)
            reps = 5 if size <= 16 << 20 else 2
            t0 = time.perf_counter()
            for _ in range(reps):
                g.replay()
            torch.cuda.synchronize()
            graph_us = (time.perf_counter() - t0) / (reps * iters) * 1e6
            n = 50 if size <= 16 << 20 else 20
            dist.barrier(group=cpu)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                call()
            queued_us = (time.perf_counter() - t0) / n * 1e6
            torch.cuda.synchronize()
            eager_us = (time.perf_counter() - t0) / n * 1e6
            rows.append((op, size, graph_us, eager_us, factor, queued_us))
            del g
            size *= 4
    if rank == 0:
        print("# op size_bytes graph_us eager_us busbw_graph_GBps eager_queued_us", flush=True)
        for op, size, gu, eu, factor, qu in rows:
            print(f"PERF {op} {size} {gu:.2f} {eu:.2f} {size * factor / gu / 1e3:.1f} {qu:.2f}", flush=True)


if MODE == "correct":
    wrong = check_ops(None, "world")
    for name, group in SUBGROUPS.items():
        wrong += check_ops(group, name)
    dist.barrier(group=cpu)
    print(f"RESULT rank {rank} wrong {wrong}", flush=True)
elif MODE == "perf":
    perf()
elif MODE == "first":

    def first(group, name):
        x = torch.ones(512, device=dev, dtype=torch.bfloat16)
        dist.barrier(group=cpu)
        took = []
        for _ in range(3):
            torch.cuda.synchronize()
            t = time.perf_counter()
            dist.all_reduce(x, group=group)
            torch.cuda.synchronize()
            took.append((time.perf_counter() - t) * 1e3)
        print(f"FIRST rank {rank} {name} " + " ".join(f"{v:.2f}" for v in took) + " ms", flush=True)

    first(None, "world")
    for name, group in SUBGROUPS.items():
        first(group, name)
elif MODE == "coalesced":
    # Three 1 KiB all_reduce calls coalesced into one NCCL group, twice
    # (the first group forms the library's comm); with
    # INTRANODE_NCCL_DEBUG=TRACE the library logs each call it ran.
    ok = True
    for _ in range(2):
        xs = [torch.full((512,), float(rank + i), device=dev, dtype=torch.bfloat16) for i in range(3)]
        with coalescing(device=dev):
            for t in xs:
                dist.all_reduce(t)
        torch.cuda.synchronize()
        for i, t in enumerate(xs):
            ok = ok and bool((t == float(sum(r + i for r in range(world)))).all())
    print(f"COALESCED rank {rank} {'ok' if ok else 'WRONG'}", flush=True)
elif MODE == "kill":
    x = torch.ones(4096, device=dev, dtype=torch.bfloat16)
    dist.all_reduce(x)
    torch.cuda.synchronize()
    dist.barrier(group=cpu)
    if rank == 1:
        os._exit(9)
    time.sleep(0.5)
    t0 = time.perf_counter()
    print(f"KILL rank {rank}: rank 1 is gone; calling all_reduce", flush=True)
    try:
        for i in range(200):
            dist.all_reduce(x)
            torch.cuda.synchronize()
            print(f"KILL rank {rank}: call {i} returned after {time.perf_counter() - t0:.2f} s", flush=True)
            time.sleep(0.2)
        print(f"KILL rank {rank}: no error in 200 calls", flush=True)
    except Exception as e:  # noqa: BLE001
        print(f"KILL rank {rank}: error after {time.perf_counter() - t0:.2f} s: {str(e)[:300]}", flush=True)
    os._exit(0)
dist.destroy_process_group()
print(f"DONE rank {rank}", flush=True)
