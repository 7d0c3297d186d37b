#!/usr/bin/env bash
# Session 4, run P (final): the committed code (early loads in the Pipeline,
# NVML read once); full sweep with chart, eager, conformance in processes
# and goroutines, faults, anchors.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gunzip -c .gpu/final.gz > /tmp/intranode; chmod +x /tmp/intranode
B=/tmp/intranode
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info; nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee $OUT/info.txt
step conformance
timeout 200 $B conformance --backend cuda --world 2 --timeout 60s 2>&1 | tee $OUT/conformance.txt | grep -v '^pass'
step conformance-goroutines
timeout 200 $B conformance --backend cuda --world 2 --procs=false --timeout 60s 2>&1 | tee $OUT/conformance-goroutines.txt | grep -v '^pass'
step bench-graph
timeout 150 $B bench --backend cuda --world 2 --graph -b 1K -e 256M -f 4 --iters 50 --warmup 10 --algo oneshot,twoshot,pipeline,nccl,auto --plot $OUT/bench-graph.svg 2>&1 | tee $OUT/bench-graph.txt
step bench-large
timeout 150 $B bench --backend cuda --world 2 --graph -b 1M -e 256M -f 2 --iters 20 --warmup 5 --algo oneshot,pipeline,nccl 2>&1 | tee $OUT/bench-large.txt | grep -E 'oneshot|pipeline|nccl'
step bench-eager
timeout 100 $B bench --backend cuda --world 2 -b 1K -e 64K -f 4 --iters 50 --warmup 10 --algo auto 2>&1 | tee $OUT/bench-eager.txt | grep auto
step faults
timeout 150 $B conformance --backend cuda --world 2 --faults --trials 5 --run 'faults/(mismatched-calls|stall-allreduce|kill-allreduce)' 2>&1 | tee $OUT/faults.txt | grep -v '^pass'
step anchor
timeout 150 python3 scripts/gpu/anchor.py 2>&1 | tee $OUT/anchor.csv
step done
