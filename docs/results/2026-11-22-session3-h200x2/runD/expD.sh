#!/usr/bin/env bash
# Session 3, run D: pipeline that reduces chunk j while chunk j+1 is on the wire.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for f in intranode intranode-b64; do gunzip -c .gpu/$f.gz > /tmp/$f; chmod +x /tmp/$f; done
B=/tmp/intranode
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step conformance
timeout 200 $B conformance --backend cuda --world 2 --timeout 60s --run 'allreduce|faults' 2>&1 | tee $OUT/conformance.txt | tail -3
step bench-large
timeout 150 $B bench --backend cuda --world 2 --graph -b 1M -e 256M -f 2 --iters 20 --warmup 5 --algo oneshot,pipeline,nccl 2>&1 | tee $OUT/bench-large.txt | grep -E 'pipeline|nccl|oneshot'
step bench-large-b64
timeout 150 /tmp/intranode-b64 bench --backend cuda --world 2 --graph -b 1M -e 256M -f 4 --iters 20 --warmup 5 --algo pipeline 2>&1 | tee $OUT/bench-large-b64.txt | grep -E 'pipeline'
