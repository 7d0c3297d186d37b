#!/usr/bin/env bash
# Eleventh session, 4-GPU host, call 1 (issue 20): the call check across
# hosts on GPUs. 2 simulated hosts × 2 GPUs (NCCL_HOSTID per process):
# the hosts/* cases; the fault cases across hosts now that the fault
# runner tells each rank its host (20 trials each: a killed rank, hosts
# whose calls differ); the bench with the check on and off (hier, flat,
# auto; 1 KiB to 16 MiB), twice alternated.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r
mkdir -p "$R"
nvidia-smi --query-gpu=index,name,driver_version --format=csv > "$R/info.txt"; nvidia-smi topo -m >> "$R/info.txt"
echo "=== hosts $(date -u +%T)"
timeout 90 .gpu/intranode conformance --backend cuda --hosts 2 --world 4 --timeout 60s --run '^hosts/' > "$R/hosts.txt" 2>&1
echo "rc=$?" >> "$R/hosts.txt"; tail -2 "$R/hosts.txt"
echo "=== faults $(date -u +%T)"
timeout 240 .gpu/intranode conformance --backend cuda --faults --hosts 2 --world 4 --trials 20 \
  --run '^faults/(kill|mismatch)-hosts$' > "$R/faults-hosts.txt" 2>&1
echo "rc=$?" >> "$R/faults-hosts.txt"; tail -5 "$R/faults-hosts.txt"
ls /dev/shm | grep -c '^nccl-' | sed 's/^/NCCL shared-memory files left in \/dev\/shm: /' | tee -a "$R/faults-hosts.txt"
for i in 1 2; do
  for check in true false; do
    echo "=== bench $i check=$check $(date -u +%T)"
    timeout 60 .gpu/intranode bench --backend cuda --hosts 2 --world 4 --op all_reduce,reduce_scatter,all_gather \
      --algo hier,flat,auto --call-check=$check -b 1K -e 16M -f 4 --iters 20 --warmup 5 > "$R/bench-$i-check-$check.txt" 2>&1
    echo "rc=$?" >> "$R/bench-$i-check-$check.txt"
  done
done
echo "=== done $(date -u +%T)"
tar czf "$OUT/results.tgz" -C "$OUT" r
