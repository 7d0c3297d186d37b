// Command libintranode-nccl is the NCCL-API library: put in front of the
// real NCCL, it runs a program's collectives on intranode's kernels where
// they win and hands every other call to NCCL (docs/NCCL.md):
//
//	go build -buildmode=c-shared -tags cuda -o libintranode-nccl.so ./cmd/libintranode-nccl
//	LD_PRELOAD=$PWD/libintranode-nccl.so torchrun --nproc-per-node 4 train.py
//
// The exports live in package ncclapi; this main only links them.
package main

import (
	_ "github.com/intranode/intranode/ncclapi"
)

func main() {}
