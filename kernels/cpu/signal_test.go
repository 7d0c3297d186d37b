package cpu

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
)

var noConfig = backend.LaunchConfig{Grid: backend.D1(1), Block: backend.D1(32)}

// TestBarrierOrdersData has every rank publish a value, pass a barrier and
// read every peer's value, 20 times back to back on pads never reset.
func TestBarrierOrdersData(t *testing.T) {
	for _, world := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprintf("world%d", world), func(t *testing.T) {
			g := newGroup(world, 64)
			ctx := testCtx(t)
			errs := runRanks(allRanks(world), func(r int) error {
				a := g.signalArgs(r)
				a.Channel, a.Mask = 7, uint32(1)<<world-1
				for round := 1; round <= 20; round++ {
					binary.LittleEndian.PutUint32(g.bufBytes[r], uint32(round))
					if err := Barrier(ctx, g.mem, noConfig, a.Args()); err != nil {
						return err
					}
					for p := range world {
						if got := binary.LittleEndian.Uint32(g.bufBytes[p]); got != uint32(round) {
							return fmt.Errorf("round %d: rank %d saw %d from rank %d", round, r, got, p)
						}
					}
					// A second barrier so nobody overwrites its value while
					// a peer still reads it.
					if err := Barrier(ctx, g.mem, noConfig, a.Args()); err != nil {
						return err
					}
				}
				return nil
			})
			g.requireClean(t, errs, "barrier")
			// Flags only grow: 40 signals went to every peer on channel 7.
			for r := range world {
				for p := range world {
					if p == r {
						continue
					}
					require.Equal(t, uint32(40), binary.LittleEndian.Uint32(g.padBytes[r][kernels.SentWord(7, p):]))
					require.Equal(t, uint32(40), binary.LittleEndian.Uint32(g.padBytes[r][kernels.RecvWord(7, p):]))
					require.Equal(t, uint32(40), binary.LittleEndian.Uint32(g.padBytes[r][kernels.InboxWord(7, p):]))
				}
			}
		})
	}
}

// TestBarrierSubset synchronises ranks {1, 3} of 4 while the others stay
// away.
func TestBarrierSubset(t *testing.T) {
	g := newGroup(4, 64)
	ctx := testCtx(t)
	errs := runRanks([]int{1, 3}, func(r int) error {
		a := g.signalArgs(r)
		a.Mask = 1<<1 | 1<<3
		for range 20 {
			if err := Barrier(ctx, g.mem, noConfig, a.Args()); err != nil {
				return err
			}
		}
		return nil
	})
	g.requireClean(t, errs, "subset barrier")
	require.Zero(t, binary.LittleEndian.Uint32(g.padBytes[0][kernels.InboxWord(0, 1):]), "rank 0 was signalled")
}

// TestPutWaitCounts checks that signals count: two puts satisfy exactly
// two waits, and a ping-pong hands data back and forth.
func TestPutWaitCounts(t *testing.T) {
	g := newGroup(2, 64)
	ctx := testCtx(t)
	put, wait := g.signalArgs(0), g.signalArgs(1)
	put.Peer, put.Channel = 1, 3
	wait.Peer, wait.Channel = 0, 3
	for range 2 {
		require.NoError(t, PutSignal(ctx, g.mem, noConfig, put.Args()))
	}
	for range 2 {
		require.NoError(t, WaitSignal(ctx, g.mem, noConfig, wait.Args()))
	}
	require.Zero(t, g.statusOf(0))
	require.Zero(t, g.statusOf(1))

	// A third wait has nothing to consume; with no time to wait it gives up
	// at once.
	wait.TimeoutNs = 0
	require.NoError(t, WaitSignal(ctx, g.mem, noConfig, wait.Args()))
	code, peer, ch := kernels.DecodeStatus(g.statusOf(1))
	require.Equal(t, []int{kernels.StatusTimeout, 0, 3}, []int{code, peer, ch})

	// Ping-pong on a fresh group: each side writes, signals, waits, reads.
	g = newGroup(2, 64)
	errs := runRanks(allRanks(2), func(r int) error {
		other := 1 - r
		a := g.signalArgs(r)
		a.Peer, a.Channel = uint32(other), 40
		for round := uint32(1); round <= 20; round++ {
			if r == 0 {
				binary.LittleEndian.PutUint32(g.bufBytes[0], round)
				if err := PutSignal(ctx, g.mem, noConfig, a.Args()); err != nil {
					return err
				}
				if err := WaitSignal(ctx, g.mem, noConfig, a.Args()); err != nil {
					return err
				}
				if got := binary.LittleEndian.Uint32(g.bufBytes[1]); got != round {
					return fmt.Errorf("round %d: pong %d", round, got)
				}
				continue
			}
			if err := WaitSignal(ctx, g.mem, noConfig, a.Args()); err != nil {
				return err
			}
			if got := binary.LittleEndian.Uint32(g.bufBytes[0]); got != round {
				return fmt.Errorf("round %d: ping %d", round, got)
			}
			binary.LittleEndian.PutUint32(g.bufBytes[1], round)
			if err := PutSignal(ctx, g.mem, noConfig, a.Args()); err != nil {
				return err
			}
		}
		return nil
	})
	g.requireClean(t, errs, "ping-pong")
}

