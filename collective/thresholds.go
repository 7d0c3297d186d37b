package collective

import (
	"github.com/intranode/intranode/backend"
)

// Thresholds pick between the one-shot and two-shot kernels by message size
// for one backend and world size. They come from measured crossovers (see
// docs/PERFORMANCE.md), not guesses.
type Thresholds struct {
	// OneShotMax is the largest message, in bytes, for which one-shot
	// beats two-shot; larger messages use two-shot.
	OneShotMax int
}

// Select returns the faster kernel algorithm for a message of n bytes.
func (t Thresholds) Select(n int) Algo {
	if n <= t.OneShotMax {
		return OneShot
	}
	return TwoShot
}

// DefaultThresholds returns the measured crossovers for a backend and world
// size.
//
// fake (2-core CI machine, docs/PERFORMANCE.md): one-shot reads every
// peer's whole buffer, two-shot reads 1/world of it twice, so two-shot wins
// once copies dominate the fixed cost of its extra barrier; measured
// crossover near 256 KiB at world 2–8.
func DefaultThresholds(backendName string, world int) Thresholds {
	switch backendName {
	default:
		return Thresholds{OneShotMax: 256 << 10}
	}
}

// LaunchConfig is the grid and block an all-reduce kernel runs with. The
// CUDA kernels are built for blocks of at most 512 threads that each keep
// 16-byte vectors in flight; every rank computes the same grid from the same
// size, which the kernels require (block b of one rank meets block b of the
// others). The fake runs each kernel on one goroutine and ignores it.
func LaunchConfig(backendName string, algo Algo, bytes, world int) backend.LaunchConfig {
	const block, vec, maxBlocks = 512, 16, 32
	per := block * vec * 2 // one-shot and HCM: two vectors per thread
	work := bytes
	if algo == TwoShot {
		per, work = block*vec, bytes/world
	}
	blocks := max(1, min((work+per-1)/per, maxBlocks))
	return backend.LaunchConfig{Grid: backend.D1(uint32(blocks)), Block: backend.D1(block)}
}
