#!/usr/bin/env bash
# Fourteenth session, 2-GPU host (issue 20): the call check across hosts
# without its join (the call's stream no longer waits for the records).
# Two CLI binaries built on the development machine with -tags cuda,
# stripped and gzipped into .gpu/k3: old = 397540d^ (the commit before the
# change), new = 397540d. 2 simulated hosts x 1 GPU, every call flat
# NCCL over the two ranks: old with the check, new with the check, new
# without it (= NCCL alone), alternated twice.
set -u
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
K=.gpu/k3
gunzip -f $K/old.gz $K/new.gz
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info
nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee $R/info.txt
for i in 1 2; do
  for v in old:true new:true new:false; do
    b=${v%%:*}; cc=${v##*:}
    f=$R/hosts-$i-$b-check-$cc.txt
    timeout 170 $K/$b bench --backend cuda --hosts 2 --world 2 --op all_reduce,reduce_scatter,all_gather \
      --algo flat --call-check=$cc -b 1K -e 64M -f 4 --iters 20 --warmup 5 > $f 2>&1
    echo "rc=$?" >> $f
    step "$i $b check=$cc: $(grep -cE ' flat ' $f) rows"
  done
done
step pack
tar czf $OUT/results.tgz -C $OUT r
