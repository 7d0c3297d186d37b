#!/usr/bin/env bash
# Session 3, run I: where an eager all-reduce call spends host time (rank 0's Go CPU profile).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gunzip -c .gpu/intranode.gz > /tmp/intranode; chmod +x /tmp/intranode
/tmp/intranode bench --backend cuda --world 2 -b 1K -e 1K --iters 20000 --warmup 100 --replays 5 --algo oneshot --cpuprofile $OUT/eager.prof 2>&1 | tee $OUT/bench-eager.txt | grep oneshot
INTRANODE_CUDA_EARLY_LAUNCH=0 /tmp/intranode bench --backend cuda --world 2 -b 1K -e 1K --iters 20000 --warmup 100 --algo oneshot 2>&1 | tee $OUT/bench-eager-noearly.txt | grep oneshot
/tmp/intranode bench --backend cuda --world 2 --graph -b 1K -e 1K --iters 50 --warmup 10 --algo oneshot 2>&1 | tee $OUT/bench-graph.txt | grep oneshot
