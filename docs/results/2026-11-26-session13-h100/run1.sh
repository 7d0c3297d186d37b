#!/usr/bin/env bash
# Thirteenth session, one H100: the CUDA backend's tests and the conformance
# suite with every rank on device 0 (a correctness run) at worlds 2, 4 and 8,
# with the binary of this session's code (d79fdda + docs).
set -u
cd .gpu/k
gunzip -kf intranode.gz cuda.test.gz
chmod +x intranode cuda.test
O=${OUT:-/tmp/out}
mkdir -p "$O"
nvidia-smi -L > "$O/gpu.txt" 2>&1
nvidia-smi --query-gpu=driver_version --format=csv,noheader >> "$O/gpu.txt" 2>&1
(cd ../../backend/cuda && timeout 240 ../../.gpu/k/cuda.test -test.count=1 2>&1 | tail -40) > "$O/cuda-tests.txt"
timeout 300 ./intranode conformance --backend cuda --share-device --world 2,4,8 > "$O/conformance-share-device.txt" 2>&1
echo "rc $?" >> "$O/conformance-share-device.txt"
tail -n 5 "$O/cuda-tests.txt" "$O/conformance-share-device.txt"
