#!/usr/bin/env bash
# Session 4, run M: the Pipeline loading each chunk's first push round a
# step early (before the signal wait; chunk 0's while the team opens):
# timelines, alternating sweeps against the committed image, conformance.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gunzip -c .gpu/cur.gz > /tmp/intranode; chmod +x /tmp/intranode
B=/tmp/intranode
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info; nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv | tee $OUT/info.txt
for v in 16 64; do
  step pretrace$v
  INTRANODE_CUDA_KERNELS=.gpu/k/pretrace$v.fatbin timeout 120 $B bench --backend cuda --world 2 --graph -b ${v}M -e ${v}M --iters 20 --warmup 5 --algo pipeline > $OUT/pretrace$v.txt 2>&1; echo rc=$?
  grep pipeline $OUT/pretrace$v.txt
done
for i in 1 2; do
  step "base $i"
  timeout 120 $B bench --backend cuda --world 2 --graph -b 4M -e 256M -f 2 --iters 20 --warmup 5 --algo pipeline 2>&1 | tee $OUT/base$i.txt | grep -E 'pipeline|rror'
  step "pre $i"
  INTRANODE_CUDA_KERNELS=.gpu/k/pre.fatbin timeout 120 $B bench --backend cuda --world 2 --graph -b 4M -e 256M -f 2 --iters 20 --warmup 5 --algo pipeline 2>&1 | tee $OUT/pre$i.txt | grep -E 'pipeline|rror'
done
step "pre in place"
INTRANODE_CUDA_KERNELS=.gpu/k/pre.fatbin timeout 120 $B bench --backend cuda --world 2 --graph -b 4M -e 256M -f 4 --iters 20 --warmup 5 --inplace --algo pipeline 2>&1 | tee $OUT/pre-inplace.txt | grep -E 'pipeline|rror'
step "conformance pre"
INTRANODE_CUDA_KERNELS=.gpu/k/pre.fatbin timeout 240 $B conformance --backend cuda --world 2 --timeout 60s 2>&1 | tee $OUT/conformance-pre.txt | grep -v '^pass'
step anchor
timeout 150 python3 .gpu/k/anchor.py 2>&1 | tee $OUT/anchor.csv | grep -E 'twoshot|nccl' 
step done
