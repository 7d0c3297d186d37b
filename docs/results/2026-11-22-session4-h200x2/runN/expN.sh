#!/usr/bin/env bash
# Session 4, run N: ranks as goroutines of one process on CUDA (bench
# --procs=false failed in run L with "devices [0 1] are not fully connected").
set -u
gunzip -c .gpu/cur.gz > /tmp/intranode; chmod +x /tmp/intranode
gunzip -c .gpu/cuda.test.gz > /tmp/cuda.test; chmod +x /tmp/cuda.test
B=/tmp/intranode
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step topo; $B topo 2>&1 | tee $OUT/topo.txt
step gotest
(cd backend/cuda && timeout 120 /tmp/cuda.test -test.v -test.run 'GPULinkMatrixConcurrent|GPUDeviceInfo' 2>&1) | tee $OUT/gotest.txt | tail -20
for i in 1 2 3; do
  step "bench goroutines $i"
  INTRANODE_LOG=debug timeout 60 $B bench --backend cuda --world 2 --procs=false -b 1K -e 4K --algo oneshot 2>&1 | tee $OUT/bench-g$i.txt | tail -4
done
step "conformance goroutines"
timeout 200 $B conformance --backend cuda --world 2 --procs=false --timeout 60s 2>&1 | tee $OUT/conformance-g.txt | grep -v '^pass' | tail -15
step done
