//go:build cuda

package main

// The CUDA backend, built in with -tags cuda.
import _ "github.com/intranode/intranode/backend/cuda"
