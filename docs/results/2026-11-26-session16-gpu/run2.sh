#!/usr/bin/env bash
# Sixteenth session, 4-GPU host (issue 20), second call. .gpu/k4 as for
# run1.sh, plus new2 = 60c49f6 (a member gone fails the job after the wait
# for the work, not before). The fault trials at 2 x 2 again, two more 2 x 2
# bench runs to 256 MiB, then 2 hosts x 1 GPU (GPUs 0 and 1; every call flat
# NCCL over the two ranks): old with the check, new2 with the check, new2
# without it (= NCCL alone), alternated three times.
set -u
export NCCL_NVLS_ENABLE=0
R=$OUT/r2; mkdir -p $R
K=.gpu/k4
gunzip -f $K/*.gz
step() { echo; echo "=== $1 ($(date -u +%T))"; }
f=$R/faults-2x2.txt
timeout 150 $K/new2 conformance --backend cuda --faults --trials 20 --hosts 2 --world 4 \
  --run '^faults/(kill|mismatch)-hosts$' > $f 2>&1
echo "rc=$?" >> $f
step "faults 2x2: $(grep -E '^world|passed' $f | tr '\n' ' ')"
for i in 2 3; do
  f=$R/bench-2x2-$i.txt
  timeout 150 $K/new2 bench --backend cuda --hosts 2 --world 4 --op all_reduce,reduce_scatter,all_gather \
    --algo auto,hier,flat -b 1K -e 256M -f 4 --iters 20 --warmup 5 > $f 2>&1
  echo "rc=$?" >> $f
  step "bench $i: $(grep -cE ' (auto|hier|flat) ' $f) rows"
done
for i in 1 2 3; do
  for v in old:true new2:true new2:false; do
    b=${v%%:*}; cc=${v##*:}
    f=$R/hosts2x1-$i-$b-check-$cc.txt
    timeout 60 $K/$b bench --backend cuda --hosts 2 --world 2 --op all_reduce,reduce_scatter,all_gather \
      --algo flat --call-check=$cc -b 1K -e 64M -f 4 --iters 20 --warmup 5 > $f 2>&1
    echo "rc=$?" >> $f
    step "2x1 $i $b check=$cc: $(grep -cE ' flat ' $f) rows"
  done
done