// TestMissingRankTimesOut leaves rank 0 out: every other rank ends with a
// timeout status naming it, and no error. Rank 0 is the one every rank
// waits for first, so the status names it even when a loaded machine
// delays the present ranks past the short timeout.
func TestMissingRankTimesOut(t *testing.T) {
	const timeout = 50 * time.Millisecond
	for _, world := range []int{2, 4, 8} {
		missing := 0
		present := allRanks(world)[1:]
		t.Run(fmt.Sprintf("barrier/world%d", world), func(t *testing.T) {
			g := newGroup(world, 64)
			ctx := testCtx(t)
			errs := runRanks(present, func(r int) error {
				a := g.signalArgs(r)
				a.Channel, a.Mask, a.TimeoutNs = 9, uint32(1)<<world-1, uint64(timeout)
				return Barrier(ctx, g.mem, noConfig, a.Args())
			})
			g.requireTimeout(t, errs, missing, 9)
		})
		for _, ac := range algoCases() {
			if ac.world != world {
				continue
			}
			t.Run(fmt.Sprintf("%s/world%d", ac.algo, world), func(t *testing.T) {
				g := newGroup(world, 4096)
				fn := AllReduce(ac.algo, backend.Float16)
				ctx := testCtx(t)
				errs := runRanks(present, func(r int) error {
					a := g.allReduceArgs(r, g.in[r], g.out[r], 100, backend.Float16, backend.Sum)
					a.TimeoutNs = uint64(timeout)
					if ac.algo == kernels.HCM {
						a.Extra = hcmExtra(r)
					}
					return fn(ctx, g.mem, noConfig, a.Args())
				})
				g.requireTimeout(t, errs, missing, 0)
			})
		}
	}
}

func (g *group) requireTimeout(t *testing.T, errs map[int]error, missing, channel int) {
	t.Helper()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
		code, peer, ch := kernels.DecodeStatus(g.statusOf(r))
		require.Equal(t, kernels.StatusTimeout, code, "rank %d", r)
		require.Equal(t, missing, peer, "rank %d", r)
		require.Equal(t, channel, ch, "rank %d", r)
	}
}

// TestTimeoutWithoutStatusWord returns the timeout as an error when there
// is nowhere to record it.
func TestTimeoutWithoutStatusWord(t *testing.T) {
	g := newGroup(2, 64)
	a := g.signalArgs(0)
	a.Peer, a.Status, a.TimeoutNs = 1, 0, uint64(time.Millisecond)
	err := WaitSignal(testCtx(t), g.mem, noConfig, a.Args())
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorContains(t, err, "rank 1")
}

// hookMem calls hook after every Bytes call.
type hookMem struct {
	Memory
	hook func(p backend.DevicePtr)
}

func (m hookMem) Bytes(p backend.DevicePtr, n int) ([]byte, error) {
	b, err := m.Memory.Bytes(p, n)
	m.hook(p)
	return b, err
}

// TestCancelEndsWait ends a wait with a distant deadline by cancelling its
// context once the kernel has mapped its pad (so it is past its argument
// checks and about to spin).
func TestCancelEndsWait(t *testing.T) {
	g := newGroup(2, 64)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mem := hookMem{Memory: g.mem, hook: func(p backend.DevicePtr) {
		if p == g.pads[0] {
			cancel()
		}
	}}
	a := g.signalArgs(0)
	a.Peer, a.TimeoutNs = 1, uint64(time.Hour)
	err := WaitSignal(ctx, mem, noConfig, a.Args())
	require.ErrorIs(t, err, backend.ErrClosed)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "waiting for rank 1")
	require.Zero(t, g.statusOf(0))

	// Already cancelled: nothing runs.
	a.Peer = 0
	err = PutSignal(ctx, g.mem, noConfig, a.Args())
	require.ErrorIs(t, err, backend.ErrClosed)
	require.Zero(t, binary.LittleEndian.Uint32(g.padBytes[0][kernels.InboxWord(0, 0):]))
}

