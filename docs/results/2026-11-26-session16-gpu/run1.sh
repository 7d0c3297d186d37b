#!/usr/bin/env bash
# Sixteenth session, 4-GPU host (issue 20), first call: the call check on
# the mesh (0d71a38). .gpu/k4 holds two CLI binaries built on the
# development machine with -tags cuda, stripped and gzipped: old =
# 03d090a (the check all-gathers its records on the engines), new =
# 0d71a38 (records between the CPUs over TCP; hierarchical calls keep the
# all-gather for their status words). Fault trials at 2 x 2 and 2 x 1,
# the hosts/ cases at 2 x 2, then the 2 x 2 bench to 256 MiB: every path
# with the check, and flat NCCL without it (NCCL alone).
set -u
export NCCL_NVLS_ENABLE=0
R=$OUT/${RUN:-r1}; mkdir -p $R
K=.gpu/k4
gunzip -f $K/old.gz $K/new.gz 2>/dev/null
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info
nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee $R/info.txt
for hw in 4 2; do
  f=$R/faults-2x$((hw/2)).txt
  timeout 150 $K/new conformance --backend cuda --faults --trials 20 --hosts 2 --world $hw \
    --run '^faults/(kill|mismatch)-hosts$' > $f 2>&1
  echo "rc=$?" >> $f
  step "faults 2x$((hw/2)): $(grep -E 'trials|passed' $f | tr '\n' ' ')"
done
f=$R/hosts-cases-2x2.txt
timeout 60 $K/new conformance --backend cuda --hosts 2 --world 4 --run '^hosts/' > $f 2>&1; echo "rc=$?" >> $f
step "hosts cases: $(tail -2 $f | tr '\n' ' ')"
f=$R/bench-2x2-1.txt
timeout 200 $K/new bench --backend cuda --hosts 2 --world 4 --op all_reduce,reduce_scatter,all_gather \
  --algo auto,hier,flat -b 1K -e 256M -f 4 --iters 20 --warmup 5 > $f 2>&1
echo "rc=$?" >> $f
step "bench 1: $(grep -cE ' (auto|hier|flat) ' $f) rows"
f=$R/bench-2x2-flat-nocheck-1.txt
timeout 100 $K/new bench --backend cuda --hosts 2 --world 4 --op all_reduce,reduce_scatter,all_gather \
  --algo flat --call-check=false -b 1K -e 256M -f 4 --iters 20 --warmup 5 > $f 2>&1
echo "rc=$?" >> $f
step "flat unchecked: $(grep -cE ' flat ' $f) rows"
