package collective

import (
	"math"

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
	// PipelineMin is the smallest message, in bytes, for which Pipeline is
	// the fastest; 0 means never. Pipeline has no buffer limit, so it also
	// takes the messages over the buffer that would otherwise go to None.
	PipelineMin int
	// Movers holds, per data-movement collective, the message sizes for
	// which its kernels (Direct) beat the vendor library's reduce-scatter,
	// all-gather, broadcast and all-to-all; other sizes select None. A size
	// is nccl-tests': the larger of a rank's input and output, in bytes. A
	// collective missing from the map always selects Direct.
	Movers map[Op]Window
	// MoverPipeline holds, per data-movement collective, the message
	// sizes (as for Movers) for which its pipelined kernel (Pipeline) is
	// the fastest path; it takes precedence over Movers.
	MoverPipeline map[Op]Window
	// Copy holds, per data-movement collective, the message sizes (as for
	// Movers) for which the copy engines (Copy) are the fastest path for
	// a call whose input lies in the symmetric buffer (Comm.SelectMove);
	// a collective missing from the map never selects it.
	Copy map[Op]Window
	// AvgMax is the largest all-reduce, in bytes, that an average
	// (backend.Avg) takes on the comm's kernels: their sum, then the
	// division kernel's pass over the output, which above it costs more
	// than the kernels' lead over the vendor library's own average. 0
	// means no limit.
	AvgMax int
}

// averaged is the path of an all-reduce average of n bytes whose sum
// would take a: None above AvgMax, a otherwise.
func (t Thresholds) averaged(n int, a Algo) Algo {
	if t.AvgMax > 0 && n > t.AvgMax {
		return None
	}
	return a
}

// Window is a range of message sizes in bytes, [Min, Max]; Max 0 means no
// upper bound.
type Window struct{ Min, Max int }

// Never is the Window no message falls in.
var Never = Window{Min: math.MaxInt}

// Contains reports whether n bytes fall in the window.
func (w Window) Contains(n int) bool { return n >= w.Min && (w.Max == 0 || n <= w.Max) }

// Select returns the faster path for a message of n bytes. A caller must
// still check the choice against the buffer (Comm.Capacity): over it,
// only Pipeline and None remain.
func (t Thresholds) Select(n int) Algo {
	switch {
	case t.KernelMax > 0 && n > t.KernelMax:
		return None
	case t.PipelineMin > 0 && n >= t.PipelineMin:
		return Pipeline
	case n <= t.OneShotMax:
		return OneShot
	}
	return TwoShot
}

// SelectMover returns the path for a data-movement collective op moving n
// bytes (nccl-tests' size: the larger of a rank's input and output):
// Pipeline inside its MoverPipeline window, else Direct inside its Movers
// window (or when op has none), else None.
func (t Thresholds) SelectMover(op Op, n int) Algo {
	if w, ok := t.MoverPipeline[op]; ok && w.Contains(n) {
		return Pipeline
	}
	if w, ok := t.Movers[op]; ok && !w.Contains(n) {
		return None
	}
	return Direct
}

