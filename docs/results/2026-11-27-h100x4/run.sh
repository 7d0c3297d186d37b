#!/usr/bin/env bash
# Issue 18: the kernels A/B on the host served for
# nvidia-h200-x4. One CLI built at HEAD with -tags cuda (stripped, gzipped),
# the kernels image before the de-duplication (c612b17) and after (HEAD, also
# embedded). Conformance in processes at world 2 (and 4 where 4 GPUs), then
# the graph-replay sweep of every collective at world 2, auto and NCCL, bf16,
# 1 KiB-256 MiB, the two images alternated twice (INTRANODE_CUDA_KERNELS).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
K=.gpu/k9
gunzip -f $K/intranode.gz
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv | tee $R/info.txt
nvidia-smi topo -m >> $R/info.txt
step conformance
timeout 150 $K/intranode conformance --backend cuda --world 2 --timeout 60s > $R/conformance.txt 2>&1
echo "rc=$?" >> $R/conformance.txt
grep -vE '^pass' $R/conformance.txt | tail -6
N=$(nvidia-smi -L | wc -l)
if [ "$N" -ge 4 ]; then
  step conformance-4
  timeout 150 $K/intranode conformance --backend cuda --world 4 --timeout 60s > $R/conformance-4.txt 2>&1
  echo "rc=$?" >> $R/conformance-4.txt
  grep -vE '^pass' $R/conformance-4.txt | tail -6
fi
step ab
for i in 1 2; do
  for v in before after; do
    INTRANODE_CUDA_KERNELS=$K/$v.fatbin timeout 100 $K/intranode bench --backend cuda --world 2 --graph --op all \
      -b 1K -e 256M -f 4 --iters 30 --warmup 5 --algo auto,nccl > $R/bench-$i-$v.txt 2>&1
    echo "rc=$?" >> $R/bench-$i-$v.txt
    echo "$v $i: $(grep -cE ' (auto|nccl) ' $R/bench-$i-$v.txt) rows"
  done
done
step pack
tar czf $OUT/results.tgz -C $OUT r
