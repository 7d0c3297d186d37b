#!/usr/bin/env bash
# Session 4, run O: ranks as goroutines of one process on CUDA, before
# (old: NVML read by every LinkMatrix call) and after (new: read once per
# backend, under a lock) the fix; conformance --procs=false three times each.
set -u
for v in old new; do gunzip -c .gpu/$v.gz > /tmp/$v; chmod +x /tmp/$v; done
gunzip -c .gpu/cuda.test.gz > /tmp/cuda.test; chmod +x /tmp/cuda.test
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step gotest
(cd backend/cuda && timeout 120 /tmp/cuda.test -test.v -test.run 'LinkMatrix' 2>&1) | tee $OUT/gotest.txt | grep -E '^(---|ok|FAIL|PASS)'
for i in 1 2 3; do
  for v in old new; do
    step "conformance goroutines $v $i"
    timeout 200 /tmp/$v conformance --backend cuda --world 2 --procs=false --timeout 10s 2>&1 > $OUT/conf-$v-$i.txt; tail -n 2 $OUT/conf-$v-$i.txt; grep '^fail' $OUT/conf-$v-$i.txt | cut -c1-60
  done
done
step "bench goroutines new"
timeout 60 /tmp/new bench --backend cuda --world 2 --procs=false -b 1K -e 4M -f 16 --algo auto 2>&1 | tee $OUT/bench-g-new.txt | tail -5
step done
