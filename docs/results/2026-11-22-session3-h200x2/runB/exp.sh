#!/usr/bin/env bash
# Session 3, run B: decoupled pipeline (pusher/reducer lanes), full sweep, faults, anchors.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for f in intranode intranode-l32 intranode-l16; do gunzip -c .gpu/$f.gz > /tmp/$f; chmod +x /tmp/$f; done
B=/tmp/intranode
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info; nvidia-smi --query-gpu=index,name,clocks.sm,driver_version --format=csv | tee $OUT/info.txt
step conformance
timeout 240 $B conformance --backend cuda --world 2 --timeout 60s 2>&1 | tee $OUT/conformance.txt | grep -v '^pass'
step bench-graph
timeout 150 $B bench --backend cuda --world 2 --graph -b 1K -e 256M -f 4 --iters 50 --warmup 10 --algo oneshot,twoshot,pipeline,nccl,auto --plot $OUT/bench-graph.svg 2>&1 | tee $OUT/bench-graph.txt
for v in l32 l16; do
  step bench-pipeline-$v
  timeout 100 /tmp/intranode-$v bench --backend cuda --world 2 --graph -b 1M -e 256M -f 4 --iters 20 --warmup 5 --algo pipeline 2>&1 | tee $OUT/bench-pipeline-$v.txt | grep pipeline
done
step faults
timeout 200 $B conformance --backend cuda --world 2 --faults --trials 5 --run 'faults/(mismatched-calls|stall-allreduce|kill-allreduce)' 2>&1 | tee $OUT/faults.txt | grep -v '^pass'
step anchor
timeout 200 python3 scripts/gpu/anchor.py 2>&1 | tee $OUT/anchor.csv