// DefaultThresholds returns the measured crossovers for a backend and world
// size. The tables: bf16, graph replay, µs per call (slowest rank), our
// kernels and NCCL through the same binary in one run (`intranode bench
// --backend cuda --graph`, docs/results/2026-11-22-h200{x2,x4}-final and,
// for world 2, docs/results/2026-11-22-h200x2-b/runC):
//
// cuda, world 2, 2×H200 (early launch, warm graph replays, wide pipeline on
// 128 blocks: docs/results/2026-11-22-h200x2-b/runG):
//
//	bytes     1K    4K    16K   64K   256K  1M    2M    4M    16M   64M    256M
//	oneshot   2.87  3.04  3.74  3.95  4.82  7.94  11.85 19.88
//	twoshot   7.05  7.34  7.76  7.93  8.38  10.46       20.77
//	pipeline  4.06  4.20  4.79  7.70  19.16 19.61 15.33 18.49 59.17 201.79 768.56
//	NCCL      6.00  6.17  7.02  7.20  8.51  14.00 27.16 32.35 76.16 244.90 886.79
//
// One-shot to 2 MiB, Pipeline above (any size: it needs no buffer); NCCL
// is never faster.
//
// cuda, world 4, 4×H200 (2026-11-22, docs/results/2026-11-22-h200x4;
// the pipeline pushes everything to every peer and loses to NCCL from 64 KiB):
//
//	bytes    1K    4K    16K   64K   256K  1M    4M    16M
//	oneshot  4.51  4.89  5.22  6.52  8.47  16.51 49.38
//	twoshot  8.67  8.19  8.76  9.79  10.23 15.03 31.07
//	NCCL     10.12 10.69 11.44 11.52 12.31 19.57 40.58 97.99
//
// cuda, world 8, 8×H200 (NVSwitch), one run
// (docs/results/2026-11-22-h200x8; the one-shot at 4K and NCCL at
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
// fake, world 2 processes, bf16, 2-core development machine, 2026-11-26
// (vector loops; the Go one-shot's LL path up to 1 KiB, push
// above; `intranode bench --algo oneshot,twoshot,pipeline,auto --replays
// 15`, two runs, docs/results/2026-11-26-fake-e/bench-algos-*.txt;
// the first row of a run, 1 KiB one-shot, carries the run's start-up):
//
//	bytes      1K         4K        16K         64K         256K          1M            4M
//	oneshot    9.59/32.66 6.28/6.71 14.81/10.46 45.55/29.97 152.46/115.27 424.36/425.51 1909/1803
//	twoshot    6.25/5.26  5.86/5.82 10.24/8.21  20.93/19.39 80.15/80.57   325.26/324.39 1335/1341
//	pipeline   4.94/4.12  7.16/5.99 14.21/10.55 41.96/27.79 154.20/152.40 483.28/436.73 2420/1707
//
// Two-shot reads 1/world of each peer's buffer where one-shot reads all of
// it; it wins from 4 KiB. At 1 KiB the three are within the machine's
// noise (a later run with 100 warm-up calls: one-shot 8.94, two-shot
// 4.93; one with a collection before each row: 5.47 against 6.56); the
// one-shot keeps 1 KiB, where it takes LL lines and no barrier.
//
// The data-movement collectives, cuda, world 2, 2×H100, graph replay, bf16,
// µs per call, nccl-tests sizes, the Direct kernels (copy in, barrier, read
// the peers' buffers, barrier) against NCCL in the same run
// (docs/results/2026-11-25-h100x2-a, run C):
//
//	bytes            1K    16K   256K  1M    4M    16M   64M    256M
//	reduce_scatter   9.25  8.88  9.78  11.17 16.68 51.52 203.00 793.83
//	  NCCL           5.89  6.14  7.50  10.12 22.81 52.13 169.19 590.13
//	all_gather       8.47  8.66  9.64  10.69 16.36 39.94 171.54 658.21
//	  NCCL           5.68  6.40  7.44  11.09 26.57 54.82 158.99 548.94
//	broadcast        8.25  8.38  9.83  11.36 22.19 71.43 282.40 1109.00
//	  NCCL           5.24  5.89  7.06  11.45 25.16 62.39 204.59 751.14
//	alltoall         9.14  9.45  10.31 11.60 18.09 56.15 221.76 869.83
//	  NCCL           6.60  7.76  8.42  12.86 21.45 53.79 140.67 503.61
//
// Two barriers cost the Direct kernels about 8 µs at every small size,
// where NCCL's LL protocol takes 5–7. The push path (one barrier, each
// rank writing straight into its peers' slots, up to OneShotPushMax per
// block) took the small sizes to 5–6 µs (run 1 of
// docs/results/2026-11-25-h100x2-b, same kind of host):
//
//	bytes            1K    16K   256K  1M    4M    16M   64M    256M
//	reduce_scatter   5.20  5.19  7.14  7.76  12.90 41.43 162.25 636.54
//	  NCCL           5.53  6.04  7.25  10.14 22.72 51.78 169.01 593.48
//	all_gather       5.68  5.85  7.32  8.32  13.83 40.33 170.68 663.82
//	  NCCL           5.45  6.22  7.16  10.82 26.16 54.86 159.41 549.50
//	broadcast        5.25  5.31  6.55  8.57  18.23 67.87 282.28 1121.71
//	  NCCL           5.08  6.08  6.74  11.43 25.10 62.36 203.79 753.99
//	alltoall         5.60  5.81  7.78  7.93  14.21 47.14 192.11 754.93
//	  NCCL           6.49  7.63  8.35  12.77 20.72 54.97 139.52 502.30
//
// Below 1 MiB the two are within about 0.5 µs of each other either way
// (the spread between two sweeps of one binary is about 0.3 µs); from
// 1 MiB to 16 MiB the kernels win by 1.3–1.9×; above that NCCL moves more
// bytes per second, except reduce-scatter up to 64 MiB. The windows below
// take the kernels where they were not slower.
//
// The LL path (no barrier, up to OneShotLLMax per block) on 2×H200,
// 2026-11-26 (docs/results/2026-11-26-h200x2/run2, bench-movers.txt),
// the kernels against NCCL in the same run:
//
//	bytes            1K    16K   256K  1M    4M    16M   64M    256M
//	reduce_scatter   2.95  3.66  4.25  6.55  11.76 39.95 153.34 602.84
//	  NCCL           5.52  6.11  7.03  10.10 22.48 49.71 163.89 581.19
//	all_gather       3.32  4.02  4.31  7.21  13.00 37.70 158.22 616.91
//	  NCCL           5.44  6.21  7.10  10.69 25.98 53.21 154.58 545.60
//	broadcast        2.99  3.64  4.12  7.40  17.06 63.48 260.64 1032.82
//	  NCCL           5.06  5.79  6.62  11.54 24.64 61.19 202.93 748.54
//	alltoall         3.43  4.00  4.48  7.23  13.26 44.54 180.47 710.14
//	  NCCL           6.37  7.50  8.24  12.58 19.57 50.20 136.17 470.10
//
// The windows below hold there too: the kernels from the smallest size
// (all-gather included, which the H100 tables had left to NCCL below
// 1 MiB) to 64 MiB (reduce-scatter), 16 MiB (all-gather, all-to-all) and
// 4 MiB (broadcast).
//
// The pipelined kernels (Pipeline: the whole call in one launch through
// the push area, no buffer) against the Direct kernels and NCCL, 2×H200,
// 2026-11-28, one binary (docs/results/2026-11-28-h200x2-g,
// bench-movers.txt and, for 8 MiB, bench-movers-mid.txt):
//
//	bytes            1M     4M     8M     16M    64M    256M
//	reduce_scatter   33.84  15.37  19.07  33.52  108.59 391.93
//	  direct         6.84   12.07  19.45  39.66  154.85 607.87
//	  NCCL           10.07  22.90  31.63  49.91  164.53 583.65
//	all_gather       44.60  19.07  21.54  35.56  119.10 408.45
//	  direct         7.37   13.36  21.51  38.14  159.07 620.15
//	  NCCL           10.93  25.95  35.23  53.34  155.53 546.76
//	broadcast        19.37  18.27  31.13  56.29  201.53 757.19
//	  direct         7.96   17.15  29.86  63.60  260.76 1034.93
//	  NCCL           11.57  24.80  37.48  61.32  202.38 750.24
//	alltoall         46.41  20.68  22.66  37.50  120.05 410.06
//	  direct         7.24   13.51  22.43  45.58  182.84 718.90
//	  NCCL           12.91  19.71  29.07  53.58  136.49 473.82
//
// (The 1 MiB row runs 8 grid blocks, too few to fill the links; the
// pipelined path is for large messages.) The Direct kernels and the
// pipelined ones tie at 8 MiB (but for the broadcast, where the Direct
// kernel is 1.3 µs ahead); from 16 MiB the pipelined ones are ahead of
// both, by 1.49× NCCL at 256 MiB for reduce-scatter, 1.34× all-gather,
// 1.16× all-to-all; the broadcast (the root's whole message over one
// link) ties NCCL at 64 MiB and is 0.9% behind it at 256 MiB, so its
// window stops at 64 MiB, and the Direct broadcast, ahead of NCCL at
// 8 MiB in the same run, keeps sizes to 8 MiB.
//
// cuda, world 4, 4×H200 NV18, graph replay, bf16, µs per call,
// 2026-11-28 (docs/results/2026-11-28-h200x4-c, bench-movers.txt), the
// Direct kernels, the pipelined ones and NCCL in the same run:
//
//	bytes            1K    16K   256K  1M    4M    16M   64M    256M
//	reduce_scatter   4.46  5.27  6.06  9.12  20.03 73.11 286.97 1142.49
//	  pipelined      5.41  5.60  13.58 38.14 41.19 68.69 218.59 725.87
//	  NCCL           7.49  8.04  8.65  11.66 32.67 57.51 187.28 667.36
//	all_gather       4.05  4.84  6.97  10.06 17.45 49.63 261.82 1176.01
//	  pipelined      6.30  6.75  15.66 47.75 49.46 50.73 168.35 608.80
//	  NCCL           7.39  8.65  9.36  13.63 36.79 64.15 186.37 657.17
//	broadcast        4.07  4.27  7.34  13.72 40.97 156.24 621.46 2475.46
//	  pipelined      4.76  5.54  29.26 29.44 41.64 147.19 575.91 2256.08
//	  NCCL           5.60  7.58  8.43  12.53 26.44 66.55 208.71 763.06
//	alltoall         4.61  5.29  6.45  10.41 21.80 77.71 309.00 1228.05
//	  pipelined      7.68  7.77  17.36 50.90 55.65 74.68 223.96 761.24
//	  NCCL           6.97  7.70  8.91  14.04 23.74 65.33 180.63 657.91
//
// The Direct kernels win to 4 MiB (all-gather to 16 MiB, broadcast to
// 256 KiB); the crossover between 4 and 16 MiB is not measured, so those
// windows stop at 4 MiB. The pipelined all-gather beats NCCL from 64 MiB
// (1.11× at 64 MiB, 1.08× at 256 MiB) and takes sizes above 16 MiB; the
// other pipelined kernels stay behind NCCL at every size, so they are not
// selected (docs/PERFORMANCE-kernels.md says what is known of why). The
// pipelined broadcast in that run was the root's push to every peer;
// from three ranks on it is now relayed (kernels.BroadcastRelays), not
// measured on 4 GPUs, so its window stays closed until it is. The
// all-reduce in the same run (bench-graph.txt): one-shot to 256 KiB
// (8.13 against the two-shot's 9.91), two-shot from 1 MiB (14.06 against
// 15.77) to the buffer, NCCL beyond it: the scattered Pipeline was slower
// than NCCL at every size from 16 MiB (110.66 against 97.42 at 16 MiB,
// 1298.66 against 1180.27 at 256 MiB), so it is not selected. At world 8
// and at worlds 3 and 5–7 nothing of today's kernels is measured: NCCL for
// every data-movement collective.
//
// The copy engines (Copy, for inputs in the symmetric buffer), world 2,
// 2×H200, 2026-11-29 (docs/results/2026-11-29-h200x2-c/3, bench-copy.txt:
// `intranode bench --backend cuda --world 2 --graph --op
// all_gather,broadcast,alltoall --algo copy,pipeline,direct,nccl -b 1M -e
// 256M -f 4 --buffer 260M`), µs:
//
//	bytes          1M     4M     16M    64M     256M
//	all-gather     24.88  28.65  45.62  118.82  401.35
//	  pipelined    47.50  19.66  36.18  118.24  407.14
//	  NCCL         11.30  25.93  53.58  155.15  547.12
//	broadcast      20.65  32.15  64.48  197.25  726.83
//	  pipelined    20.06  19.26  56.69  200.82  755.99
//	  NCCL         12.35  25.53  61.81  202.60  750.75
//	alltoall       20.96  28.46  46.65  118.08  400.31
//	  pipelined    47.77  21.35  37.78  119.15  409.79
//	  NCCL         13.08  20.21  52.68  135.46  470.05
//
// The copy engines win the broadcast from 64 MiB (1.02× the pipelined
// kernel and 1.03× NCCL at 256 MiB: 369.3 GB/s), the all-to-all from
// 64 MiB and the all-gather at 256 MiB (1.01–1.02× the pipelined
// kernels, which they tie at 64 MiB); below, the two agreement launches
// and the engines' start cost more than they save. Other worlds: not
// measured, no window.
//
// An average all-reduce (AvgMax) adds the division kernel to the sum
// (divideConfig; 1×H200, docs/results/2026-11-29-h200x1-g/): at worlds 2,
// 4 and 8, a multiplication by the exact reciprocal, 1.17–1.33 µs a launch
// from 64 KiB to 1 MiB, 6.59 at 16 MiB, 137.7 at 256 MiB (about 33 at
// 64 MiB, the memory's rate between the two); at other worlds a true
// division, 2.4–2.6 µs to 1 MiB, 16.6 at 16 MiB. Added to the world-2
// sums above, the kernels stay ahead of NCCL's time at 64 MiB (201.79 +
// about 33 against 244.90) and fall behind it at 256 MiB (768.56 + 137.7
// against 886.79); added to the world-4 two-shot, ahead at 4 MiB (31.07 +
// about 2 against 40.58) and not measured between 4 MiB and the buffer.
// NCCL's ncclAvg takes about its sum's time (it scales as it reduces).
// These are sums of separate runs on separate hosts, not an average
// measured end to end.
func DefaultThresholds(backendName string, world int) Thresholds {
	switch {
	case backendName == "cuda" && world <= 2:
		return Thresholds{OneShotMax: 2 << 20, PipelineMin: 2<<20 + 1, Movers: map[Op]Window{
			OpReduceScatter: {Min: 1, Max: 64 << 20},
			OpAllGather:     {Min: 1, Max: 16 << 20},
			OpBroadcast:     {Min: 1, Max: 8 << 20},
			OpAllToAll:      {Min: 1, Max: 16 << 20},
		}, MoverPipeline: map[Op]Window{
			OpReduceScatter: {Min: 8<<20 + 1},
			OpAllGather:     {Min: 8<<20 + 1},
			OpBroadcast:     {Min: 8<<20 + 1, Max: 64 << 20},
			OpAllToAll:      {Min: 8<<20 + 1},
		}, Copy: map[Op]Window{
			OpAllGather: {Min: 256 << 20},
			OpBroadcast: {Min: 64 << 20},
			OpAllToAll:  {Min: 64 << 20},
		}, AvgMax: 64 << 20}
	case backendName == "cuda" && world == 4:
		return Thresholds{OneShotMax: 256 << 10, Movers: map[Op]Window{
			OpReduceScatter: {Min: 1, Max: 4 << 20},
			OpAllGather:     {Min: 1, Max: 16 << 20},
			OpBroadcast:     {Min: 1, Max: 256 << 10},
			OpAllToAll:      {Min: 1, Max: 4 << 20},
		}, MoverPipeline: map[Op]Window{
			OpAllGather: {Min: 16<<20 + 1},
		}, AvgMax: 4 << 20}
	case backendName == "cuda":
		never := map[Op]Window{OpReduceScatter: Never, OpAllGather: Never, OpBroadcast: Never, OpAllToAll: Never}
		return Thresholds{OneShotMax: 256 << 10, Movers: never, AvgMax: 4 << 20}
	case backendName == "fake":
		// The fake's copy path is a memmove per peer; its kernels copy in
		// first and signal as they go.
		return Thresholds{OneShotMax: 1 << 10, Copy: map[Op]Window{OpAllGather: {Min: 1}, OpBroadcast: {Min: 1}, OpAllToAll: {Min: 1}}}
	}
	return Thresholds{OneShotMax: 16 << 10}
}

