#!/usr/bin/env bash
# Session 3, run A: early launch, bench replays, pipeline kernel.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for f in intranode intranode-p32 intranode-p128; do gunzip -c .gpu/$f.gz > /tmp/$f; chmod +x /tmp/$f; done
B=/tmp/intranode
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info; nvidia-smi --query-gpu=index,name,clocks.sm,driver_version --format=csv | tee $OUT/info.txt
step conformance
timeout 240 $B conformance --backend cuda --world 2 --timeout 60s 2>&1 | tee $OUT/conformance.txt | grep -v '^pass'
step bench-graph
timeout 150 $B bench --backend cuda --world 2 --graph -b 1K -e 256M -f 4 --iters 50 --warmup 10 --algo oneshot,twoshot,pipeline,nccl --plot $OUT/bench-graph.svg 2>&1 | tee $OUT/bench-graph.txt
step bench-graph-noearly
INTRANODE_CUDA_EARLY_LAUNCH=0 timeout 100 $B bench --backend cuda --world 2 --graph -b 1K -e 256K -f 4 --iters 50 --warmup 10 --algo oneshot 2>&1 | tee $OUT/bench-graph-noearly.txt
step bench-eager
timeout 100 $B bench --backend cuda --world 2 -b 1K -e 64K -f 4 --iters 50 --warmup 10 --algo auto 2>&1 | tee $OUT/bench-eager.txt
for v in p32 p128; do
  step bench-pipeline-$v
  timeout 100 /tmp/intranode-$v bench --backend cuda --world 2 --graph -b 4M -e 256M -f 4 --iters 20 --warmup 5 --algo pipeline 2>&1 | tee $OUT/bench-pipeline-$v.txt
done
