#!/usr/bin/env bash
# Eighteenth session, one H100, fourth call: the CUDA unit tests and the
# suite with every rank on GPU 0 at 4d5b990 (the seven one-handle shims of
# shim_impl.h made by one macro, after the H100 runs of the binding).
# .gpu/k7 holds cuda.test.gz (go test -c -tags cuda -trimpath
# -ldflags="-s -w" ./backend/cuda) and intranode.gz (go build -tags cuda
# -trimpath -ldflags="-s -w" ./cmd/intranode). Run from the repository root.
set -u
R=$OUT/r4; mkdir -p $R
K=$PWD/.gpu/k7
gunzip -f $K/*.gz
nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee $R/info.txt
(cd backend/cuda && timeout 300 $K/cuda.test -test.count=1 -test.v > $R/cuda-unit.txt 2>&1; echo "rc=$?" >> $R/cuda-unit.txt)
grep -E '^(--- FAIL|ok|FAIL|PASS|rc=)' $R/cuda-unit.txt | tail -8
echo "passed $(grep -c '^--- PASS' $R/cuda-unit.txt), skipped $(grep -c '^--- SKIP' $R/cuda-unit.txt), failed $(grep -c '^--- FAIL' $R/cuda-unit.txt)"
timeout 200 $K/intranode conformance --backend cuda --share-device --world 2,4 --timeout 60s > $R/conformance-shared.txt 2>&1
echo "rc=$?" >> $R/conformance-shared.txt
grep -vE '^pass' $R/conformance-shared.txt | tail -4
tar czf $OUT/r4.tgz -C $OUT r4 && rm -rf $R
