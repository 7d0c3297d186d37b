//go:build rocm

package main

// The ROCm backend, built in with -tags rocm.
import _ "github.com/intranode/intranode/backend/rocm"
