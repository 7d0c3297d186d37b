#!/usr/bin/env bash
# Tenth session, 4-GPU host, call 3 (issue 20): the 2 × 2 simulated-host
# bench twice more, for the size windows of HostGroups' path choice.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r
mkdir -p "$R"
for i in 1 2; do
  echo "=== hosts bench $i $(date -u +%T)"
  timeout 200 .gpu/intranode bench --backend cuda --hosts 2 --world 4 --op all_reduce,reduce_scatter,all_gather \
    -b 1K -e 256M -f 4 --iters 20 --warmup 5 > "$R/hosts-bench-$i.txt" 2>&1
  echo "rc=$?" >> "$R/hosts-bench-$i.txt"
done
echo "=== done $(date -u +%T)"
tar czf "$OUT/results.tgz" -C "$OUT" r
