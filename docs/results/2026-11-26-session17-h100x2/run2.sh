#!/usr/bin/env bash
# Seventeenth session, 2-GPU host, second call (issue 18): the small sizes
# of the kernels' A/B again, with more runs. The first call's binary and
# images (.gpu/k: the CLI of 788c162, -tags cuda; before.fatbin = c612b17's
# collectives.fatbin, after.fatbin = today's), every collective, graph
# replay, bf16, 1-16 KiB, `auto` and NCCL, the images alternated six times.
set -u
export NCCL_NVLS_ENABLE=0
R=$OUT/r2; mkdir -p $R
K=.gpu/k
gunzip -f $K/intranode.gz
nvidia-smi --query-gpu=index,name,driver_version --format=csv > $R/info.txt
for i in 1 2 3 4 5 6; do
  for v in before after; do
    INTRANODE_CUDA_KERNELS=$K/$v.fatbin timeout 60 $K/intranode bench --backend cuda --world 2 --graph --op all \
      -b 1K -e 16K -f 4 --iters 30 --warmup 5 --algo auto,nccl > $R/small-$i-$v.txt 2>&1
    echo "rc=$?" >> $R/small-$i-$v.txt
  done
done
grep -c ' auto ' $R/small-*.txt | tr '\n' ' '
tar czf $OUT/r2.tgz -C $OUT r2 && rm -rf $R
