#!/usr/bin/env bash
# Session 3, run J: eager launches after caching the kernel handles (no name formatting per call); three invocations.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gunzip -c .gpu/intranode.gz > /tmp/intranode; chmod +x /tmp/intranode
for i in 1 2 3; do
  /tmp/intranode bench --backend cuda --world 2 -b 1K -e 64K -f 4 --iters 50 --warmup 10 --algo auto 2>&1 | tee -a $OUT/bench-eager.txt | grep auto
  /tmp/intranode bench --backend cuda --world 2 --graph -b 1K -e 1K --iters 50 --warmup 10 --algo auto 2>&1 | tee -a $OUT/bench-graph.txt | grep auto
done
/tmp/intranode bench --backend cuda --world 2 -b 1K -e 1K --iters 20000 --warmup 100 --algo auto --cpuprofile $OUT/eager.prof 2>&1 | tee $OUT/bench-eager-long.txt | grep auto
