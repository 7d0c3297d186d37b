#!/usr/bin/env bash
# Session 5 on one H100: the CUDA backend with the shared C shims
# (backend/internal/gpu/shim_impl.h) on a real driver: the unit tests (the
# two-GPU ones skip), topo and doctor, and the one-rank conformance cases.
set -u
for f in new cuda.test; do gunzip -c .gpu/$f.gz > /tmp/$f; chmod +x /tmp/$f; done
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info; nvidia-smi --query-gpu=index,name,driver_version --format=csv
step unit
timeout 180 /tmp/cuda.test -test.v -test.timeout 170s > $OUT/unit.txt 2>&1
grep -E '^(--- FAIL|FAIL|ok|PASS$)' $OUT/unit.txt | head; echo "passed: $(grep -c -- '--- PASS' $OUT/unit.txt) skipped: $(grep -c -- '--- SKIP' $OUT/unit.txt) failed: $(grep -c -- '--- FAIL' $OUT/unit.txt)"
step topo; timeout 60 /tmp/new topo --backend cuda 2>&1 | tee $OUT/topo.txt
step doctor; timeout 120 /tmp/new doctor --backend cuda 2>&1 | tee $OUT/doctor.txt
step conformance; timeout 200 /tmp/new conformance --backend cuda --world 2 --timeout 60s 2>&1 | tee $OUT/conformance.txt | tail -3
step done
