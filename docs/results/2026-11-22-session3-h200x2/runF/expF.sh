#!/usr/bin/env bash
# Session 3, run F: wide pipeline (both halves of the push area over 32 MiB), 64 vs 128 blocks.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for f in intranode intranode-b128; do gunzip -c .gpu/$f.gz > /tmp/$f; chmod +x /tmp/$f; done
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step conformance
timeout 200 /tmp/intranode conformance --backend cuda --world 2 --timeout 60s --run 'allreduce/pipeline|allreduce/repeat|faults' 2>&1 | tee $OUT/conformance.txt | tail -2
for f in intranode intranode-b128 intranode; do
  step "$f"
  timeout 100 /tmp/$f bench --backend cuda --world 2 --graph -b 16M -e 256M -f 2 --iters 20 --warmup 5 --algo pipeline 2>&1 | tee -a $OUT/bench-$f.txt | grep pipeline
done
timeout 100 /tmp/intranode bench --backend cuda --world 2 --graph -b 64M -e 256M -f 4 --iters 20 --warmup 5 --algo nccl --inplace 2>&1 | tee $OUT/bench-nccl.txt | grep nccl
timeout 100 /tmp/intranode bench --backend cuda --world 2 --graph -b 64M -e 256M -f 4 --iters 20 --warmup 5 --algo pipeline --inplace 2>&1 | tee $OUT/bench-inplace.txt | grep pipeline
