#!/usr/bin/env bash
# Prove a multi-GPU host in one device call (at most 10 minutes with the
# default steps): topology against nvidia-smi's, doctor, the CUDA backend's
# own tests, the conformance suite in processes, the bench of every
# collective with NCCL in the same run, the PyTorch anchor, the fault
# cases. Build first on the development machine:
#   go build -tags cuda -o .gpu/intranode ./cmd/intranode
#   go test -c -tags cuda -o .gpu/cuda.test ./backend/cuda
# then run this with the device tool, carrying .gpu. Everything lands in
# $OUT/results.tgz, repacked after every step (the device tool brings back
# at most 8 files).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}
# The raw files stay outside $OUT and are packed into one archive there
# after every step, so a call cut short still brings back the steps done.
R=${RAW:-/tmp/intranode-raw}/r
rm -rf "$R"
mkdir -p "$R" "$OUT"
pack() { tar czf "$OUT/results.tgz" -C "$(dirname "$R")" r; }
STEPS=${STEPS:-"info topo doctor unit enqueue conformance bench anchor rendezvous faults"}  # also: shared hosts kills calm
WORLD=${WORLD:-$(nvidia-smi -L | wc -l)}
WORLDS=${WORLDS:-$WORLD}
step() { echo; echo "=== $1 ($(date -u +%T))"; }
for s in $STEPS; do
  case $s in
  info)
    step info
    nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv | tee "$R/info.txt"
    nvidia-smi topo -m | tee -a "$R/info.txt" ;;
  topo)
    step topo
    timeout 60 .gpu/intranode topo --backend cuda 2>&1 | tee "$R/topo.txt" ;;
  doctor)
    step doctor
    timeout 120 .gpu/intranode doctor --backend cuda 2>&1 | tee "$R/doctor.txt" ;;
  unit)
    step unit
    timeout 180 .gpu/cuda.test -test.v -test.timeout 170s 2>&1 > "$R/unit.txt"
    grep -E '^(--- |FAIL|PASS|ok)' "$R/unit.txt" | grep -v PASS: | head -40
    grep -c -- '--- PASS' "$R/unit.txt" ;;
  enqueue)
    # The host time of an eager all-reduce call (BenchmarkGPUEnqueue).
    step enqueue
    timeout 120 .gpu/cuda.test -test.run '^$' -test.bench GPUEnqueue -test.benchtime 20000x -test.count 3 2>&1 \
      | tee "$R/enqueue.txt" | grep -E 'Benchmark|SKIP|FAIL' ;;
  conformance)
    step conformance
    timeout 300 .gpu/intranode conformance --backend cuda --world "$WORLDS" --timeout 60s 2>&1 | tee "$R/conformance.txt" | grep -v '^pass' ;;
  bench)
    # All-reduce by algorithm, then every collective: the selected path
    # and NCCL in the same run, a chart per collective.
    step bench
    timeout 150 .gpu/intranode bench --backend cuda --world "$WORLD" --graph -b 1K -e 256M -f 4 --iters 30 --warmup 5 \
      --algo oneshot,twoshot,pipeline,nccl,auto --plot "$R/bench-allreduce.svg" 2>&1 | tee "$R/bench-graph.txt" | grep -E 'auto|nccl'
    timeout 240 .gpu/intranode bench --backend cuda --world "$WORLD" --graph --op reduce_scatter,all_gather,broadcast,alltoall \
      -b 1K -e 256M -f 4 --iters 30 --warmup 5 --algo direct,pipeline,nccl,auto --plot "$R/bench.svg" 2>&1 | tee "$R/bench-movers.txt" \
      | grep -E '^# [a-z_]+$|auto|nccl'
    timeout 60 .gpu/intranode bench --backend cuda --world "$WORLD" -b 1K -e 64K -f 4 --iters 50 --warmup 10 --algo auto 2>&1 | tee "$R/bench-eager.txt"
    # The latency a program making one call at a time sees: one call per
    # graph launch, and eager calls, each waited for; NCCL the same ways.
    timeout 60 .gpu/intranode bench --backend cuda --world "$WORLD" --graph --single -b 1K -e 1M -f 4 --iters 50 --warmup 10 \
      --algo auto,nccl 2>&1 | tee "$R/bench-single-graph.txt" | grep -E 'auto|nccl'
    timeout 60 .gpu/intranode bench --backend cuda --world "$WORLD" --single -b 1K -e 1M -f 4 --iters 50 --warmup 10 \
      --algo auto,nccl 2>&1 | tee "$R/bench-single-eager.txt" | grep -E 'auto|nccl'
    # The tables the docs paste, made from the raw output above.
    python3 scripts/gpu/tables.py "$R"/bench-graph.txt "$R"/bench-movers.txt "$R"/bench-single-graph.txt \
      "$R"/bench-single-eager.txt > "$R/tables.md" ;;
  shared)
    # Every collective's kernels with 2, 4 and 8 ranks on GPU 0.
    step shared
    TEST_INTRA_NODE_COMM=1 timeout 240 .gpu/intranode conformance --backend cuda --share-device --world 2,4,8 --timeout 30s \
      2>&1 | tee "$R/shared.txt" | grep -v '^pass' ;;
  faults)
    # Kernel-level faults on the device: mismatched calls, a stalled rank
    # and a killed rank in the middle of an all-reduce.
    step faults
    timeout 420 .gpu/intranode conformance --backend cuda --world "$WORLDS" --faults --trials "${TRIALS:-5}" \
      --run 'faults/(mismatched-calls|stall-allreduce|kill-allreduce|kill-movers|stall-movers|mismatched-movers)' 2>&1 | tee "$R/faults.txt" | grep -v '^pass' ;;
  hosts)
    # The collectives across hosts with the GPUs split into 2 simulated
    # hosts (NCCL_HOSTID per process, set by the harness and the bench):
    # the conformance cases, then hierarchical against flat NCCL.
    step hosts
    timeout 200 .gpu/intranode conformance --backend cuda --hosts 2 --world "$WORLD" --timeout 60s --run '^hosts/' 2>&1 \
      | tee "$R/hosts-conformance.txt" | grep -v '^pass'
    timeout 240 .gpu/intranode bench --backend cuda --hosts 2 --world "$WORLD" --op all_reduce,reduce_scatter,all_gather \
      -b 1K -e 256M -f 4 --iters 20 --warmup 5 2>&1 | tee "$R/hosts-bench.txt" | grep -E '^# [a-z_]+$|hier|flat' ;;
  kills)
    # Kill trials (docs/RELIABILITY.md): a rank of a job of random calls,
    # NCCL among them, killed at a random moment; every survivor must fail
    # within the 3 s call timeout + 1 s and close cleanly. About 10 s a trial.
    step kills
    timeout 330 .gpu/intranode soak --backend cuda --world "$WORLD" --chaos kill --jobs "${KILLS:-20}" --job 4s --timeout 3s \
      --duration 5m 2>&1 | tee "$R/kills.txt" | tail -"${KILLS_TAIL:-4}"
    ls /dev/shm | grep -c '^nccl-' | sed 's/^/NCCL shared-memory files left in \/dev\/shm: /' ;;
  calm)
    # The soak with no fault: every rank must give back every descriptor
    # and goroutine once it has closed everything.
    step calm
    timeout 60 .gpu/intranode soak --backend cuda --world "$WORLD" --jobs 2 --job 4s --timeout 3s --duration 8s 2>&1 \
      | tee "$R/calm.txt" | tail -6 ;;
  rendezvous)
    # Where Rendezvous spends its time: the phases each rank logs at debug
    # level, from a short bench run.
    step rendezvous
    timeout 120 .gpu/intranode bench --backend cuda --world "$WORLD" -b 1K -e 1K --iters 5 --warmup 1 -v 2>&1 \
      | tee "$R/rendezvous.txt" | grep -E 'rendezvous|phase' | head -60 ;;
  anchor)
    step anchor
    timeout 200 python3 scripts/gpu/anchor.py 2>&1 | tee "$R/anchor.csv" ;;
  esac
  pack
done
