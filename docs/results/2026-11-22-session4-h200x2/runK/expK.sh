#!/usr/bin/env bash
# Session 4, run K: Pipeline with K chunk slots, writing up to K-1 chunks ahead.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gunzip -c .gpu/k4.gz > /tmp/intranode; chmod +x /tmp/intranode
B=/tmp/intranode
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info; nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee $OUT/info.txt
step conformance
timeout 240 $B conformance --backend cuda --world 2 --timeout 60s 2>&1 | tee $OUT/conformance.txt | grep -v '^pass'
for v in old k4 k8 k4nw; do
  step "pipeline $v"
  INTRANODE_CUDA_KERNELS=.gpu/k/$v.fatbin timeout 120 $B bench --backend cuda --world 2 --graph -b 1M -e 256M -f 2 --iters 20 --warmup 5 --algo pipeline 2>&1 | tee $OUT/pipe-$v.txt | grep -E 'pipeline|error|Error'
done
step bench-graph
timeout 150 $B bench --backend cuda --world 2 --graph -b 1K -e 256M -f 4 --iters 50 --warmup 10 --algo oneshot,twoshot,pipeline,nccl,auto --plot $OUT/bench-graph.svg 2>&1 | tee $OUT/bench-graph.txt
step faults
timeout 150 $B conformance --backend cuda --world 2 --faults --trials 5 --run 'faults/(mismatched-calls|stall-allreduce|kill-allreduce)' 2>&1 | tee $OUT/faults.txt | grep -v '^pass'
step anchor
timeout 150 python3 .gpu/k/anchor.py 2>&1 | tee $OUT/anchor.csv
step done
