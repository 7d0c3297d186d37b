#!/usr/bin/env bash
# Tenth session, 4-GPU host, call 2: the suite after this session's
# harness changes (shared expected results, canary reads, Encode): every
# case with 2, 4 and 8 ranks on GPU 0, then in processes at world 4, then
# the cases across 2 simulated hosts.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r
mkdir -p "$R"
echo "=== shared $(date -u +%T)"
TEST_INTRA_NODE_COMM=1 timeout 230 .gpu/intranode conformance --backend cuda --share-device --world 2,4,8 --timeout 30s \
  > "$R/shared.txt" 2>&1
echo "rc=$?" >> "$R/shared.txt"
grep -v '^pass' "$R/shared.txt" | tail -8
echo "=== processes world 4 $(date -u +%T)"
timeout 250 .gpu/intranode conformance --backend cuda --world 4 > "$R/conformance.txt" 2>&1
echo "rc=$?" >> "$R/conformance.txt"
grep -v '^pass' "$R/conformance.txt" | tail -8
echo "=== hosts $(date -u +%T)"
timeout 90 .gpu/intranode conformance --backend cuda --hosts 2 --world 4 --timeout 60s --run '^hosts/' > "$R/hosts.txt" 2>&1
echo "rc=$?" >> "$R/hosts.txt"
tail -3 "$R/hosts.txt"
echo "=== done $(date -u +%T)"
tar czf "$OUT/results.tgz" -C "$OUT" r
