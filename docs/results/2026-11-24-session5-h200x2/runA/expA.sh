#!/usr/bin/env bash
# Session 5, run A: the CUDA backend on the shared GPU core
# (backend/internal/gpu). The CUDA unit tests on both GPUs, conformance in
# processes and goroutines, the graph-replay sweep with NCCL in the same
# run, eager small sizes. Kernels (fatbin) unchanged since session 4.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=.gpu/intranode
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info; nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee $OUT/info.txt
step unit
timeout 180 .gpu/cuda.test -test.v -test.timeout 170s > $OUT/unit.txt 2>&1
grep -E '^(--- FAIL|FAIL|ok|PASS$)' $OUT/unit.txt | head -20; echo "passed: $(grep -c -- '--- PASS' $OUT/unit.txt) skipped: $(grep -c -- '--- SKIP' $OUT/unit.txt) failed: $(grep -c -- '--- FAIL' $OUT/unit.txt)"
step conformance
timeout 200 $B conformance --backend cuda --world 2 --timeout 60s 2>&1 | tee $OUT/conformance.txt | grep -v '^pass'
step conformance-goroutines
timeout 200 $B conformance --backend cuda --world 2 --procs=false --timeout 60s 2>&1 | tee $OUT/conformance-goroutines.txt | grep -v '^pass'
step bench-graph
timeout 150 $B bench --backend cuda --world 2 --graph -b 1K -e 256M -f 4 --iters 50 --warmup 10 --algo oneshot,twoshot,pipeline,nccl,auto --plot $OUT/bench-graph.svg 2>&1 | tee $OUT/bench-graph.txt
step bench-eager
timeout 100 $B bench --backend cuda --world 2 -b 1K -e 64K -f 4 --iters 50 --warmup 10 --algo auto 2>&1 | tee $OUT/bench-eager.txt | grep auto
step done
# Then, on the same warm machine: the eager sweep three more times
# (bench-eager-x3.txt), and an alternating A/B of the eager sweep against
# the binary of 9d8f120 (before the GPU core), three rounds each,
# --iters 200 --warmup 20 (eager-ab.txt).
