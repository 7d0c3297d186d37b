#!/usr/bin/env bash
# Eighteenth session, one H100, third call: the launch benchmarks only, the
# binding before (01ca85e) and after (0c7c290) alternated ten times, three
# runs of 100,000 launches each per alternation (the second call's eager
# launches looked 7% slower by the median with the ranges overlapping).
# Same .gpu/k6 as run2.sh. Run from the repository root.
set -u
R=$OUT/r3; mkdir -p $R
K=$PWD/.gpu/k6
gunzip -f $K/*.gz
nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee $R/info.txt
for i in $(seq 1 10); do
  for v in before after; do
    (cd backend/cuda && $K/cuda-$v.test -test.run '^$' -test.bench 'BenchmarkGPU(LaunchEager|GraphReplay)$' \
      -test.benchtime 100000x -test.count 3 > $R/bench-$i-$v.txt 2>&1)
  done
done
tar czf $OUT/r3.tgz -C $OUT r3 && rm -rf $R
