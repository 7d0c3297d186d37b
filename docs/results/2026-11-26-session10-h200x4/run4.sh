#!/usr/bin/env bash
# Tenth session, 4-GPU host, call 4 (issue 20): HostGroups' size windows
# (collective.DefaultHostFlat) measured: hier, flat and auto (the windows)
# across 2 simulated hosts × 2 GPUs, twice; then the hosts/* cases.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r
mkdir -p "$R"
for i in 1 2; do
  echo "=== hosts bench $i $(date -u +%T)"
  timeout 230 .gpu/intranode bench --backend cuda --hosts 2 --world 4 --op all_reduce,reduce_scatter,all_gather \
    --algo hier,flat,auto -b 1K -e 256M -f 4 --iters 20 --warmup 5 > "$R/hosts-bench-$i.txt" 2>&1
  echo "rc=$?" >> "$R/hosts-bench-$i.txt"
done
echo "=== hosts $(date -u +%T)"
timeout 90 .gpu/intranode conformance --backend cuda --hosts 2 --world 4 --timeout 60s --run '^hosts/' > "$R/hosts.txt" 2>&1
echo "rc=$?" >> "$R/hosts.txt"
tail -2 "$R/hosts.txt"
echo "=== done $(date -u +%T)"
tar czf "$OUT/results.tgz" -C "$OUT" r
