#!/usr/bin/env bash
# Thirteenth session, every GPU of the host (asked for 4; run on what was lent): the LL spin now watches callIn (a peer on
# another path publishing a differing Call). One binary (d79fdda's Go code),
# the kernel image before (before.fatbin, c612b17..HEAD~ sources) and after
# (after.fatbin) the change through INTRANODE_CUDA_KERNELS:
#  1. faults/mismatched-movers and faults/mismatched-calls, 10 trials each,
#     with the new image (trial 0 of mismatched-movers failed 6 of 6 times
#     with the old one: ErrMismatch after 40 s);
#  2. conformance in processes with the new image, and with every rank on
#     device 0 at worlds 2, 4 and 8;
#  3. the bench of every collective, 1 KiB - 256 KiB (the LL path's sizes),
#     graph replay, the two images alternated twice.
set -u
gunzip -c .gpu/k/intranode.gz > .gpu/intranode
chmod +x .gpu/intranode
O=${OUT:-/tmp/out}
export NCCL_NVLS_ENABLE=0
W=$(nvidia-smi -L | wc -l)
nvidia-smi -L > "$O/gpu.txt"
K=$PWD/.gpu/k
INTRANODE_CUDA_KERNELS=$K/after.fatbin timeout 200 .gpu/intranode conformance --backend cuda --world "$W" --faults --trials 10 \
  --run '^faults/mismatched-(movers|calls)$' > "$O/faults-after.txt" 2>&1
tail -4 "$O/faults-after.txt"
INTRANODE_CUDA_KERNELS=$K/after.fatbin timeout 150 .gpu/intranode conformance --backend cuda --world "$W" --timeout 60s \
  > "$O/conformance-after.txt" 2>&1
tail -1 "$O/conformance-after.txt"
INTRANODE_CUDA_KERNELS=$K/after.fatbin TEST_INTRA_NODE_COMM=1 timeout 150 .gpu/intranode conformance --backend cuda \
  --share-device --world 2,4,8 --timeout 30s > "$O/share-device-after.txt" 2>&1
tail -1 "$O/share-device-after.txt"
for rep in 1 2; do
  for img in before after; do
    INTRANODE_CUDA_KERNELS=$K/$img.fatbin timeout 60 .gpu/intranode bench --backend cuda --world "$W" --graph --op all \
      -b 1K -e 256K -f 4 --iters 30 --warmup 5 --algo auto > "$O/bench-$img-$rep.txt" 2>&1
    echo "$img $rep: $(grep -cE '^ +[0-9]' "$O/bench-$img-$rep.txt") rows"
  done
done
