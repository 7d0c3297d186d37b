#!/usr/bin/env bash
# Session 9 on nvidia-h200-x4: the data-movement collectives' LL path at
# world 4 against NCCL in the same run (1 KiB to 4 MiB: LL up to 87 KiB per
# block, the push path above), then 12 kill trials at world 4 (the NCCL
# all-to-all on its own goroutine, first run at world 4). Binary of this
# commit: go build -tags cuda -ldflags="-s -w" -o .gpu/intranode ./cmd/intranode
set -u
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info
nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee $R/info.txt
step movers
timeout 120 .gpu/intranode bench --backend cuda --world 4 --graph --op reduce_scatter,all_gather,broadcast,alltoall \
  -b 1K -e 4M -f 4 --iters 30 --warmup 5 --algo direct,nccl,auto > $R/bench-movers.txt 2>&1
grep -E '^# [a-z_]+$| (direct|nccl|auto) ' $R/bench-movers.txt | awk '{print $1, $5, $7}' | paste -sd' ' | fold -w 2000
step kills
timeout 170 .gpu/intranode soak --backend cuda --world 4 --chaos kill --jobs "${KILLS:-12}" --job 4s --timeout 3s \
  --duration 5m > $R/kills.txt 2>&1
tail -3 $R/kills.txt
step pack
tar czf $OUT/results.tgz -C $OUT r
