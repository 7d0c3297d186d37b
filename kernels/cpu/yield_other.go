//go:build !linux

package cpu

import "runtime"

// osYield yields to other goroutines where no thread yield is available.
func osYield() { runtime.Gosched() }
