package collective

import (
	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
)

// Thresholds pick between the one-shot and two-shot kernels and the vendor
// library by message size, for one backend and world size. They come from
// measured crossovers (docs/PERFORMANCE.md), not guesses.
type Thresholds struct {
	// OneShotMax is the largest message, in bytes, for which one-shot
	// beats two-shot.
	OneShotMax int
	// KernelMax is the largest message for which the comm's kernels beat
	// the vendor library; larger messages select None. 0 means no limit
	// (a backend without a vendor library, or kernels faster throughout).
	KernelMax int
}

// Select returns the faster path for a message of n bytes.
func (t Thresholds) Select(n int) Algo {
	switch {
	case t.KernelMax > 0 && n > t.KernelMax:
		return None
	case n <= t.OneShotMax:
		return OneShot
	}
	return TwoShot
}

// DefaultThresholds returns the measured crossovers for a backend and world
// size. The tables, bf16, slowest rank's mean per call:
//
// cuda, world 2, 2×H200, graph replay, with the one-shot's LL and push
// paths and the pushing two-shot (docs/PERFORMANCE-kernels.md, run 5):
//
//	bytes    1K    4K    64K   256K  1M    2M    4M    8M
//	oneshot  4.58  5.27  6.77  6.87  9.61  13.07 22.08 35.66
//	twoshot  8.50  8.80  9.54  9.98  11.97 15.15 21.29 34.46
//	NCCL     11.75 9.64  10.46 12.06 17.59 29.94 35.13 48.09
//
// The one-shot wins up to 2 MiB; above, the two-shot by about 1 µs (runs
// 4 and 5; in run 3 the one-shot's push path won at 4 and 8 MiB instead).
//
// cuda, world 4, 4×H200 (docs/results/2026-11-22-h200x4-run1):
//
//	bytes    1K    4K    64K   256K  1M    4M
//	oneshot  8.46  8.36  11.18 12.25 19.33 52.15
//	twoshot  12.05 11.54 13.32 14.64 17.34 55.17
//	NCCL     13.15 12.39 14.14 15.15 21.86 42.63
//
// Not measured (world 8 on CUDA): the world-4 crossovers, scaled down by
// the extra peer reads, until a measurement replaces them.
//
// fake, world 2, float, 2-core development machine (docs/PERFORMANCE.md):
//
//	bytes                 1K    4K    16K   64K   256K  1M
//	oneshot goroutines    9.47  10.02 11.86 15.20 39.63 198.2
//	twoshot goroutines    10.23 11.21 10.10 10.02 30.83 172.1
//	oneshot processes     5.50  5.47  9.41  14.84 70.98 261.5
//	twoshot processes     6.25  5.49  7.85  14.19 30.14 166.3
//
// Two-shot reads 1/world of each peer's buffer where one-shot reads all of
// it; it wins from about 16 KiB.
func DefaultThresholds(backendName string, world int) Thresholds {
	switch {
	case backendName == "cuda" && world <= 2:
		return Thresholds{OneShotMax: 2 << 20}
	case backendName == "cuda" && world <= 4:
		return Thresholds{OneShotMax: 256 << 10, KernelMax: 2 << 20}
	case backendName == "cuda":
		return Thresholds{OneShotMax: 128 << 10, KernelMax: 1 << 20}
	}
	return Thresholds{OneShotMax: 16 << 10}
}

// LaunchConfig is the grid and block an all-reduce kernel runs with. The
// CUDA kernels are built for blocks of at most 512 threads that each keep
// 16-byte vectors in flight, and for grids of up to kernels.KernelChannels
// blocks (block b meets block b of the other ranks on channel b); every
// rank computes the same grid from the same size, which the kernels
// require. The fake runs each kernel on one goroutine and ignores it.
//
// Bytes per block, measured on 2×H200 (docs/PERFORMANCE-kernels.md): the
// one-shot's LL path runs one block up to 16 KiB and 2 KiB per block above
// (a block moves LL lines at a few tens of GB/s, so spreading them wins
// once there are more than a few per thread); its push path 8 KiB, its
// classic path 16 KiB; the two-shot 8 KiB of each slice. Up to 128 blocks
// the NVLink traffic keeps gaining: 8 MiB two-shot went from 39.6 µs with
// 32 blocks to 34.4 µs with 128. HCM keeps the 32-block grid it was
// measured with.
func LaunchConfig(backendName string, algo Algo, bytes, world int) backend.LaunchConfig {
	const block, vec = 512, 16
	maxBlocks := kernels.KernelChannels
	per, work := block*vec*2, bytes
	switch algo {
	case OneShot:
		switch kernels.OneShotPath(bytes, world) {
		case "ll":
			per = 2 << 10
			if bytes < 16<<10 {
				per = 16 << 10
			}
		case "push":
			per = 8 << 10
		}
	case TwoShot:
		per, work = block*vec, bytes/world
	case HCM:
		maxBlocks = 32
	}
	blocks := max(1, min((work+per-1)/per, maxBlocks))
	return backend.LaunchConfig{Grid: backend.D1(uint32(blocks)), Block: backend.D1(block)}
}
