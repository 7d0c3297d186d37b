#!/usr/bin/env bash
# Fifteenth session, first call: the card served, then the CUDA backend's
# unit tests at this commit (one test binary built on the development
# machine with -tags cuda, run in its package folder so that testdata/
# resolves), and conformance at world 2 in processes with the embedded
# image. .gpu/k3 holds cuda.test.gz and intranode.gz (stripped, -tags cuda).
set -u
export NCCL_NVLS_ENABLE=0
R=$OUT/r1; mkdir -p $R
K=$PWD/.gpu/k3
gunzip -f $K/cuda.test.gz $K/intranode.gz
nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee $R/info.txt
(cd backend/cuda && timeout 300 $K/cuda.test -test.count=1 -test.v > $R/cuda-unit.txt 2>&1; echo "rc=$?" >> $R/cuda-unit.txt)
grep -E '^(--- FAIL|--- SKIP|ok|FAIL|PASS|rc=)' $R/cuda-unit.txt | tail -20
echo "passed $(grep -c '^--- PASS' $R/cuda-unit.txt), skipped $(grep -c '^--- SKIP' $R/cuda-unit.txt), failed $(grep -c '^--- FAIL' $R/cuda-unit.txt)"
timeout 150 $K/intranode conformance --backend cuda --world 2 --timeout 60s > $R/conformance.txt 2>&1
echo "rc=$?" >> $R/conformance.txt
grep -vE '^pass' $R/conformance.txt | tail -6
