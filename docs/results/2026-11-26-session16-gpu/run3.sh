#!/usr/bin/env bash
# Sixteenth session, 4-GPU host (issue 20), third call: run2.sh by sed (the 2 x 1 part only, 1-64 KiB, --iters 200, five alternations); the comment below is run2.sh's.
# run1.sh, plus new2 = 60c49f6 (a member gone fails the job after the wait
# for the work, not before). The fault trials at 2 x 2 again, two more 2 x 2
# bench runs to 256 MiB, then 2 hosts x 1 GPU (GPUs 0 and 1; every call flat
# NCCL over the two ranks): old with the check, new2 with the check, new2
# without it (= NCCL alone), alternated three times.
set -u
export NCCL_NVLS_ENABLE=0
R=$OUT/r3; mkdir -p $R
K=.gpu/k4
gunzip -f $K/*.gz
step() { echo; echo "=== $1 ($(date -u +%T))"; }
for i in 1 2 3 4 5; do
  for v in old:true new2:true new2:false; do
    b=${v%%:*}; cc=${v##*:}
    f=$R/hosts2x1-$i-$b-check-$cc.txt
    timeout 60 $K/$b bench --backend cuda --hosts 2 --world 2 --op all_reduce,reduce_scatter,all_gather \
      --algo flat --call-check=$cc -b 1K -e 64K -f 4 --iters 200 --warmup 5 > $f 2>&1
    echo "rc=$?" >> $f
    step "2x1 $i $b check=$cc: $(grep -cE ' flat ' $f) rows"
  done
done
tar czf $OUT/r3.tgz -C $OUT r3 && rm -rf $R
