#!/usr/bin/env bash
# Rebuild the committed CUDA kernel image (kernels/cuda/collectives.fatbin)
# on a GPU host, then run the conformance suite with it through
# INTRANODE_CUDA_KERNELS, in one device call. Build the CLI first on the
# development machine (it may embed the old image; the new one replaces it
# at load time):
#   go build -tags cuda -ldflags='-s -w' -o .gpu/intranode ./cmd/intranode
# then run this with the device tool, carrying .gpu/intranode. $OUT gets
# collectives.fatbin and collectives.fatbin.sha256 as soon as they are
# built (copy them over kernels/cuda/), and results.tgz with the logs,
# sass.txt among them: the entry points whose sm_90 code differs from the
# image committed before (scripts/gpu/sass.py).
#
# CONFORMANCE picks the suite's run: "shared" (every rank on GPU 0, worlds
# 2, 4 and 8: one GPU is enough), "world" (one rank per GPU, all GPUs),
# "both" or "none".
set -u
OUT=${OUT:-/tmp/out}
R=${RAW:-/tmp/intranode-raw}/r
rm -rf "$R"
mkdir -p "$R" "$OUT"
pack() { tar czf "$OUT/results.tgz" -C "$(dirname "$R")" r; }
step() { echo; echo "=== $1 ($(date -u +%T))"; }
CONFORMANCE=${CONFORMANCE:-shared}
step info
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv; nvcc --version | tail -2; } | tee "$R/info.txt"
step image
cp kernels/cuda/collectives.fatbin "$R/before.fatbin"
start=$(date +%s)
# -t 3: the three targets at once; --split-compile=0: ptxas on every core.
# -B: a fatbin newer than the sources (a checkout restores the committed
# image with a fresh date) would otherwise be taken as built.
if ! make -B -C kernels/cuda NVCCFLAGS="-O3 -std=c++17 -t 3 -Xptxas --split-compile=0" > "$R/image.txt" 2>&1; then
  tail -30 "$R/image.txt"; pack; exit 1
fi
echo "built in $(( $(date +%s) - start )) s" | tee -a "$R/image.txt"
cp kernels/cuda/collectives.fatbin kernels/cuda/collectives.fatbin.sha256 "$OUT/"
# Which entry points' sm_90 code the change touched (scripts/gpu/sass.py).
cuobjdump -sass "$R/before.fatbin" > /tmp/before.sass && cuobjdump -sass kernels/cuda/collectives.fatbin > /tmp/after.sass \
  && python3 scripts/gpu/sass.py /tmp/before.sass /tmp/after.sass | tee "$R/sass.txt"
rm -f "$R/before.fatbin" /tmp/before.sass /tmp/after.sass
pack
export INTRANODE_CUDA_KERNELS=$PWD/kernels/cuda/collectives.fatbin
if [ "$CONFORMANCE" = shared ] || [ "$CONFORMANCE" = both ]; then
  step "conformance, shared device"
  TEST_INTRA_NODE_COMM=1 timeout "${SHARED_LIMIT:-200}" .gpu/intranode conformance --backend cuda --share-device \
    --world "${SHARED_WORLDS:-2,4,8}" --timeout 30s ${SHARED_ARGS:-} > "$R/conformance-shared.txt" 2>&1
  echo "rc=$?" >> "$R/conformance-shared.txt"
  grep -v '^pass' "$R/conformance-shared.txt" | tail -12
  pack
fi
if [ "$CONFORMANCE" = world ] || [ "$CONFORMANCE" = both ]; then
  step "conformance, one rank per GPU"
  timeout "${WORLD_LIMIT:-240}" .gpu/intranode conformance --backend cuda --world "${WORLDS:-$(nvidia-smi -L | wc -l)}" \
    --timeout 60s > "$R/conformance.txt" 2>&1
  echo "rc=$?" >> "$R/conformance.txt"
  grep -v '^pass' "$R/conformance.txt" | tail -12
  pack
fi
