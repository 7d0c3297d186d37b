#!/usr/bin/env bash
# Session 4, run L: per-step timeline of the Pipeline (device printf of
# clock64 marks, kernel image with the trace patch) at 16 and 64 MiB.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gunzip -c .gpu/cur.gz > /tmp/intranode; chmod +x /tmp/intranode
B=/tmp/intranode
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info; nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv | tee $OUT/info.txt
step trace16
INTRANODE_CUDA_KERNELS=.gpu/k/trace16.fatbin timeout 120 $B bench --backend cuda --world 2 --graph -b 16M -e 16M --iters 20 --warmup 5 --algo pipeline > $OUT/trace16.txt 2>&1; echo rc=$?
grep -v TRACE $OUT/trace16.txt | tail -3; grep -c TRACE $OUT/trace16.txt
step trace64
INTRANODE_CUDA_KERNELS=.gpu/k/trace64.fatbin timeout 120 $B bench --backend cuda --world 2 --graph -b 64M -e 64M --iters 20 --warmup 5 --algo pipeline > $OUT/trace64.txt 2>&1; echo rc=$?
grep -v TRACE $OUT/trace64.txt | tail -3; grep -c TRACE $OUT/trace64.txt
step done
