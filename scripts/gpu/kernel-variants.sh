#!/usr/bin/env bash
# Kernel variants on the lent 2×H200 host (docs/PERFORMANCE-kernels.md):
# conformance with the variants in $CONF, the graph-replay benchmark of
# every fatbin in $DIR (all loaded by one CLI binary through
# INTRANODE_CUDA_KERNELS), an eager run, and the NCCL / PyTorch anchors in
# the same call. Build first on the development machine:
#   go build -tags cuda -o .gpu/k/intranode ./cmd/intranode
#   nvcc ... -fatbin -o .gpu/k/NAME.fatbin kernels/cuda/collectives.cu   (one per variant)
#   sed 's/^SIZES = .*/SIZES = [...]/' scripts/gpu/anchor.py > .gpu/k/anchor.py
# then run this with the device tool, carrying .gpu/k; results go to $OUT.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}
DIR=${DIR:-.gpu/k}
BIN=${BIN:-$DIR/intranode}
CONF=${CONF:-}            # fatbin names to run the conformance suite with
CONF_ENV=${CONF_ENV:-}    # environment for those runs (VAR=VAL ...)
EXTRA=${EXTRA:-}          # extra bench lines: "label|ENV=VAL ...|bench args"
[ -n "${EXTRA_FILE:-}" ] && EXTRA=$(cat "$EXTRA_FILE")
BENCH_ARGS=${BENCH_ARGS:--b 1K -e 8M -f 2 --iters 200 --warmup 20 --algo oneshot,twoshot}
mkdir -p "$OUT"
step() { echo "=== $1 ($(date -u +%T))"; }
{ nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv; } > "$OUT/info.txt" 2>&1
for v in $CONF; do
  step "conformance $v"
  env $CONF_ENV INTRANODE_CUDA_KERNELS=$DIR/$v.fatbin timeout 240 $BIN conformance --backend cuda --world 2 \
    --timeout 60s > "$OUT/conformance-$v.txt" 2>&1
  echo "rc=$?" >> "$OUT/conformance-$v.txt"
  grep -v '^pass' "$OUT/conformance-$v.txt" | tail -8
done
: > "$OUT/bench.txt"
[ "${LOOP:-1}" = 1 ] && for f in $DIR/*.fatbin; do
  v=$(basename "$f" .fatbin)
  step "bench $v"
  echo "### variant $v: bench --backend cuda --graph $BENCH_ARGS" >> "$OUT/bench.txt"
  INTRANODE_CUDA_KERNELS=$f timeout 120 $BIN bench --backend cuda --graph $BENCH_ARGS >> "$OUT/bench.txt" 2>&1
done
DMON=${DMON:-1}
if [ "$DMON" = 1 ]; then nvidia-smi dmon -s pc -d 1 > "$OUT/dmon.txt" 2>&1 & DMON_PID=$!; fi
IFS=$'\n'
for line in $EXTRA; do
  label=${line%%|*}; rest=${line#*|}; envs=${rest%%|*}; args=${rest#*|}
  step "bench $label"
  echo "### variant $label: $envs bench --backend cuda $args" >> "$OUT/bench.txt"
  eval "env $envs timeout 120 $BIN bench --backend cuda $args" >> "$OUT/bench.txt" 2>&1
done
unset IFS
[ -n "${DMON_PID:-}" ] && kill "$DMON_PID" 2>/dev/null
if [ -f "$DIR/anchor.py" ]; then
  step anchor
  timeout 240 python3 "$DIR/anchor.py" > "$OUT/anchor.csv" 2> "$OUT/anchor.err"
fi
step summary
awk '/^### variant/{v=$3} /^ +[0-9]+ +[0-9]+ +bfloat16/{printf "%-12s %9s %-8s %8s\n", v, $1, $5, $7}' "$OUT/bench.txt" \
  | sort -k1,1 -k3,3 -k2n | awk '{a[$1" "$3]=a[$1" "$3]" "$4} END{for(k in a) print k":"a[k]}' | sort
cat "$OUT/anchor.csv" 2>/dev/null | tr '\n' ' '
