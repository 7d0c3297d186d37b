#!/usr/bin/env bash
# Eleventh session, 4-GPU host, call 5: the collective library moved into
# the GPU core (gpu.CCL, ccl_impl.h; commit c607264) checked on GPUs: the
# CUDA backend's NCCL tests, the conformance suite in processes at world 4
# (the fallback and the movers on NCCL among them), the cases and fault
# trials across 2 simulated hosts (NCCL between them), and the all-reduce
# bench with NCCL as the anchor.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r
mkdir -p "$R"
for b in intranode cuda.test; do [ -f .gpu/$b.gz ] && gunzip -f .gpu/$b.gz; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv > "$R/info.txt"
echo "=== unit $(date -u +%T)"
timeout 120 .gpu/cuda.test -test.v -test.timeout 110s > "$R/unit.txt" 2>&1
echo "rc=$?" >> "$R/unit.txt"
grep -E '^(--- FAIL|FAIL|ok|PASS$)' "$R/unit.txt" | head; grep -c -- '--- PASS' "$R/unit.txt"
grep -E -- '--- (PASS|SKIP|FAIL): Test(GPU)?NCCL' "$R/unit.txt"
echo "=== conformance $(date -u +%T)"
timeout 200 .gpu/intranode conformance --backend cuda --world 4 --timeout 60s > "$R/conformance.txt" 2>&1
echo "rc=$?" >> "$R/conformance.txt"; tail -2 "$R/conformance.txt"
echo "=== hosts $(date -u +%T)"
timeout 60 .gpu/intranode conformance --backend cuda --hosts 2 --world 4 --timeout 60s --run '^hosts/' > "$R/hosts.txt" 2>&1
echo "rc=$?" >> "$R/hosts.txt"; tail -2 "$R/hosts.txt"
timeout 150 .gpu/intranode conformance --backend cuda --faults --hosts 2 --world 4 --trials 10 \
  --run '^faults/(kill|mismatch)-hosts$' > "$R/faults-hosts.txt" 2>&1
echo "rc=$?" >> "$R/faults-hosts.txt"; tail -4 "$R/faults-hosts.txt"
echo "=== bench $(date -u +%T)"
timeout 120 .gpu/intranode bench --backend cuda --world 4 --graph -b 1K -e 256M -f 4 --iters 20 --warmup 5 \
  --algo nccl,auto > "$R/bench.txt" 2>&1
echo "rc=$?" >> "$R/bench.txt"; grep -E "nccl|auto" "$R/bench.txt" | tail -20
echo "=== done $(date -u +%T)"
tar czf "$OUT/results.tgz" -C "$OUT" r
