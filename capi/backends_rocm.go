//go:build rocm

package capi

// The ROCm backend, built into the C libraries with -tags rocm.
import _ "github.com/intranode/intranode/backend/rocm"
