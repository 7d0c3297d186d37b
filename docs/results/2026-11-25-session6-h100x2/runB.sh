#!/usr/bin/env bash
# Session 6, run B on nvidia-h100-x2: the final code of the one-GPU-core issue
# (Go core and shared C shims) against the binary of 9d8f120 (before the
# core) on the same machine: the CUDA unit tests on both GPUs, conformance at
# world 2 in processes and goroutines, the graph-replay sweep with NCCL twice
# per binary (alternating, for the spread), the eager small sizes alternating
# three rounds each, and a Go CPU profile of rank 0 over 20000 eager 4 KiB
# calls per binary.
set -u
export NCCL_NVLS_ENABLE=0
for f in old new cuda.test; do gunzip -c .gpu/$f.gz > /tmp/$f; chmod +x /tmp/$f; done
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info
nvidia-smi --query-gpu=index,name,driver_version --format=csv > $OUT/info.txt; nvidia-smi topo -m >> $OUT/info.txt; cat $OUT/info.txt
step unit
timeout 180 /tmp/cuda.test -test.v -test.timeout 170s > $OUT/unit.txt 2>&1
grep -E '^(--- FAIL|FAIL|ok|PASS$)' $OUT/unit.txt | head; echo "passed: $(grep -c -- '--- PASS' $OUT/unit.txt) skipped: $(grep -c -- '--- SKIP' $OUT/unit.txt) failed: $(grep -c -- '--- FAIL' $OUT/unit.txt)"
step conformance
{ timeout 200 /tmp/new conformance --backend cuda --world 2 --timeout 60s 2>&1; echo "== goroutines"; timeout 200 /tmp/new conformance --backend cuda --world 2 --procs=false --timeout 60s 2>&1; } > $OUT/conformance.txt
grep -vE '^pass' $OUT/conformance.txt | tail -8
step bench-graph
for i in 1 2; do for v in new old; do echo "== $v $i"; timeout 120 /tmp/$v bench --backend cuda --world 2 --graph -b 1K -e 256M -f 4 --iters 50 --warmup 10 --algo oneshot,twoshot,pipeline,nccl,auto 2>&1; done; done > $OUT/bench-graph.txt
grep -E '^==|auto|nccl' $OUT/bench-graph.txt | head -100
step eager-ab
for i in 1 2 3; do for v in old new; do echo "== $v $i"; timeout 60 /tmp/$v bench --backend cuda --world 2 -b 1K -e 64K -f 4 --iters 200 --warmup 20 --algo auto 2>&1 | grep auto; done; done | tee $OUT/eager-ab.txt
step profiles
for v in old new; do timeout 90 /tmp/$v bench --backend cuda --world 2 -b 4K -e 4K --iters 20000 --warmup 100 --algo auto --cpuprofile $OUT/$v.prof 2>&1 | grep auto; done
step done