// TestSignalBadArgs records StatusBadArgs and returns ErrInvalidArgument.
func TestSignalBadArgs(t *testing.T) {
	g := newGroup(4, 64)
	tests := []struct {
		name     string
		fn       Func
		mutate   func(*kernels.SignalArgs)
		wantPeer int // in the status word, as the device kernels report it
	}{
		{"world zero", Barrier, func(a *kernels.SignalArgs) { a.World = 0 }, 0},
		{"world nine", Barrier, func(a *kernels.SignalArgs) { a.World = 9 }, 0},
		{"rank beyond world", Barrier, func(a *kernels.SignalArgs) { a.Rank = 4 }, 0},
		{"channel beyond pad", Barrier, func(a *kernels.SignalArgs) { a.Channel = kernels.NumChannels }, 0},
		{"mask without self", Barrier, func(a *kernels.SignalArgs) { a.Mask = 0b1110 }, 0},
		{"mask beyond world", Barrier, func(a *kernels.SignalArgs) { a.Mask = 0b10001 }, 0},
		{"put peer beyond world", PutSignal, func(a *kernels.SignalArgs) { a.Peer = 4 }, 4},
		{"wait peer beyond world", WaitSignal, func(a *kernels.SignalArgs) { a.Peer = 7 }, 7},
		{"wait world nine", WaitSignal, func(a *kernels.SignalArgs) { a.World = 9 }, 1},
		{"pad table unmapped", Barrier, func(a *kernels.SignalArgs) { a.Pads = 12345 }, 0},
		{"pad table too short", PutSignal, func(a *kernels.SignalArgs) { a.Pads = g.padTable.Add(8) }, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := g.signalArgs(0)
			a.Mask, a.Peer, a.Channel = 0b1111, 1, 5
			tt.mutate(&a)
			err := tt.fn(testCtx(t), g.mem, noConfig, a.Args())
			require.ErrorIs(t, err, backend.ErrInvalidArgument)
			code, peer, ch := kernels.DecodeStatus(g.statusOf(0))
			require.Equal(t, kernels.StatusBadArgs, code)
			require.Equal(t, tt.wantPeer, peer)
			require.Equal(t, int(a.Channel&0xff), ch)
		})
	}
	t.Run("wrong argument count", func(t *testing.T) {
		err := Barrier(testCtx(t), g.mem, noConfig, g.signalArgs(0).Args()[:7])
		require.ErrorIs(t, err, backend.ErrInvalidArgument)
		require.Zero(t, g.statusOf(0))
	})
	t.Run("unmapped status word", func(t *testing.T) {
		a := g.signalArgs(0)
		a.Status = 99
		err := Barrier(testCtx(t), g.mem, noConfig, a.Args())
		require.ErrorIs(t, err, backend.ErrInvalidArgument)
	})
}

