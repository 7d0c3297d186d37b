#!/usr/bin/env bash
# Trial kernel images on a GPU host: each VARIANTS entry "name:nvcc flags"
# becomes /tmp/ktrial/name.fatbin, sm_90 and bf16 only
# (INTRANODE_TRIAL_BF16), all built at once, so that variants of a kernel
# (its -D switches: INTRANODE_LL_SLEEP_MAX, ...) can be compared in one
# device call before one of them becomes the committed image
# (scripts/gpu/image.sh). Load one with INTRANODE_CUDA_KERNELS. Calls of
# other types fail to find their kernel.
#   VARIANTS="base:-DINTRANODE_LL_SLEEP_MAX=0 sleep:" bash scripts/gpu/ktrial.sh
set -u
D=${KTRIAL_DIR:-/tmp/ktrial}
mkdir -p "$D"
start=$(date +%s)
for v in ${VARIANTS:?VARIANTS lists name:flags pairs}; do
  name=${v%%:*}
  flags=${v#*:}
  # shellcheck disable=SC2086 # flags are words
  nvcc -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 -DINTRANODE_TRIAL_BF16 ${flags//,/ } \
    -fatbin -o "$D/$name.fatbin" kernels/cuda/collectives.cu > "$D/$name.log" 2>&1 &
done
wait
for v in $VARIANTS; do
  name=${v%%:*}
  if [ -s "$D/$name.fatbin" ]; then echo "ktrial: $name built"; else echo "ktrial: $name FAILED"; tail -5 "$D/$name.log"; fi
done
echo "ktrial: $(( $(date +%s) - start )) s"
