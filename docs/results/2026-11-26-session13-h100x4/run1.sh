#!/usr/bin/env bash
# Thirteenth session, 4-GPU host: the one-call proof of a host
# (scripts/gpu/run.sh, default steps) with this session's binaries, carried
# compressed in .gpu/k (build: go build -tags cuda -ldflags="-s -w" -o
# .gpu/k/intranode ./cmd/intranode; go test -c -tags cuda -o .gpu/k/cuda.test
# ./backend/cuda; gzip both).
set -u
gunzip -c .gpu/k/intranode.gz > .gpu/intranode
gunzip -c .gpu/k/cuda.test.gz > .gpu/cuda.test
chmod +x .gpu/intranode .gpu/cuda.test
exec bash scripts/gpu/run.sh
