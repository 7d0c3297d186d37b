#!/usr/bin/env bash
# One GPU experiment, end to end, on a lent multi-GPU host:
# topology, doctor, the CUDA backend's own tests, the conformance suite,
# our benchmark and the NCCL / PyTorch anchors in the same session.
# Build first on the development machine:
#   go build -tags cuda -o .gpu/intranode ./cmd/intranode
#   go test -c -tags cuda -o .gpu/cuda.test ./backend/cuda
# then run this with the device tool, carrying .gpu; results go to $OUT.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
STEPS=${STEPS:-"info topo doctor unit conformance bench anchor"}
WORLD=${WORLD:-$(nvidia-smi -L | wc -l)}
WORLDS=${WORLDS:-$WORLD}
step() { echo; echo "=== $1 ($(date -u +%T))"; }
for s in $STEPS; do
  case $s in
  info)
    step info
    nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv | tee "$OUT/info.txt"
    nvidia-smi topo -m | tee -a "$OUT/info.txt" ;;
  topo)
    step topo
    timeout 60 .gpu/intranode topo --backend cuda 2>&1 | tee "$OUT/topo.txt" ;;
  doctor)
    step doctor
    timeout 120 .gpu/intranode doctor --backend cuda 2>&1 | tee "$OUT/doctor.txt" ;;
  unit)
    step unit
    timeout 180 .gpu/cuda.test -test.v -test.timeout 170s 2>&1 > "$OUT/unit.txt"
    grep -E '^(--- |FAIL|PASS|ok)' "$OUT/unit.txt" | grep -v PASS: | head -40
    grep -c -- '--- PASS' "$OUT/unit.txt" ;;
  conformance)
    step conformance
    timeout 300 .gpu/intranode conformance --backend cuda --world "$WORLDS" --timeout 60s 2>&1 | tee "$OUT/conformance.txt" | grep -v '^pass' ;;
  bench)
    step bench
    timeout 150 .gpu/intranode bench --backend cuda --world "$WORLD" --graph -b 1K -e 256M -f 4 --iters 50 --warmup 10 --plot "$OUT/bench-graph.svg" 2>&1 | tee "$OUT/bench-graph.txt"
    timeout 120 .gpu/intranode bench --backend cuda --world "$WORLD" -b 1K -e 64K -f 4 --iters 50 --warmup 10 --algo auto 2>&1 | tee "$OUT/bench-eager.txt" ;;
  faults)
    # Kernel-level faults on the device: mismatched calls, a stalled rank
    # and a killed rank in the middle of an all-reduce.
    step faults
    timeout 420 .gpu/intranode conformance --backend cuda --world "$WORLDS" --faults --trials "${TRIALS:-20}" \
      --run 'faults/(mismatched-calls|stall-allreduce|kill-allreduce)' 2>&1 | tee "$OUT/faults.txt" | grep -v '^pass' ;;
  rendezvous)
    # Where Rendezvous spends its time: the phases each rank logs at debug
    # level, from a short bench run.
    step rendezvous
    timeout 120 .gpu/intranode bench --backend cuda --world "$WORLD" -b 1K -e 1K --iters 5 --warmup 1 -v 2>&1 \
      | tee "$OUT/rendezvous.txt" | grep -E 'rendezvous|phase' | head -60 ;;
  anchor)
    step anchor
    timeout 200 python3 scripts/gpu/anchor.py 2>&1 | tee "$OUT/anchor.csv" ;;
  esac
done
