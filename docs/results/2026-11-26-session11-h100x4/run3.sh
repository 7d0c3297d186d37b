#!/usr/bin/env bash
# Eleventh session, 4-GPU host, call 3 (issue 20): the call check's
# records gathered by NCCL straight in pinned host memory (binary B,
# .gpu/intranode-b) against copies to and from device memory (binary A,
# .gpu/intranode, the commit of run 2), alternated twice, with B's check off
# as the anchor; then B on the hosts/* cases and the fault cases.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r
mkdir -p "$R"
# The binaries travel gzipped (the device tool carries at most 64 MiB).
for b in intranode intranode-b; do [ -f .gpu/$b.gz ] && gunzip -f .gpu/$b.gz; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv > "$R/info.txt"
bench() { # binary tag check
  timeout 60 .gpu/$1 bench --backend cuda --hosts 2 --world 4 --op all_reduce,reduce_scatter,all_gather \
    --algo hier,flat,auto --call-check=$3 -b 1K -e 16M -f 4 --iters 20 --warmup 5 > "$R/bench-$2.txt" 2>&1
  echo "rc=$?" >> "$R/bench-$2.txt"
}
for i in 1 2; do
  echo "=== bench round $i $(date -u +%T)"
  bench intranode-b $i-b-check-true true
  bench intranode $i-a-check-true true
  bench intranode-b $i-b-check-false false
done
echo "=== hosts $(date -u +%T)"
timeout 90 .gpu/intranode-b conformance --backend cuda --hosts 2 --world 4 --timeout 60s --run '^hosts/' > "$R/hosts.txt" 2>&1
echo "rc=$?" >> "$R/hosts.txt"; tail -2 "$R/hosts.txt"
echo "=== faults $(date -u +%T)"
ls /dev/shm | grep -c '^nccl-' | sed 's/^/NCCL shared-memory files in \/dev\/shm before: /' | tee "$R/faults-hosts.txt"
timeout 200 .gpu/intranode-b conformance --backend cuda --faults --hosts 2 --world 4 --trials 10 \
  --run '^faults/(kill|mismatch)-hosts$' >> "$R/faults-hosts.txt" 2>&1
echo "rc=$?" >> "$R/faults-hosts.txt"; tail -5 "$R/faults-hosts.txt"
ls /dev/shm | grep '^nccl-' | tee -a "$R/faults-hosts.txt" | wc -l | sed 's/^/NCCL shared-memory files left in \/dev\/shm: /' | tee -a "$R/faults-hosts.txt"
echo "=== done $(date -u +%T)"
tar czf "$OUT/results.tgz" -C "$OUT" r
