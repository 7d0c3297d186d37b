#!/usr/bin/env bash
# Session 5 on one H100: fourth try (as the third, plus grids capped so that all ranks fit the device at once and the comm kernels instead of NCCL beyond the buffer) of ranks sharing device 0 on CUDA
# (`intranode conformance --share-device`, goroutines of one process), to
# see how far it gets before the kernels and the rendezvous are adapted
# (issue 21). TEST_INTRA_NODE_COMM=1: one device is no topology the
# detector accepts for a group.
set -u
gunzip -c .gpu/new.gz > /tmp/new; chmod +x /tmp/new
step() { echo; echo "=== $1 ($(date -u +%T))"; }
for w in 2 4 8; do
  step "world $w"
  TEST_INTRA_NODE_COMM=1 timeout 170 /tmp/new conformance --backend cuda --share-device --world $w --timeout 15s 2>&1 | tee $OUT/share-world$w.txt | grep -v '^pass' | cut -c1-400 | head -60
done
step done
