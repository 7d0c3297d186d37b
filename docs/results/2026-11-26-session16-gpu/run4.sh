#!/usr/bin/env bash
# Sixteenth session, 4-GPU host (issue 20), fourth call: the committed
# windows. .gpu/k4 holds new3 = 3569f9f (-tags cuda, stripped, gzipped):
# the call check on the mesh, and in a job on the mesh the all-reduce flat
# below 128 KiB. At 2 x 2: the fault trials, then the selected path (auto)
# against flat NCCL, both checked, twice, 1 KiB to 256 MiB.
set -u
export NCCL_NVLS_ENABLE=0
R=$OUT/r4; mkdir -p $R
K=.gpu/k4
gunzip -f $K/*.gz
step() { echo; echo "=== $1 ($(date -u +%T))"; }
nvidia-smi --query-gpu=index,name,driver_version --format=csv > $R/info.txt
f=$R/faults-2x2.txt
timeout 150 $K/new3 conformance --backend cuda --faults --trials 20 --hosts 2 --world 4 \
  --run '^faults/(kill|mismatch)-hosts$' > $f 2>&1
echo "rc=$?" >> $f
step "faults 2x2: $(grep -E '^world|passed' $f | tr '\n' ' ')"
for i in 1 2; do
  f=$R/bench-2x2-$i.txt
  timeout 150 $K/new3 bench --backend cuda --hosts 2 --world 4 --op all_reduce,reduce_scatter,all_gather \
    --algo auto,flat -b 1K -e 256M -f 4 --iters 20 --warmup 5 > $f 2>&1
  echo "rc=$?" >> $f
  step "bench $i: $(grep -cE ' (auto|flat) ' $f) rows"
done
tar czf $OUT/r4.tgz -C $OUT r4 && rm -rf $R
