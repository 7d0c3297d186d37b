//go:build cuda

package capi

// The CUDA backend, built into the C libraries with -tags cuda.
import _ "github.com/intranode/intranode/backend/cuda"