// sharedDeviceBlocks bounds the blocks of all the ranks together when they
// share one device (a correctness mode): it must not exceed the blocks the
// device holds at once, one 512-thread block per SM at the least (132 SMs
// on an H100, 108 on an A100).
const sharedDeviceBlocks = 96

// LaunchConfig is the grid and block an all-reduce kernel runs with. The
// CUDA kernels are built for blocks of at most 512 threads that each keep
// 16-byte vectors in flight, and for grids of up to kernels.KernelChannels
// blocks (block b meets block b of the other ranks on channel b); every
// rank computes the same grid from the same size, which the kernels
// require. The fake runs each kernel on one goroutine and ignores it.
// Every all-reduce launch asks for an early start (backend.LaunchConfig.Early).
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
			per = llPerBlock(bytes)
		case "push":
			per = 8 << 10
		}
	case TwoShot:
		per, work = block*vec, bytes/world
	case HCM:
		maxBlocks = 32
	case Pipeline:
		// Up to 128 blocks, one chunk slot of the push area per block and
		// step: 32 KiB up to kernels.PipelineWideBytes, 64 KiB above (both
		// halves of the area). On 2×H200, bf16, 256 MiB: 32 blocks with
		// 64 KiB chunks 290 GB/s, 48 311, 64 331; 128 blocks with 32 KiB
		// chunks 321, with 64 KiB chunks 348 (docs/PERFORMANCE-kernels.md).
		// These are world 2's; from three ranks on the Pipeline scatters
		// (kernels.PipelineScatters) and a block's step is World slices of
		// kernels.PipelineSlice, measured at 128 blocks only (4×H200,
		// docs/results/2026-11-26-h200x4-a).
		per = pipelineBlockBytes(world)
		maxBlocks = pipelineBlocks(func(grid int) int { return kernels.PipelineChunk(bytes, world, grid) })
	}
	blocks := gridFor(work, per, maxBlocks)
	// Early: the kernels wait for the work ahead on the stream themselves
	// (kernels/abi.go), so where the backend has programmatic dependent
	// launch their start-up overlaps the end of that work.
	return backend.LaunchConfig{Grid: backend.D1(uint32(blocks)), Block: backend.D1(block), Early: true}
}

