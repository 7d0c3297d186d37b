#!/usr/bin/env bash
# Session 3, run H: world 4 with the final kernels (early launch, Pipeline).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gunzip -c .gpu/intranode.gz > /tmp/intranode; chmod +x /tmp/intranode
B=/tmp/intranode
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info; nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee $OUT/info.txt; nvidia-smi topo -m | tee -a $OUT/info.txt
step conformance
timeout 300 $B conformance --backend cuda --world 4 --timeout 60s 2>&1 | tee $OUT/conformance.txt | grep -v '^pass'
step bench-graph
timeout 200 $B bench --backend cuda --world 4 --graph -b 1K -e 256M -f 4 --iters 20 --warmup 5 --algo oneshot,twoshot,pipeline,nccl,auto --plot $OUT/bench-graph.svg 2>&1 | tee $OUT/bench-graph.txt
