#!/usr/bin/env bash
# Session 3, run E: pipeline grid (blocks) at 16-256 MiB.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for g in 32 48 64; do gunzip -c .gpu/intranode-b$g.gz > /tmp/b$g; chmod +x /tmp/b$g; done
for g in 32 48 64 32; do
  echo "=== blocks $g"
  timeout 100 /tmp/b$g bench --backend cuda --world 2 --graph -b 4M -e 256M -f 2 --iters 20 --warmup 5 --algo pipeline 2>&1 | tee -a $OUT/bench-b$g.txt | grep -E 'pipeline'
done
timeout 100 /tmp/b64 bench --backend cuda --world 2 --graph -b 256M -e 256M --iters 20 --warmup 5 --algo nccl 2>&1 | tee -a $OUT/bench-nccl.txt | grep nccl