// divideConfig is the launch shape of the division kernel
// (kernels.Divide) over n bytes: 512 threads, a block per 8 KiB (one
// vector a thread) up to 1024 blocks, launched Early. bf16 on 1×H200,
// graph replay, µs a launch, the faster of two runs (BenchmarkGPUDivide,
// docs/results/2026-11-29-h200x1-f/gpu-divide-sweep.txt; the whole
// sweep is in docs/PERFORMANCE-kernels.md):
//
//	grid                      64K    1M     16M    256M
//	a block per 64K, to 256   12.44  12.90  16.90  275.49
//	a block per 8K, to 1024   2.31   2.50   16.00  231.05
//
// Each thread's loads wait one after another, so small grids are bound
// by the memory's latency; 256 MiB moves 2.3 TB/s (read and write).
func divideConfig(n int) backend.LaunchConfig {
	return backend.LaunchConfig{Grid: backend.D1(uint32(gridFor(n, 8<<10, 1024))), Block: backend.D1(512), Early: true}
}

// pipelineBlocks is the largest grid, up to kernels.KernelChannels halved
// as often as needed, for which chunk (a Pipeline's chunk size for a grid)
// leaves the push area room for every block.
func pipelineBlocks(chunk func(grid int) int) int {
	blocks := kernels.KernelChannels
	for blocks > 1 && chunk(blocks) == 0 {
		blocks /= 2
	}
	return blocks
}

