package conformance

import (
	"context"
	"errors"
	"fmt"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/numeric"
	"github.com/intranode/intranode/symmetric"
)

func init() {
	register(
		Case{Name: "symmetric/read-write", MinWorld: 2, Run: caseSymmetricReadWrite},
		Case{Name: "symmetric/signals", MinWorld: 2, Run: caseSignals},
		Case{Name: "symmetric/size-mismatch", MinWorld: 2, Run: caseSizeMismatch},
	)
}

// symmetricMemory allocates and rendezvouses size bytes per rank.
func symmetricMemory(ctx context.Context, e *Env, name string, size int) (*symmetric.Memory, error) {
	opts, err := commOptions(ctx, e, size)
	if err != nil {
		return nil, err
	}
	dev, err := e.Backend.Open(ctx, *opts.Device)
	if err != nil {
		return nil, err
	}
	blk, err := symmetric.Alloc(ctx, e.Backend, dev, size, symmetric.WithAllowOverlap(opts.AllowOverlap),
		symmetric.WithTimeout(e.Timeout))
	if err != nil {
		_ = dev.Close()
		return nil, err
	}
	m, err := blk.Rendezvous(ctx, name, symmetric.GroupInfo{Rank: e.Rank, World: e.World, Store: e.Store})
	if err != nil {
		_ = dev.Close()
		return nil, err
	}
	return m, nil
}

func closeMemory(ctx context.Context, m *symmetric.Memory) error {
	berr := m.Barrier(ctx, 0)
	dev := m.Device()
	return errors.Join(berr, m.Close(), dev.Close())
}

func caseSymmetricReadWrite(ctx context.Context, e *Env) error {
	const size = 64 << 10
	m, err := symmetricMemory(ctx, e, "conformance-rw", size)
	if err != nil {
		return err
	}
	if m.Rank() != e.Rank || m.World() != e.World || m.BufferSize() != size || m.SignalPadSize() <= 0 {
		return fmt.Errorf("memory reports rank %d world %d size %d pad %d", m.Rank(), m.World(), m.BufferSize(), m.SignalPadSize())
	}
	d := backend.Int32
	count := size / d.Size()
	dev := m.Device()
	for round := range 3 {
		mine := make([]byte, size)
		numeric.Pattern(d, mine, count, e.Rank, round)
		if err := dev.CopyToDevice(ctx, m.Buffer(e.Rank), mine); err != nil {
			return err
		}
		if err := m.Barrier(ctx, 0); err != nil {
			return err
		}
		for p := range e.World {
			v, err := m.GetBuffer(p, count, d, 0)
			if err != nil {
				return err
			}
			got := make([]byte, size)
			if err := dev.CopyFromDevice(ctx, got, v.Ptr); err != nil {
				return fmt.Errorf("reading rank %d's buffer: %w", p, err)
			}
			want := make([]byte, size)
			numeric.Pattern(d, want, count, p, round)
			if wrong, first := numeric.Compare(d, got, want, count); wrong > 0 {
				return fmt.Errorf("round %d: rank %d's buffer as seen by rank %d: %d wrong, first %v", round, p, e.Rank, wrong, first)
			}
		}
		// Nobody overwrites its buffer for the next round before all
		// have read this one.
		if err := m.Barrier(ctx, 1); err != nil {
			return err
		}
	}
	if _, err := m.GetBuffer(0, count+1, d, 0); !errors.Is(err, backend.ErrInvalidArgument) {
		return fmt.Errorf("view past the end: got %v, want ErrInvalidArgument", err)
	}
	if _, err := m.GetBuffer(0, 1, d, 2); !errors.Is(err, backend.ErrInvalidArgument) {
		return fmt.Errorf("misaligned view: got %v, want ErrInvalidArgument", err)
	}
	return closeMemory(ctx, m)
}

func caseSignals(ctx context.Context, e *Env) error {
	m, err := symmetricMemory(ctx, e, "conformance-signals", 4096)
	if err != nil {
		return err
	}
	next, prev := (e.Rank+1)%e.World, (e.Rank+e.World-1)%e.World
	for ch := range 3 {
		for range 20 {
			if err := m.PutSignal(ctx, next, ch); err != nil {
				return err
			}
			if err := m.WaitSignal(ctx, prev, ch); err != nil {
				return err
			}
		}
	}
	// Several puts may precede the matching waits.
	for range 5 {
		if err := m.PutSignal(ctx, next, 7); err != nil {
			return err
		}
	}
	for range 5 {
		if err := m.WaitSignal(ctx, prev, 7); err != nil {
			return err
		}
	}
	if e.Rank < 2 {
		if err := m.BarrierRanks(ctx, 9, []int{0, 1}); err != nil {
			return err
		}
	}
	if err := m.PutSignal(ctx, e.Rank, 0); !errors.Is(err, backend.ErrInvalidArgument) {
		return fmt.Errorf("signal to self: got %v, want ErrInvalidArgument", err)
	}
	if err := m.Barrier(ctx, 1000); !errors.Is(err, backend.ErrInvalidArgument) {
		return fmt.Errorf("channel 1000: got %v, want ErrInvalidArgument", err)
	}
	return closeMemory(ctx, m)
}

func caseSizeMismatch(ctx context.Context, e *Env) error {
	size := 4096
	if e.Rank == e.World-1 {
		size = 8192
	}
	m, err := symmetricMemory(ctx, e, "conformance-size-mismatch", size)
	if err == nil {
		_ = closeMemory(ctx, m)
		return fmt.Errorf("rendezvous of different sizes succeeded")
	}
	if !errors.Is(err, symmetric.ErrSizeMismatch) {
		return fmt.Errorf("got %v, want ErrSizeMismatch", err)
	}
	return nil
}