// TestAllReduceBadArgs records StatusBadArgs and returns
// ErrInvalidArgument, without panicking, for every kind of bad argument.
func TestAllReduceBadArgs(t *testing.T) {
	g := newGroup(8, 4096)
	// A buffer table whose rank 3 entry is 8 bytes into its buffer.
	misaligned, table := g.mem.alloc(8 * g.world)
	for r, p := range g.bufs {
		if r == 3 {
			p = p.Add(8)
		}
		binary.LittleEndian.PutUint64(table[8*r:], uint64(p))
	}
	tests := []struct {
		name   string
		algo   kernels.Algo
		mutate func(*kernels.AllReduceArgs)
	}{
		{"dtype mismatch", kernels.OneShot, func(a *kernels.AllReduceArgs) { a.DType = backend.Float16 }},
		{"invalid dtype", kernels.OneShot, func(a *kernels.AllReduceArgs) { a.DType = 17 }},
		{"invalid op", kernels.TwoShot, func(a *kernels.AllReduceArgs) { a.Op = 3 }},
		{"world zero", kernels.OneShot, func(a *kernels.AllReduceArgs) { a.World = 0 }},
		{"world nine", kernels.OneShot, func(a *kernels.AllReduceArgs) { a.World = 9 }},
		{"rank beyond world", kernels.TwoShot, func(a *kernels.AllReduceArgs) { a.Rank = 8 }},
		{"huge count", kernels.OneShot, func(a *kernels.AllReduceArgs) { a.Count = 1 << 62 }},
		{"count beyond buffer", kernels.OneShot, func(a *kernels.AllReduceArgs) { a.Count = 4096/4 + 1 }},
		{"output out of bounds", kernels.OneShot, func(a *kernels.AllReduceArgs) { a.Output = g.out[0].Add(4090) }},
		{"output unmapped", kernels.TwoShot, func(a *kernels.AllReduceArgs) { a.Output = 0xdead0000 }},
		{"input unmapped", kernels.TwoShot, func(a *kernels.AllReduceArgs) { a.Input = 0 }},
		{"buffer table unmapped", kernels.OneShot, func(a *kernels.AllReduceArgs) { a.Bufs = 8 }},
		{"pad table unmapped", kernels.OneShot, func(a *kernels.AllReduceArgs) { a.Pads = 8 }},
		{"hcm world four", kernels.HCM, func(a *kernels.AllReduceArgs) { a.World = 4 }},
		{"hcm peer repeated", kernels.HCM, func(a *kernels.AllReduceArgs) { a.Extra = kernels.PackHCM([3]int{1, 2, 2}, 4, 0) }},
		{"hcm peer is self", kernels.HCM, func(a *kernels.AllReduceArgs) { a.Extra = kernels.PackHCM([3]int{1, 2, 3}, 0, 0) }},
		{"hcm peer beyond world", kernels.HCM, func(a *kernels.AllReduceArgs) { a.Extra = kernels.PackHCM([3]int{1, 2, 3}, 9, 0) }},
		{"hcm partial offset below count", kernels.HCM, func(a *kernels.AllReduceArgs) {
			a.Extra = hcmExtra(0) | 48<<32
		}},
		{"hcm partial offset unaligned", kernels.HCM, func(a *kernels.AllReduceArgs) {
			a.Extra = hcmExtra(0) | 2056<<32
		}},
		{"hcm partial offset beyond buffer", kernels.HCM, func(a *kernels.AllReduceArgs) {
			a.Extra = hcmExtra(0) | 4096<<32
		}},
		{"input misaligned", kernels.OneShot, func(a *kernels.AllReduceArgs) { a.Input = g.in[0].Add(2) }},
		{"output misaligned", kernels.TwoShot, func(a *kernels.AllReduceArgs) { a.Output = g.out[0].Add(6) }},
		{"buffer misaligned", kernels.TwoShot, func(a *kernels.AllReduceArgs) { a.Bufs = misaligned }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := g.allReduceArgs(0, g.in[0], g.out[0], 16, backend.Float32, backend.Sum)
			a.Extra = hcmExtra(0)
			tt.mutate(&a)
			err := AllReduce(tt.algo, backend.Float32)(testCtx(t), g.mem, noConfig, a.Args())
			require.ErrorIs(t, err, backend.ErrInvalidArgument)
			code, _, _ := kernels.DecodeStatus(g.statusOf(0))
			require.Equal(t, kernels.StatusBadArgs, code)
		})
	}
	t.Run("wrong argument count", func(t *testing.T) {
		a := g.allReduceArgs(0, g.in[0], g.out[0], 16, backend.Float32, backend.Sum)
		err := AllReduce(kernels.OneShot, backend.Float32)(testCtx(t), g.mem, noConfig, a.Args()[1:])
		require.ErrorIs(t, err, backend.ErrInvalidArgument)
		require.Zero(t, g.statusOf(0))
	})
	t.Run("memory error is wrapped", func(t *testing.T) {
		a := g.allReduceArgs(0, g.in[0], 0xdead0000, 16, backend.Float32, backend.Sum)
		err := AllReduce(kernels.OneShot, backend.Float32)(testCtx(t), g.mem, noConfig, a.Args())
		var be *backend.Error
		require.True(t, errors.As(err, &be))
		require.NotNil(t, be.Err, "the memory error is kept")
		require.ErrorContains(t, err, "output 0xdead0000")
		g.statusOf(0)
	})
}

// TestKernels lists every kernel of the module under its ABI name.
func TestKernels(t *testing.T) {
	ks := Kernels()
	require.Len(t, ks, 4+(len(kernels.AllReduceAlgos)+len(kernels.Movers)+1)*len(backend.DTypes))
	names := kernels.KernelNames()
	require.Len(t, names, len(ks))
	for _, name := range names {
		require.NotNil(t, ks[name], name)
	}
	for _, name := range []string{kernels.BarrierKernel, kernels.ConfirmKernel, kernels.PutSignalKernel, kernels.WaitSignalKernel,
		"intranode_one_shot_bf16", "intranode_two_shot_f64", "intranode_hcm_i32", "intranode_hcm_f16", "intranode_pipeline_bf16",
		"intranode_reduce_scatter_f16", "intranode_all_gather_i32", "intranode_broadcast_f64", "intranode_all_to_all_bf16",
		"intranode_divide_bf16", "intranode_divide_i32"} {
		require.Contains(t, ks, name)
		require.NotNil(t, ks[name])
	}
}
