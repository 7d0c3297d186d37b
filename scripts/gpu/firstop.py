"""The first NCCL operation on fresh communicators, timed: which operation
NCCL connects fastest (NCCL connects a communicator's channels on their
first use). Each round makes a new group of every rank for each of grouped
send/receive to every peer, all_gather_into_tensor, all_to_all_single and
all_reduce (64 floats a rank), and times the group's creation and its
first three calls, each waited for. Run under torchrun on a GPU host:
  NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc-per-node 4 scripts/gpu/firstop.py
Prints one OP line per rank, round and operation (milliseconds)."""
import os, time, torch, torch.distributed as dist
r = int(os.environ["LOCAL_RANK"]); w = int(os.environ["WORLD_SIZE"])
torch.cuda.set_device(r)
dist.init_process_group("nccl", device_id=torch.device("cuda", r))
dist.barrier(); torch.cuda.synchronize()
x = torch.ones(64, device="cuda"); big = torch.empty(64 * w, device="cuda")
def ag(g): dist.all_gather_into_tensor(big, x, group=g)
def a2a(g): dist.all_to_all_single(big, torch.ones(64 * w, device="cuda"), group=g)
def ar(g): dist.all_reduce(x, group=g)
def p2p(g):
    ops = []
    for p in range(w):
        if p != r:
            ops.append(dist.P2POp(dist.isend, x, p, group=g))
            ops.append(dist.P2POp(dist.irecv, big[p * 64:(p + 1) * 64], p, group=g))
    for q in dist.batch_isend_irecv(ops): q.wait()
for rnd in range(2):
    for name, fn in (("p2p", p2p), ("allgather", ag), ("alltoall", a2a), ("allreduce", ar)):
        dist.barrier(); torch.cuda.synchronize()
        t0 = time.perf_counter(); g = dist.new_group(list(range(w))); torch.cuda.synchronize(); t1 = time.perf_counter()
        fn(g); torch.cuda.synchronize(); t2 = time.perf_counter()
        fn(g); torch.cuda.synchronize(); t3 = time.perf_counter()
        fn(g); torch.cuda.synchronize(); t4 = time.perf_counter()
        if name == "p2p":
            ag(g); torch.cuda.synchronize(); t5 = time.perf_counter()
            extra = f" then allgather {1e3*(t5-t4):.2f}"
        else:
            extra = ""
        print(f"OP rank {r} round {rnd} {name:9s} new_group {1e3*(t1-t0):8.2f} first {1e3*(t2-t1):8.2f} second {1e3*(t3-t2):6.2f} third {1e3*(t4-t3):6.2f} ms{extra}", flush=True)
dist.destroy_process_group()
