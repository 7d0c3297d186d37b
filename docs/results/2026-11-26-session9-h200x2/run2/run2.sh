#!/usr/bin/env bash
# Session 9, call 2 on nvidia-h200-x2. Two binaries built on the
# development machine with -tags cuda (stripped, gzipped into .gpu):
#   old = 2ab45f6 (the data-movement collectives' push path up to
#         OneShotPushMax per block, the one-shot's own LL kernel)
#   new = the LL path for the data-movement collectives (one LL kernel
#         for the one-shot and the four collectives)
# The data-movement sweep of new with NCCL in the same run; old/new
# alternated on the LL sizes (data movement and the one-shot all-reduce,
# whose kernel was rewritten); conformance in processes; every collective's
# kernels with 2, 4 and 8 ranks on GPU 0.
set -u
export NCCL_NVLS_ENABLE=0
for b in old new; do gunzip -c .gpu/$b.gz > /tmp/$b; chmod +x /tmp/$b; done
R=$OUT/r; mkdir -p $R
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv | tee $R/info.txt
step movers
timeout 200 /tmp/new bench --backend cuda --world 2 --graph --op reduce_scatter,all_gather,broadcast,alltoall \
  -b 1K -e 256M -f 4 --iters 30 --warmup 5 --algo direct,nccl,auto --plot $R/bench.svg > $R/bench-movers.txt 2>&1
grep -E '^# [a-z_]+$| (direct|nccl|auto) ' $R/bench-movers.txt | awk '$1<=1048576 || /^#/'
step ab
for i in 1 2; do
  for b in old new; do
    timeout 60 /tmp/$b bench --backend cuda --world 2 --graph --op reduce_scatter,all_gather,broadcast,alltoall \
      -b 1K -e 512K -f 4 --iters 30 --warmup 5 --algo direct > $R/ab-mv-$b-$i.txt 2>&1
    timeout 60 /tmp/$b bench --backend cuda --world 2 --graph -b 1K -e 256K -f 4 --iters 50 --warmup 10 \
      --algo oneshot > $R/ab-ar-$b-$i.txt 2>&1
  done
done
for f in $R/ab-*; do echo "$(basename $f): $(grep -E ' (direct|oneshot) ' $f | awk '{printf "%s ", $7}')"; done
step conformance
timeout 150 /tmp/new conformance --backend cuda --world 2 --timeout 60s > $R/conformance.txt 2>&1
grep -vE '^pass' $R/conformance.txt | tail -8
step shared
TEST_INTRA_NODE_COMM=1 timeout 200 /tmp/new conformance --backend cuda --share-device --world 2,4,8 --timeout 30s \
  --run 'reduce_scatter|all_gather|broadcast|alltoall|movers|bad-arguments|allreduce/oneshot|allreduce/repeat|mismatch' > $R/shared.txt 2>&1
grep -vE '^pass' $R/shared.txt | tail -8
step pack
tar czf $OUT/results.tgz -C $OUT r
