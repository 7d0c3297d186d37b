#!/usr/bin/env bash
# Fourteenth session, asked for 2×H200, served 2×H100 (issue 18, kernels without copies): one CLI
# binary built on the development machine with -tags cuda (stripped,
# gzipped into .gpu/k2, at f6f6a55), carrying the kernels' image before (the committed
# collectives.fatbin of c612b17) and after the de-duplication, the latter
# also embedded. Conformance in processes with the new image; every
# collective's kernels with 2, 4 and 8 ranks on GPU 0 (the scattered
# Pipeline and HCM run only at worlds 3+ and 8); then the graph-replay
# sweep of every collective, `auto` and NCCL, bf16, 1 KiB-256 MiB, with
# the two images alternated twice (INTRANODE_CUDA_KERNELS).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r; mkdir -p $R
K=.gpu/k2
gunzip -f $K/intranode.gz
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv | tee $R/info.txt
nvidia-smi topo -m >> $R/info.txt
step conformance
timeout 150 $K/intranode conformance --backend cuda --world 2 --timeout 60s > $R/conformance.txt 2>&1
echo "rc=$?" >> $R/conformance.txt
grep -vE '^pass' $R/conformance.txt | tail -6
step ab
for i in 1 2; do
  for v in before after; do
    INTRANODE_CUDA_KERNELS=$K/$v.fatbin timeout 100 $K/intranode bench --backend cuda --world 2 --graph --op all \
      -b 1K -e 256M -f 4 --iters 30 --warmup 5 --algo auto,nccl > $R/bench-$i-$v.txt 2>&1
    echo "rc=$?" >> $R/bench-$i-$v.txt
    echo "$v $i: $(grep -cE ' (auto|nccl) ' $R/bench-$i-$v.txt) rows"
  done
done
step shared
TEST_INTRA_NODE_COMM=1 timeout 200 $K/intranode conformance --backend cuda --share-device --world 2,4,8 \
  --timeout 30s > $R/shared.txt 2>&1
echo "rc=$?" >> $R/shared.txt
grep -vE '^pass' $R/shared.txt | tail -8
step pack
tar czf $OUT/results.tgz -C $OUT r
