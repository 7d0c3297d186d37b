#!/usr/bin/env bash
# Session 5, run B: the C shims shared (backend/internal/gpu/shim_impl.h) on
# top of run A's Go core: the CUDA unit tests on both GPUs, conformance in
# processes, the graph sweep with NCCL, then the eager sweep alternating the
# binary of 9d8f120 (before the core) with this one, and a Go CPU profile of
# rank 0 of each over 20000 eager 4 KiB calls.
set -u
export NCCL_NVLS_ENABLE=0
for f in old new cuda.test; do gunzip -c .gpu/$f.gz > /tmp/$f; chmod +x /tmp/$f; done
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step unit
timeout 180 /tmp/cuda.test -test.v -test.timeout 170s > $OUT/unit.txt 2>&1
grep -E '^(--- FAIL|FAIL|ok|PASS$)' $OUT/unit.txt | head; echo "passed: $(grep -c -- '--- PASS' $OUT/unit.txt) skipped: $(grep -c -- '--- SKIP' $OUT/unit.txt) failed: $(grep -c -- '--- FAIL' $OUT/unit.txt)"
step conformance
timeout 200 /tmp/new conformance --backend cuda --world 2 --timeout 60s 2>&1 | tee $OUT/conformance.txt | tail -2
step bench-graph
timeout 150 /tmp/new bench --backend cuda --world 2 --graph -b 1K -e 256M -f 4 --iters 50 --warmup 10 --algo auto,nccl 2>&1 | tee $OUT/bench-graph.txt | grep -E '^ +[0-9]'
step eager-ab
for i in 1 2 3; do for v in old new; do echo "== $v $i"; timeout 60 /tmp/$v bench --backend cuda --world 2 -b 1K -e 64K -f 4 --iters 200 --warmup 20 --algo auto 2>&1 | grep auto; done; done | tee $OUT/eager-ab.txt
step profiles
for v in old new; do timeout 120 /tmp/$v bench --backend cuda --world 2 -b 4K -e 4K --iters 20000 --warmup 100 --algo auto --cpuprofile $OUT/$v.prof 2>&1 | grep auto; done
step done
