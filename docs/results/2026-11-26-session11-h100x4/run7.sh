#!/usr/bin/env bash
# Eleventh session, 4-GPU host, call 7 (issue 20): the hierarchical
# all-reduce's call check sent at the call's start (binary B) against
# after the step inside the host (binary A, the commit before), check on,
# and B with the check off, alternated twice, 2 simulated hosts × 2; then
# B's fault trials across the hosts.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r
mkdir -p "$R"
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
echo "=== faults $(date -u +%T)"
timeout 150 .gpu/intranode-b conformance --backend cuda --faults --hosts 2 --world 4 --trials 10 \
  --run '^faults/(kill|mismatch)-hosts$' > "$R/faults-hosts.txt" 2>&1
echo "rc=$?" >> "$R/faults-hosts.txt"; tail -4 "$R/faults-hosts.txt"
echo "=== done $(date -u +%T)"
tar czf "$OUT/results.tgz" -C "$OUT" r
