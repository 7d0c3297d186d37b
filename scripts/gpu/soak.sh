#!/usr/bin/env bash
# Faults on a GPU host in one device call (docs/RELIABILITY.md): the soak
# with no fault, then with ranks killed, at the host's world and at world 2
# (pairs of GPUs side by side), then kill and stop mixed for a while. Every
# job must end with each survivor failing within its deadline + 1 s and
# every rank back to the descriptors and goroutines it held once the
# driver and NCCL were loaded. Build first on the development machine:
#   go build -tags cuda -o .gpu/intranode ./cmd/intranode
# then run this with the device tool, carrying .gpu. Output lands in
# $OUT/soak-*.txt. INTRANODE_NCCL_CREATION in the environment says how the
# ranks make their NCCL communicators (guarded, the default; blocking;
# nonblocking: docs/RELIABILITY.md). The creation step measures what an
# NCCL call costs on communicators made each way. The shared step (not
# in the default steps) runs the kill soak with every rank on GPU 0, so
# it needs one GPU only. mixed-bg and mixed-wait run the mixed step across
# two device calls, for a soak longer than one call may run:
#   call 1: MIXED=10m MIXED_LIMIT=700 STEPS="mixed-bg" bash scripts/gpu/soak.sh; sleep 570
#   call 2: STEPS=mixed-wait bash scripts/gpu/soak.sh
set -u
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
W=${WORLD:-$(nvidia-smi -L | wc -l)}
BIN=.gpu/intranode
step() { echo; echo "=== $1 ($(date -u +%T))"; }
shm() { echo "NCCL shared-memory files in /dev/shm: $(ls /dev/shm | grep -c '^nccl-')"; }
for s in ${STEPS:-calm kills pairs creation mixed}; do
  case $s in
  calm)
    step "calm, world $W"; shm
    timeout 90 $BIN soak --backend cuda --world "$W" --jobs 2 --job 4s --timeout 3s --duration 10s 2>&1 | tee "$OUT/soak-calm.txt" | cut -c1-1500
    shm ;;
  kills)
    step "kills, world $W"
    timeout 330 $BIN soak --backend cuda --world "$W" --chaos kill --jobs "${KILLS:-20}" --job 3s --timeout 3s --duration 5m 2>&1 \
      | tee "$OUT/soak-kills-w$W.txt" | cut -c1-700 | tail -"${TAIL:-30}"
    shm ;;
  pairs)
    # World 2 on every pair of GPUs at once, KILLS jobs in all.
    step "kills, world 2, $((W / 2)) pairs at once"
    for p in $(seq 0 $((W / 2 - 1))); do
      CUDA_VISIBLE_DEVICES=$((2 * p)),$((2 * p + 1)) timeout 330 $BIN soak --backend cuda --world 2 --chaos kill \
        --jobs $(( ${KILLS:-20} / (W / 2) )) --job 3s --timeout 3s --duration 5m > "$OUT/soak-kills-w2-pair$p.txt" 2>&1 &
    done
    wait
    cut -c1-700 "$OUT"/soak-kills-w2-pair*.txt | grep -v ': ok$' | tail -"${TAIL:-30}"
    shm ;;
  shared)
    # Every rank on GPU 0, as processes: ranks sharing a device make no
    # NCCL communicator, so what a survivor keeps is intranode's own.
    # Their kernels time-slice the GPU: call counts are no figure.
    for w in ${SHARED_WORLDS:-2 4}; do
      step "kills, world $w, every rank on GPU 0"
      timeout "${SHARED_LIMIT:-280}" $BIN soak --backend cuda --share-device --world "$w" --chaos "${SHARED_CHAOS:-kill}" \
        --jobs "${KILLS:-20}" --job 3s --timeout 3s --duration 4m 2>&1 | tee "$OUT/soak-shared-w$w.txt" | cut -c1-700 | tail -"${TAIL:-30}"
    done
    shm ;;
  mixed)
    step "kill and stop, world $W, ${MIXED:-3m}"
    timeout "${MIXED_LIMIT:-600}" $BIN soak --backend cuda --world "$W" --chaos kill,stop --job 4s --timeout 3s --duration "${MIXED:-3m}" 2>&1 \
      | tee "$OUT/soak-mixed-w$W.txt" | cut -c1-700 | grep -v ': ok$' | tail -"${TAIL:-30}"
    shm ;;
  mixed-bg)
    # The mixed step in a process of its own (setsid), for a soak longer
    # than one device call may run: this step returns at once; a later
    # call on the same machine runs mixed-wait, which waits for it and
    # brings its files back. MIXED and MIXED_LIMIT as for mixed.
    step "kill and stop in the background, world $W, ${MIXED:-3m}"
    rm -rf /tmp/soak-bg && mkdir -p /tmp/soak-bg
    OUT=/tmp/soak-bg STEPS=mixed TAIL="${TAIL:-30}" setsid nohup bash -c 'bash "$0" > /tmp/soak-bg/log.txt 2>&1; touch /tmp/soak-bg/done' "$0" \
      > /dev/null 2>&1 < /dev/null &
    echo "started; collect with STEPS=mixed-wait" ;;
  mixed-wait)
    step "waiting for the background soak"
    for _ in $(seq "${MIXED_WAIT:-590}"); do [ -e /tmp/soak-bg/done ] && break; sleep 1; done
    [ -e /tmp/soak-bg/done ] || echo "still running after ${MIXED_WAIT:-590} s"
    cp /tmp/soak-bg/*.txt "$OUT"/ 2>/dev/null
    cat /tmp/soak-bg/log.txt ;;
  creation)
    # NCCL all-reduce on communicators made each way, at sizes where a
    # call's fixed cost shows: each call waited for (--single), and calls
    # chained.
    for mode in guarded blocking nonblocking; do
      step "NCCL calls, $mode communicators"
      for flags in --single ""; do
        INTRANODE_NCCL_CREATION=$mode timeout 120 $BIN bench --backend cuda --world "$W" $flags -b 1K -e 1M -f 16 \
          --iters 50 --warmup 10 --algo nccl 2>&1 | tee -a "$OUT/soak-creation-$mode.txt"
      done
    done ;;
  esac
done
