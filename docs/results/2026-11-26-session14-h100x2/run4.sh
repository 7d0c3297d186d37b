#!/usr/bin/env bash
# Fourteenth session, 2-GPU host (issue 18): run1's two slower sizes alone.
# The binary and images of run1.sh (.gpu/k2), alternated three times:
# the all-gather from 1 to 16 KiB and the broadcast at 1 MiB, each op in
# a bench of its own, graph replay, bf16, 200 iterations a replay.
set -u
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
K=.gpu/k2
gunzip -f $K/intranode.gz
for i in 1 2 3; do
  for v in before after; do
    for spec in "all_gather 1K 16K" "broadcast 1M 1M"; do
      set -- $spec
      f=$R/$1-$i-$v.txt
      INTRANODE_CUDA_KERNELS=$K/$v.fatbin timeout 100 $K/intranode bench --backend cuda --world 2 --graph --op $1 \
        -b $2 -e $3 -f 4 --iters 200 --warmup 20 --algo auto,nccl > $f 2>&1
      echo "rc=$?" >> $f
      echo "$i $v $1: $(grep -E ' auto ' $f | awk '{printf "%s=%s ", $1, $7}')"
    done
  done
done
tar czf $OUT/results.tgz -C $OUT r
