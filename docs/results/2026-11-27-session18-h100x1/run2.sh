#!/usr/bin/env bash
# Eighteenth session, one H100: the CUDA backend's unit tests with the one
# cgo binding of the runtime shims (0c7c290: its wrappers return the slot
# by value, so it does not escape), the suite with every rank on
# GPU 0 (worlds 2 and 4), and the launch benchmarks of the binding before
# (01ca85e) and after, alternated four times. .gpu/k6 holds
# cuda-{before,after}.test.gz (go test -c -tags cuda -trimpath
# -ldflags="-s -w" ./backend/cuda) and intranode.gz (go build -tags cuda
# -trimpath -ldflags="-s -w" ./cmd/intranode), built on the development
# machine. Run from the repository root.
set -u
R=$OUT/r2; mkdir -p $R
K=$PWD/.gpu/k6
gunzip -f $K/*.gz
nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee $R/info.txt
(cd backend/cuda && timeout 300 $K/cuda-after.test -test.count=1 -test.v > $R/cuda-unit.txt 2>&1; echo "rc=$?" >> $R/cuda-unit.txt)
grep -E '^(--- FAIL|ok|FAIL|PASS|rc=)' $R/cuda-unit.txt | tail -8
echo "passed $(grep -c '^--- PASS' $R/cuda-unit.txt), skipped $(grep -c '^--- SKIP' $R/cuda-unit.txt), failed $(grep -c '^--- FAIL' $R/cuda-unit.txt)"
timeout 200 $K/intranode conformance --backend cuda --share-device --world 2,4 --timeout 60s > $R/conformance-shared.txt 2>&1
echo "rc=$?" >> $R/conformance-shared.txt
grep -vE '^pass' $R/conformance-shared.txt | tail -4
for i in 1 2 3 4; do
  for v in before after; do
    (cd backend/cuda && $K/cuda-$v.test -test.run '^$' -test.bench 'BenchmarkGPU(LaunchEager|GraphReplay)$' \
      -test.benchtime 200000x -test.count 3 > $R/bench-$i-$v.txt 2>&1)
    echo "$v $i: $(grep -E '^Benchmark' $R/bench-$i-$v.txt | awk '{printf "%s %s ns; ", $1, $3}')"
  done
done
tar czf $OUT/r2.tgz -C $OUT r2 && rm -rf $R
