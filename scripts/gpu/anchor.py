"""Anchor measurements for docs/PERFORMANCE.md: NCCL and PyTorch symmetric
memory all-reduce, bf16, every GPU of the host (WORLD to choose; one
process per GPU): a CUDA-graph replay of 20 chained calls at every size,
and up to 1 MiB also one call per graph launch and one eager call at a
time, each waited for (impl names ending in -single and -eager).

Run on the GPU host, in the same device call as `intranode bench`:
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 python3 scripts/gpu/anchor.py
Prints one CSV line per (impl, bytes): impl,bytes,time_us,busbw_gbps.
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = [1 << k for k in range(10, 29, 2)]  # 1 KiB .. 256 MiB
ITERS_GRAPH = 20


def capture(fn, iters):
    """fn warmed up on a side stream, then captured iters times into a
    CUDA graph (None for iters=0: eager)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    if iters == 0:
        return None
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(iters):
            fn()
    return g


def bench(fn, iters=ITERS_GRAPH, reps=20):
    g = capture(fn, iters)
    times = []
    for _ in range(reps):
        dist.barrier()
        torch.cuda.synchronize()
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / iters)
    times.sort()
    return times[len(times) // 2]


def single(fn, graph, n=50):
    """Microseconds per call made one at a time and waited for, as
    `intranode bench --single` times it: one call per graph launch
    (graph=True) or one eager call (graph=False), host clock, the slowest
    rank's mean (every rank returns its own; rank 0 prints the max)."""
    import time

    g = capture(fn, 1 if graph else 0)
    run = g.replay if graph else fn
    for _ in range(5):
        run()
        torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        run()
        torch.cuda.synchronize()
    us = torch.tensor([(time.perf_counter() - t0) / n * 1e6], device="cuda")
    dist.all_reduce(us, op=dist.ReduceOp.MAX)
    return float(us.item())


SINGLE_MAX = 1 << 20  # the single and eager rows stop here, as the bench's do


def worker(rank, world):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    out = []
    for n in SIZES:
        x = torch.ones(n // 2, dtype=torch.bfloat16, device="cuda")
        t = bench(lambda: dist.all_reduce(x))
        out.append(("nccl", n, t))
        if n <= SINGLE_MAX:
            out.append(("nccl-single", n, single(lambda: dist.all_reduce(x), True)))
            out.append(("nccl-eager", n, single(lambda: dist.all_reduce(x), False)))
    try:
        import torch.distributed._symmetric_memory as symm_mem

        group = dist.group.WORLD
        for n in SIZES:
            if n > (64 << 20):
                break
            buf = symm_mem.empty(n // 2, dtype=torch.bfloat16, device="cuda")
            symm_mem.rendezvous(buf, group.group_name)
            buf.fill_(1)
            outb = torch.empty_like(buf)
            try:
                one = lambda: torch.ops.symm_mem.one_shot_all_reduce_out(buf, "sum", group.group_name, outb)  # noqa: E731
                t = bench(one)
                out.append(("torch-oneshot", n, t))
                if n <= SINGLE_MAX:
                    out.append(("torch-oneshot-single", n, single(one, True)))
                    out.append(("torch-oneshot-eager", n, single(one, False)))
            except Exception as e:  # noqa: BLE001
                if rank == 0:
                    print(f"# torch one-shot {n}: {e}", file=sys.stderr)
            try:
                two = lambda: torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", group.group_name)  # noqa: E731
                t = bench(two)
                out.append(("torch-twoshot", n, t))
                if n <= SINGLE_MAX:
                    out.append(("torch-twoshot-single", n, single(two, True)))
                    out.append(("torch-twoshot-eager", n, single(two, False)))
            except Exception as e:  # noqa: BLE001
                if rank == 0:
                    print(f"# torch two-shot {n}: {e}", file=sys.stderr)
    except Exception as e:  # noqa: BLE001
        if rank == 0:
            print(f"# torch symmetric memory unavailable: {e}", file=sys.stderr)
    if rank == 0:
        for impl, n, t in out:
            busbw = n / (t * 1e-6) / 1e9 * 2 * (world - 1) / world
            print(f"{impl},{n},{t:.2f},{busbw:.1f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    world = int(os.environ.get("WORLD", torch.cuda.device_count()))
    mp.spawn(worker, args=(world,), nprocs=world)
