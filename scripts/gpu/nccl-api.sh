#!/usr/bin/env bash
# The NCCL-API library on a GPU host, in one device call: nccl-tests
# (built here from its source with the host's nvcc) and PyTorch, each
# without and with the library in LD_PRELOAD, in the same call. Build first
# on the development machine:
#   go build -buildmode=c-shared -tags cuda -ldflags='-s -w' -o .gpu/libintranode-nccl.so ./cmd/libintranode-nccl
#   (the nccl-tests source in .gpu/nccl-tests)
# then run this with the device tool, carrying .gpu. Raw output lands in
# $OUT/nccl-api.tgz, repacked after every step. The tests step takes
# TESTS (which), TESTS_MAX (largest size), TESTS_WARMUP and TESTS_ITERS
# (nccl-tests' -w and -n, 5 and 20: below 1 MiB a row of 20 calls can
# stray by several µs, 200 settle it).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
# The raw files stay outside $OUT and are packed into one archive there
# after every step, so a call cut short still brings back the steps done.
R=${RAW:-/tmp/intranode-raw}/r
rm -rf "$R"
mkdir -p "$R" "$OUT"
pack() { tar czf "$OUT/nccl-api.tgz" -C "$(dirname "$R")" r; }
W=${WORLD:-$(nvidia-smi -L | wc -l)}
STEPS=${STEPS:-"info build tests torch perf kill"}
LIB=$PWD/.gpu/libintranode-nccl.so
step() { echo; echo "=== $1 ($(date -u +%T))"; }
NCCL_DIR=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null || python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])')
export LD_LIBRARY_PATH=$NCCL_DIR/lib:${LD_LIBRARY_PATH:-}
for s in $STEPS; do
  case $s in
  info)
    step info
    { nvidia-smi --query-gpu=index,name,driver_version --format=csv; nvidia-smi topo -m; echo "NCCL_DIR=$NCCL_DIR"; ls "$NCCL_DIR/lib" "$NCCL_DIR/include"; python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'; } 2>&1 | tee "$R/info.txt" ;;
  build)
    step build
    if [ -x .gpu/nt/all_reduce_perf ]; then mkdir -p /tmp/nt && cp .gpu/nt/*_perf /tmp/nt/ && echo "nccl-tests: built earlier (.gpu/nt)" && continue; fi
    mkdir -p /tmp/ncclhome/lib && ln -sf "$NCCL_DIR/include" /tmp/ncclhome/include && ln -sf "$NCCL_DIR/lib/libnccl.so.2" /tmp/ncclhome/lib/libnccl.so
    B=/tmp/nt
    ( cd .gpu/nccl-tests/src && timeout 400 make -j32 BUILDDIR=$B NCCL_HOME=/tmp/ncclhome CUDA_HOME=/usr/local/cuda \
        NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
        $B/all_reduce_perf $B/reduce_scatter_perf $B/all_gather_perf $B/broadcast_perf $B/sendrecv_perf $B/alltoall_perf ) \
      > "$R/build.txt" 2>&1; echo "build exit $?"; tail -5 "$R/build.txt"; ls $B
    # The binaries come back too, so that later calls skip the build.
    tar -czf "$OUT/nt.tgz" -C $B all_reduce_perf reduce_scatter_perf all_gather_perf broadcast_perf sendrecv_perf alltoall_perf ;;
  tests)
    step nccl-tests
    for t in ${TESTS:-all_reduce reduce_scatter all_gather broadcast sendrecv alltoall}; do
      for with in no yes; do
        pre=""; [ $with = yes ] && pre=$LIB
        f="$R/nccltests-$t-$with.txt"
        LD_PRELOAD=$pre INTRANODE_NCCL_DEBUG=INFO timeout 60 /tmp/nt/${t}_perf -b 8 -e "${TESTS_MAX:-256M}" -f 2 -c 1 -t "$W" -g 1 -d bfloat16 -w "${TESTS_WARMUP:-5}" -n "${TESTS_ITERS:-20}" > "$f" 2>&1
        echo "$t lib=$with exit $? $(grep -E 'Out of bounds|Avg bus' "$f" | tr '\n' ' ') accelerated=$(grep -c 'msg=accelerated' "$f")"
      done
    done ;;
  torch|torch-nb)
    # torch-nb: the same on nonblocking communicators (PyTorch's
    # TORCH_NCCL_USE_COMM_NONBLOCKING=1: NCCL calls return ncclInProgress).
    step "$s-correct"
    nb=(); tag=""; [ $s = torch-nb ] && nb=(TORCH_NCCL_USE_COMM_NONBLOCKING=1) && tag=nb-
    for with in ${WITH:-no yes}; do
      pre=""; [ $with = yes ] && pre=$LIB
      f="$R/torch-correct-$tag$with.txt"
      env ${nb[@]+"${nb[@]}"} STEPS_VERBOSE=1 LD_PRELOAD=$pre INTRANODE_NCCL_DEBUG=INFO MODE=correct timeout "${TORCH_TIMEOUT:-240}" \
        torchrun --standalone --nproc-per-node "$W" scripts/gpu/nccl_api_torch.py > "$f" 2>&1
      echo "lib=$with exit $? $(grep -E '^RESULT|^WRONG' "$f" | head -12 | tr '\n' ' ') accelerated=$(grep -c 'msg=accelerated' "$f")"
      grep '^STEP' "$f" | tail -"$W"  # where each rank was last
    done ;;
  perf)
    step torch-perf
    for with in no yes; do
      pre=""; [ $with = yes ] && pre=$LIB
      LD_PRELOAD=$pre MODE=perf timeout "${PERF_TIMEOUT:-150}" torchrun --standalone --nproc-per-node "$W" scripts/gpu/nccl_api_torch.py \
        >> "$R/torch-perf-$with.txt" 2>&1
      echo "lib=$with exit $?"
    done
    grep PERF "$R/torch-perf-no.txt" > "$R/p-no"; grep PERF "$R/torch-perf-yes.txt" > "$R/p-yes"
    # PERF op size graph eager busbw queued, NCCL's then the library's.
    paste "$R/p-no" "$R/p-yes" | awk '{printf "%-18s %10d graph nccl %8s lib %8s (%.2fx)  eager nccl %8s lib %8s  queued nccl %6s lib %6s\n", $2, $3, $4, $11, $4/$11, $5, $12, $7, $14}' ;;
  first)
    # The first calls on each communicator, NCCL alone and with the
    # library (whose INFO line says where its bootstrap's time went).
    step first
    for with in no yes; do
      pre=""; [ $with = yes ] && pre=$LIB
      LD_PRELOAD=$pre INTRANODE_NCCL_DEBUG=INFO MODE=first timeout 120 torchrun --standalone --nproc-per-node "$W" \
        scripts/gpu/nccl_api_torch.py > "$R/torch-first-$with.txt" 2>&1
      echo "lib=$with exit $?"
      grep -E '^FIRST|msg=accelerated' "$R/torch-first-$with.txt" | sed 's/^time=[^ ]* level=INFO //' | cut -c1-260
    done ;;
  kill)
    # Ranks started by hand, not by torchrun (whose agent would end the
    # survivors itself): rank 1 exits after its first accelerated call.
    step kill
    for r in $(seq 0 $((W - 1))); do
      MASTER_ADDR=127.0.0.1 MASTER_PORT=29561 RANK=$r WORLD_SIZE=$W LOCAL_RANK=$r LD_PRELOAD=$LIB \
        INTRANODE_NCCL_TIMEOUT_MS=5000 INTRANODE_NCCL_DEBUG=INFO MODE=kill timeout 90 python3 scripts/gpu/nccl_api_torch.py \
        > "$R/torch-kill-$r.txt" 2>&1 &
    done
    wait
    grep -h -E 'KILL|msg=' "$R"/torch-kill-*.txt | cut -c1-300 | head -20 ;;
  esac
  pack
done
