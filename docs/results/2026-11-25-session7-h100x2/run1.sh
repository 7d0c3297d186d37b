#!/usr/bin/env bash
# Session 7, run 1 on nvidia-h100-x2. Three binaries built on the
# development machine with -tags cuda (stripped, gzipped into .gpu):
#   old  = f2bb842: one-shot without LL line clearing, data-movement
#          collectives on the two-barrier path only (the run C kernels)
#   prev = 2ddb8f2: LL clearing, the push path (session 6's last kernels)
#   new  = this commit: prev + the allocation range check on the host
# CUDA unit tests, conformance in processes and with ranks sharing GPU 0,
# the all-reduce and data-movement graph sweeps with NCCL in the same run,
# old/new alternated where the kernels differ, prev/new alternated in eager
# mode where only the host path differs.
set -u
export NCCL_NVLS_ENABLE=0
for b in old prev new cuda.test; do gunzip -c .gpu/$b.gz > /tmp/$b; chmod +x /tmp/$b; done
R=$OUT/r; mkdir -p $R
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info
nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm --format=csv | tee $R/info.txt
nvidia-smi topo -m | head -4 | tee -a $R/info.txt
step unit
timeout 120 /tmp/cuda.test -test.v -test.timeout 110s > $R/unit.txt 2>&1
grep -E -- '^--- (FAIL|SKIP)' $R/unit.txt | head; grep -E -- '--- PASS: TestGPUCheckRange' $R/unit.txt
echo "pass $(grep -c -- '^--- PASS' $R/unit.txt) skip $(grep -c -- '^--- SKIP' $R/unit.txt) fail $(grep -c -- '^--- FAIL' $R/unit.txt)"
step conformance
timeout 200 /tmp/new conformance --backend cuda --world 2 --timeout 60s > $R/conformance.txt 2>&1
grep -vE '^pass' $R/conformance.txt | tail -10
step shared-device
TEST_INTRA_NODE_COMM=1 timeout 90 /tmp/new conformance --backend cuda --share-device --world 4,8 --timeout 30s \
  --run 'reduce_scatter|all_gather|broadcast|alltoall|movers|bad-arguments|allreduce/every' > $R/shared.txt 2>&1
grep -vE '^pass' $R/shared.txt | tail -6
step small-ab
# One-shot and the data-movement collectives' small sizes, graph replay,
# old and new alternated twice.
for round in 1 2; do for b in old new; do
  timeout 60 /tmp/$b bench --backend cuda --world 2 --graph -b 1K -e 64K -f 4 --iters 200 --warmup 20 --algo oneshot > $R/ab-ar-$b-$round.txt 2>&1
  timeout 80 /tmp/$b bench --backend cuda --world 2 --graph --op reduce_scatter,all_gather,broadcast,alltoall -b 1K -e 1M -f 4 --iters 100 --warmup 10 --algo direct > $R/ab-mv-$b-$round.txt 2>&1
done; done
grep -hE '^ *[0-9]' $R/ab-ar-*-1.txt | head -12
step bench-allreduce
timeout 120 /tmp/new bench --backend cuda --world 2 --graph -b 1K -e 256M -f 4 --iters 30 --warmup 5 \
  --algo oneshot,twoshot,pipeline,nccl,auto --plot $R/bench-allreduce.svg > $R/bench-allreduce.txt 2>&1
grep -E 'auto|nccl' $R/bench-allreduce.txt | head -40
step bench-movers
timeout 200 /tmp/new bench --backend cuda --world 2 --graph --op reduce_scatter,all_gather,broadcast,alltoall \
  -b 1K -e 256M -f 4 --iters 30 --warmup 5 --algo direct,nccl,auto --plot $R/bench.svg > $R/bench-movers.txt 2>&1
grep -E '^# [a-z_]+$|direct|nccl|auto' $R/bench-movers.txt | grep -v "^# time\|^# output\|^# (n" | head -80
step eager-ab
for round in 1 2 3; do for b in prev new; do
  timeout 40 /tmp/$b bench --backend cuda --world 2 -b 1K -e 64K -f 4 --iters 300 --warmup 30 --algo auto > $R/eager-$b-$round.txt 2>&1
done; done
step done
tar czf $OUT/run1.tgz -C $OUT r && rm -rf $R
