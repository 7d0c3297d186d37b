#!/usr/bin/env bash
# Fourteenth session, 2-GPU host (issue 20): where the call check's time
# goes at 2 simulated hosts x 1 GPU. The binary `old` of run2.sh (the
# committed code: the check joined to the call's stream). Rank 0's Go CPU
# profile of all-gathers of 1 KiB, with and without the check, 200
# iterations a replay.
set -u
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
K=.gpu/k3
gunzip -f $K/old.gz
for cc in true false; do
  timeout 170 $K/old bench --backend cuda --hosts 2 --world 2 --op all_gather --algo flat --call-check=$cc \
    -b 1K -e 1K --iters 200 --warmup 20 --replays 5 --cpuprofile $R/cpu-check-$cc.pprof > $R/prof-check-$cc.txt 2>&1
  echo "rc=$?" >> $R/prof-check-$cc.txt
  grep -E ' flat ' $R/prof-check-$cc.txt
done
tar czf $OUT/results.tgz -C $OUT r
