#!/usr/bin/env bash
# Eleventh session, 2-GPU host, call 2: the CUDA backend's tests on the
# single cgo binding of the collective library (a function table, 96fde68
# and later; binary of fde5091); run 6 on the 4-GPU host ran them before
# that change.
set -u
R=$OUT/r
mkdir -p "$R"
gunzip -f .gpu/cuda.test.gz
timeout 120 .gpu/cuda.test -test.v -test.timeout 110s > "$R/unit.txt" 2>&1
echo "rc=$?" >> "$R/unit.txt"
grep -E '^(--- FAIL|FAIL|ok|PASS$|rc=)' "$R/unit.txt"; grep -c -- '--- PASS' "$R/unit.txt"; grep -c -- '--- SKIP' "$R/unit.txt"
