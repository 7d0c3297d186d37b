#!/usr/bin/env bash
# Twelfth session, 4-GPU host (issues 18 and 21): the kernels' image
# before (c612b17's) and after the de-duplication, in one CLI binary
# (INTRANODE_CUDA_KERNELS), at world 4 where the scattered Pipeline runs
# (the change cut its spill traffic by 35-40%): conformance in processes
# with the new image, then the Pipeline and NCCL from 4 MiB to 256 MiB and
# every collective's `auto` from 1 KiB to 4 MiB, graph replay, bf16, the
# two images alternated twice.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
K=.gpu/k
gunzip -f $K/intranode.gz
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv | tee $R/info.txt
nvidia-smi topo -m >> $R/info.txt
step conformance
timeout 200 $K/intranode conformance --backend cuda --world 4 --timeout 60s > $R/conformance.txt 2>&1
echo "rc=$?" >> $R/conformance.txt
grep -vE '^pass' $R/conformance.txt | tail -6
step ab
for i in 1 2; do
  for v in before after; do
    INTRANODE_CUDA_KERNELS=$K/$v.fatbin timeout 60 $K/intranode bench --backend cuda --world 4 --graph \
      -b 4M -e 256M -f 2 --iters 20 --warmup 5 --algo pipeline,nccl > $R/pipe-$i-$v.txt 2>&1
    echo "rc=$?" >> $R/pipe-$i-$v.txt
    INTRANODE_CUDA_KERNELS=$K/$v.fatbin timeout 90 $K/intranode bench --backend cuda --world 4 --graph --op all \
      -b 1K -e 4M -f 4 --iters 30 --warmup 5 --algo auto,nccl > $R/small-$i-$v.txt 2>&1
    echo "rc=$?" >> $R/small-$i-$v.txt
    echo "$v $i: $(grep -E ' pipeline ' $R/pipe-$i-$v.txt | awk '{printf "%s ", $7}')"
  done
done
step pack
tar czf $OUT/results.tgz -C $OUT r
