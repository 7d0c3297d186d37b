// Command libintranode is the C library of include/intranode.h:
//
//	go build -buildmode=c-shared -o libintranode.so ./cmd/libintranode             # fake backend only
//	go build -buildmode=c-shared -tags cuda -o libintranode.so ./cmd/libintranode  # and CUDA
//
// The exports live in package cabi; this main only links them.
package main

import (
	_ "github.com/intranode/intranode/cabi"
)

func main() {}
