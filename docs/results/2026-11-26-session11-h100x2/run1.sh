#!/usr/bin/env bash
# Eleventh session, 2-GPU host, call 1 (issue 20): 2 simulated hosts × 1
# GPU (NCCL_HOSTID per process), where every HostGroups call is NCCL over
# the two ranks: the call check on and off, alternated twice.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r
mkdir -p "$R"
gunzip -f .gpu/intranode.gz
nvidia-smi --query-gpu=index,name,driver_version --format=csv > "$R/info.txt"; nvidia-smi topo -m >> "$R/info.txt"
for i in 1 2; do
  for check in true false; do
    echo "=== bench $i check=$check $(date -u +%T)"
    timeout 100 .gpu/intranode bench --backend cuda --hosts 2 --world 2 --op all_reduce,reduce_scatter,all_gather \
      --algo flat --call-check=$check -b 1K -e 64M -f 4 --iters 20 --warmup 5 > "$R/bench-$i-check-$check.txt" 2>&1
    echo "rc=$?" >> "$R/bench-$i-check-$check.txt"
  done
done
echo "=== done $(date -u +%T)"
tar czf "$OUT/results.tgz" -C "$OUT" r
