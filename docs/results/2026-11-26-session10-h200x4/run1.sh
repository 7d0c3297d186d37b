#!/usr/bin/env bash
# Tenth session, 4-GPU host, call 1 (issue 20): 20 kill trials of a rank
# of a job across 2 simulated hosts × 2 GPUs (NCCL between them), then the
# hierarchical collectives against flat NCCL at 1 KiB–256 MiB.
# Binary: go build -tags cuda -ldflags="-s -w" -o .gpu/intranode ./cmd/intranode
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r
mkdir -p "$R"
{ date -u; nvidia-smi -L; nvidia-smi topo -m; nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1; } > "$R/info.txt" 2>&1
echo "=== kill-hosts $(date -u +%T)"
timeout 300 .gpu/intranode conformance --backend cuda --faults --hosts 2 --world 4 --trials 20 --run '^faults/kill-hosts$' \
  > "$R/kill-hosts.txt" 2>&1
echo "rc=$?" >> "$R/kill-hosts.txt"
tail -5 "$R/kill-hosts.txt"
ls /dev/shm | grep -c '^nccl-' | sed 's/^/NCCL shared-memory files left in \/dev\/shm: /' | tee -a "$R/kill-hosts.txt"
echo "=== hosts bench $(date -u +%T)"
timeout 240 .gpu/intranode bench --backend cuda --hosts 2 --world 4 --op all_reduce,reduce_scatter,all_gather \
  -b 1K -e 256M -f 4 --iters 20 --warmup 5 > "$R/hosts-bench.txt" 2>&1
echo "rc=$?" >> "$R/hosts-bench.txt"
grep -E '^# [a-z_]+$|hier|flat' "$R/hosts-bench.txt" | head -80
echo "=== done $(date -u +%T)"
tar czf "$OUT/results.tgz" -C "$OUT" r
