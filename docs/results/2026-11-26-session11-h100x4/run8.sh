#!/usr/bin/env bash
# Eleventh session, 4-GPU host, call 8 (issue 20): the call check's records
# in one NCCL group with the call's step across hosts (binary of the commit
# "HostGroups call check on NCCL/RCCL: the records' all-gather goes in one
# group …"): the hosts/* cases, the bench with the check on and off
# alternated twice (2 simulated hosts × 2), and the fault trials.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r
mkdir -p "$R"
gunzip -f .gpu/intranode.gz
nvidia-smi --query-gpu=index,name,driver_version --format=csv > "$R/info.txt"
timeout 60 .gpu/intranode conformance --backend cuda --hosts 2 --world 4 --timeout 60s --run '^hosts/' > "$R/hosts.txt" 2>&1
echo "rc=$?" >> "$R/hosts.txt"; tail -2 "$R/hosts.txt"
for i in 1 2; do
  for check in true false; do
    echo "=== bench $i check=$check $(date -u +%T)"
    timeout 60 .gpu/intranode bench --backend cuda --hosts 2 --world 4 --op all_reduce,reduce_scatter,all_gather \
      --algo hier,flat,auto --call-check=$check -b 1K -e 16M -f 4 --iters 20 --warmup 5 > "$R/bench-$i-check-$check.txt" 2>&1
    echo "rc=$?" >> "$R/bench-$i-check-$check.txt"
  done
done
echo "=== faults $(date -u +%T)"
timeout 130 .gpu/intranode conformance --backend cuda --faults --hosts 2 --world 4 --trials 10 \
  --run '^faults/(kill|mismatch)-hosts$' > "$R/faults-hosts.txt" 2>&1
echo "rc=$?" >> "$R/faults-hosts.txt"; tail -4 "$R/faults-hosts.txt"
echo "=== done $(date -u +%T)"
tar czf "$OUT/results.tgz" -C "$OUT" r
