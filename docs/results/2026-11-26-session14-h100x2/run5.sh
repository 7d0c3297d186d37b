#!/usr/bin/env bash
# Fourteenth session, 2-GPU host (issue 20): the call check with its
# records' slot cleared before each gather and a missing record judged a
# peer failure (collective/hostcheck.go), on CUDA with NCCL: 2 simulated
# hosts x 1 GPU, every call flat and checked, results checked by the bench
# (#wrong), the check on and off; then conformance at world 2 in processes.
# One CLI binary (-tags cuda, stripped, gzipped into .gpu/k4) of the commit
# that made the change.
set -u
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
K=.gpu/k4
gunzip -f $K/intranode.gz
for cc in true false; do
  timeout 170 $K/intranode bench --backend cuda --hosts 2 --world 2 --op all_reduce,reduce_scatter,all_gather \
    --algo flat --call-check=$cc -b 1K -e 16M -f 4 --iters 20 --warmup 5 > $R/hosts-check-$cc.txt 2>&1
  echo "rc=$?" >> $R/hosts-check-$cc.txt
  echo "check=$cc: $(grep -cE ' flat ' $R/hosts-check-$cc.txt) rows, wrong $(grep -E ' flat ' $R/hosts-check-$cc.txt | awk '{s+=$NF} END {print s+0}'), $(tail -1 $R/hosts-check-$cc.txt)"
done
timeout 150 $K/intranode conformance --backend cuda --world 2 --timeout 60s > $R/conformance.txt 2>&1
echo "rc=$?" >> $R/conformance.txt
tail -3 $R/conformance.txt
tar czf $OUT/results.tgz -C $OUT r
