#!/usr/bin/env bash
# Eleventh session, 4-GPU host, call 4 (issue 21): first Rendezvous at
# worlds 2 and 4 with every rank's device open before the clock starts
# (the bench now waits for that through the store), three runs each, then
# one verbose run at world 4 for the phases each rank logs.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT/r
mkdir -p "$R"
nvidia-smi --query-gpu=index,name,driver_version --format=csv > "$R/info.txt"
for w in 2 4; do
  for i in 1 2 3; do
    timeout 60 .gpu/intranode bench --backend cuda --world $w -b 1K -e 1K --iters 5 --warmup 1 > "$R/rdv-w$w-$i.txt" 2>&1
    echo "rc=$?" >> "$R/rdv-w$w-$i.txt"
    grep -h "first Rendezvous\|opening the device" "$R/rdv-w$w-$i.txt"
  done
done
timeout 60 .gpu/intranode bench --backend cuda --world 4 -b 1K -e 1K --iters 5 --warmup 1 -v > "$R/rdv-w4-verbose.txt" 2>&1
echo "rc=$?" >> "$R/rdv-w4-verbose.txt"
grep -h "first Rendezvous" "$R/rdv-w4-verbose.txt"
tar czf "$OUT/results.tgz" -C "$OUT" r