// llPerBlock is the bytes per block of an LL kernel (the one-shot's, the
// data-movement collectives') for messages of n bytes per peer: one block
// up to 16 KiB, 2 KiB per block above.
func llPerBlock(n int) int {
	if n < 16<<10 {
		return 16 << 10
	}
	return 2 << 10
}

// pipelineBlockBytes is the message bytes per block of the pipelined
// kernels' grid (up to their most blocks, which an 8 MiB message reaches
// at world 2). A block moves its chunks at a few tens of GB/s, so a grid
// of a block per 64 KiB left the link idle below 8 MiB: at world 2 on
// 2×H200 the forced Pipeline all-reduce took 33.86 µs at 512 KiB and the
// pipelined all-gather 43.60 at 1 MiB, where 4 MiB took 18.75 and 17.87;
// with a block per 8 KiB 8.84 and 10.34, and no row from 64 KiB to 16 MiB
// slower beyond the run's spread (docs/results/2026-11-30-h200x2-a/
// 8-pipeline-grid). From three ranks on a block per 64 KiB stays, as
// measured: `auto` takes neither there below 16 MiB.
func pipelineBlockBytes(world int) int {
	if world <= 2 {
		return 8 << 10
	}
	return 64 << 10
}

// gridFor is the blocks for work bytes at per bytes a block: at least one,
// at most maxBlocks.
func gridFor(work, per, maxBlocks int) int { return max(1, min((work+per-1)/per, maxBlocks)) }
