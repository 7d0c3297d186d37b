#!/usr/bin/env bash
# Eleventh session, 4-GPU host, call 6: the CUDA backend's tests again,
# after the mock library's source was embedded in the test binary (run 5's
# two mock tests failed on the host only because the binary could not find
# that source outside the source tree).
set -u
R=$OUT/r
mkdir -p "$R"
gunzip -f .gpu/cuda.test.gz
timeout 120 .gpu/cuda.test -test.v -test.timeout 110s > "$R/unit.txt" 2>&1
echo "rc=$?" >> "$R/unit.txt"
grep -E '^(--- FAIL|FAIL|ok|PASS$|rc=)' "$R/unit.txt"; grep -c -- '--- PASS' "$R/unit.txt"; grep -c -- '--- SKIP' "$R/unit.txt"
