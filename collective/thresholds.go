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
// size. The tables: bf16, graph replay, µs per call (slowest rank), our
// kernels and NCCL through the same binary in one run (`intranode bench
// --backend cuda --graph`, docs/results/2026-11-22-h200{x2,x4}-final):
//
// cuda, world 2, 2×H200:
//
//	bytes    1K    4K    16K   64K   256K  1M    4M
//	oneshot  5.40  5.50  6.27  6.80  7.52  10.03 22.50
//	twoshot  8.90  9.07  9.90  9.98  10.84 12.23 22.31
//	NCCL     6.92  24.13 7.37  24.41 9.07  14.08 33.03
//
// (docs/PERFORMANCE-kernels.md has the finer sweep behind the 2 MiB
// one-shot limit.)
//
// cuda, world 4, 4×H200:
//
//	bytes    1K    4K    16K   64K   256K  1M    4M
//	oneshot  6.23  6.92  7.73  8.26  9.95  20.25 52.18
//	twoshot  10.07 10.28 10.31 11.07 11.47 15.44 30.15
//	NCCL     19.17 9.85  11.71 31.93 27.70 35.40 40.69
//
// cuda, world 8, 8×H200 (NVSwitch), one run, second session
// (docs/results/2026-11-22-session2-h200x8; the one-shot at 4K and NCCL at
// 1K are single-run outliers against their neighbours):
//
//	bytes    1K    4K    16K   64K   256K  1M    4M
//	oneshot  9.06  42.61 10.88 12.14 16.89 37.69 107.30
//	twoshot  11.99 13.35 13.24 15.23 37.72 21.02 39.65
//	NCCL     37.54 16.66 28.41 38.42 39.54 42.61 67.31
//
// Our kernels beat NCCL at every size that fits the 10 MiB buffer at
// worlds 2, 4 and 8, so beyond the buffer (None by capacity) is NCCL's.
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
		return Thresholds{OneShotMax: 256 << 10}
	case backendName == "cuda":
		return Thresholds{OneShotMax: 256 << 10}
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
