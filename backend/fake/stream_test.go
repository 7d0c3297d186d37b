//go:build linux

package fake_test

import (
	"context"
	"encoding/binary"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/fake"
)

func TestStreamOrder(t *testing.T) {
	const n = 2000
	e := newEnv(t, fake.WithDevices(1))
	s := e.stream(t)
	log := e.alloc(t, 4+4*n)
	appendFn := e.fn(t, "append")
	for i := range n {
		require.NoError(t, s.Launch(appendFn, one(), backend.Ptr(log.Ptr()), backend.U32(uint32(i))))
	}
	require.NoError(t, s.Synchronize(e.ctx))

	got := make([]byte, 4+4*n)
	require.NoError(t, e.d.CopyFromDevice(e.ctx, got, log.Ptr()))
	require.Equal(t, uint32(n), binary.LittleEndian.Uint32(got))
	for i := range n {
		require.Equal(t, uint32(i), binary.LittleEndian.Uint32(got[4+4*i:]), "entry %d", i)
	}
}

func TestLaunchErrors(t *testing.T) {
	e := newEnv(t, fake.WithDevices(2))
	s := e.stream(t)
	d1, err := e.b.Open(e.ctx, 1)
	require.NoError(t, err)
	defer func() { require.NoError(t, d1.Close()) }()
	mod1, err := d1.LoadModule(e.ctx, backend.ModuleSource{Name: testModule})
	require.NoError(t, err)
	other, err := mod1.Function("set")
	require.NoError(t, err)
	closedMod, err := e.d.LoadModule(e.ctx, backend.ModuleSource{Name: testModule})
	require.NoError(t, err)
	stale, err := closedMod.Function("set")
	require.NoError(t, err)
	require.NoError(t, closedMod.Close())
	require.NoError(t, mod1.Close())
	_, err = closedMod.Function("set")
	require.ErrorIs(t, err, backend.ErrClosed)

	tests := []struct {
		name string
		fn   backend.Function
		cfg  backend.LaunchConfig
		want error
	}{
		{"zero grid", e.fn(t, "set"), backend.LaunchConfig{Block: backend.D1(1)}, backend.ErrInvalidArgument},
		{"zero block z", e.fn(t, "set"), backend.LaunchConfig{Grid: backend.D1(1), Block: backend.Dim3{X: 1, Y: 1}}, backend.ErrInvalidArgument},
		{"other device", other, one(), backend.ErrInvalidArgument},
		{"closed module", stale, one(), backend.ErrClosed},
		{"nil function", nil, one(), backend.ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, s.Launch(tc.fn, tc.cfg), tc.want)
		})
	}
	require.NoError(t, s.Synchronize(e.ctx), "refused launches leave the stream healthy")
}

func TestModules(t *testing.T) {
	e := newEnv(t, fake.WithDevices(1))
	tests := []struct {
		name    string
		src     backend.ModuleSource
		want    error
		wantMsg string
	}{
		{"unknown", backend.ModuleSource{Name: "no/such"}, backend.ErrNotFound, testModule},
		{"image", backend.ModuleSource{Name: testModule, Image: []byte{0x7f, 'E', 'L', 'F'}}, backend.ErrNotSupported, "Go kernels"},
		{"empty", backend.ModuleSource{}, backend.ErrInvalidArgument, "neither"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.d.LoadModule(e.ctx, tc.src)
			require.ErrorIs(t, err, tc.want)
			require.ErrorContains(t, err, tc.wantMsg)
		})
	}
	_, err := e.mod.Function("nope")
	require.ErrorIs(t, err, backend.ErrNotFound)
	require.ErrorContains(t, err, "append")
	f := e.fn(t, "add1")
	require.Equal(t, "add1", f.Name())
	require.Contains(t, fake.Modules(), testModule)
	require.Panics(t, func() { fake.RegisterModule(testModule, nil) }, "duplicate module")
	require.Panics(t, func() { fake.RegisterModule("", nil) })
	require.Panics(t, func() { fake.RegisterModule("test/nil", map[string]fake.Kernel{"k": nil}) })
}

func TestEventsAcrossStreams(t *testing.T) {
	e := newEnv(t, fake.WithDevices(1))
	a, b := e.stream(t), e.stream(t)
	gate := e.host(t, 4)
	data, result := e.alloc(t, 4), e.alloc(t, 4)
	evA, err := e.d.NewEvent(e.ctx, false)
	require.NoError(t, err)
	evB, err := e.d.NewEvent(e.ctx, false)
	require.NoError(t, err)

	// A: wait for the gate, then write 42 and record. B: wait for A's
	// record, then copy what A wrote.
	require.NoError(t, a.Launch(e.fn(t, "gate"), one(), backend.Ptr(gate.Ptr())))
	require.NoError(t, a.Launch(e.fn(t, "set"), one(), backend.Ptr(data.Ptr()), backend.U32(42)))
	require.NoError(t, a.Record(evA))
	require.NoError(t, b.WaitEvent(evA))
	require.NoError(t, b.Launch(e.fn(t, "copyword"), one(), backend.Ptr(result.Ptr()), backend.Ptr(data.Ptr())))
	require.NoError(t, b.Record(evB))

	// B cannot pass A's record while A is held at the gate.
	for _, ev := range []backend.Event{evA, evB} {
		done, err := ev.Done()
		require.NoError(t, err)
		require.False(t, done)
	}
	atomic.StoreUint32(word(gate.Bytes()), 1)
	require.NoError(t, evB.Synchronize(e.ctx))
	done, err := evA.Done()
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, uint32(42), e.u32(t, result.Ptr()))

	// A never-recorded event is complete; closed events are refused.
	fresh, err := e.d.NewEvent(e.ctx, false)
	require.NoError(t, err)
	require.NoError(t, fresh.Synchronize(e.ctx))
	require.NoError(t, fresh.Close())
	require.ErrorIs(t, a.Record(fresh), backend.ErrClosed)
	require.ErrorIs(t, b.WaitEvent(fresh), backend.ErrClosed)
	require.NoError(t, evA.Close())
	require.NoError(t, evB.Close())
}

func TestEventElapsed(t *testing.T) {
	e := newEnv(t, fake.WithDevices(2))
	s := e.stream(t)
	start, err := e.d.NewEvent(e.ctx, true)
	require.NoError(t, err)
	end, err := e.d.NewEvent(e.ctx, true)
	require.NoError(t, err)
	plain, err := e.d.NewEvent(e.ctx, false)
	require.NoError(t, err)

	_, err = end.Elapsed(start)
	require.ErrorIs(t, err, backend.ErrInvalidArgument, "never recorded")
	require.NoError(t, s.Record(start))
	require.NoError(t, s.Launch(e.fn(t, "add1"), one(), backend.Ptr(e.alloc(t, 64).Ptr()), backend.U64(16)))
	require.NoError(t, s.Record(end))
	require.NoError(t, s.Record(plain))
	require.NoError(t, end.Synchronize(e.ctx))
	d, err := end.Elapsed(start)
	require.NoError(t, err)
	require.GreaterOrEqual(t, d, time.Duration(0))
	_, err = plain.Elapsed(start)
	require.ErrorIs(t, err, backend.ErrInvalidArgument, "not a timing event")

	// Events record only on their own device.
	d1, err := e.b.Open(e.ctx, 1)
	require.NoError(t, err)
	ev1, err := d1.NewEvent(e.ctx, false)
	require.NoError(t, err)
	require.ErrorIs(t, s.Record(ev1), backend.ErrInvalidArgument)
	require.NoError(t, s.WaitEvent(ev1), "waiting on another device's event is fine")
	require.NoError(t, d1.Close())
}

func TestSynchronizeTimeout(t *testing.T) {
	e := newEnv(t, fake.WithDevices(1))
	s := e.stream(t)
	gate := e.host(t, 4)
	require.NoError(t, s.Launch(e.fn(t, "gate"), one(), backend.Ptr(gate.Ptr())))
	ev, err := e.d.NewEvent(e.ctx, false)
	require.NoError(t, err)
	require.NoError(t, s.Record(ev))

	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Millisecond)
	defer cancel()
	err = s.Synchronize(ctx)
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, ev.Synchronize(ctx), backend.ErrTimeout)

	atomic.StoreUint32(word(gate.Bytes()), 1)
	require.NoError(t, s.Synchronize(e.ctx))
	require.NoError(t, ev.Synchronize(e.ctx))
}

func TestGraphCaptureReplay(t *testing.T) {
	e := newEnv(t, fake.WithDevices(2))
	s, s2 := e.stream(t), e.stream(t)
	gate := e.host(t, 4)
	counter, log := e.alloc(t, 4), e.alloc(t, 4+4*16)
	add1, appendFn := e.fn(t, "add1"), e.fn(t, "append")
	ev, err := e.d.NewEvent(e.ctx, false)
	require.NoError(t, err)

	// Work queued before the capture (held at the gate) runs once, directly.
	require.NoError(t, s.Launch(e.fn(t, "gate"), one(), backend.Ptr(gate.Ptr())))
	require.NoError(t, s.Launch(add1, one(), backend.Ptr(counter.Ptr()), backend.U64(1)))
	require.NoError(t, s.BeginCapture())
	require.ErrorIs(t, s.BeginCapture(), backend.ErrInvalidArgument)
	require.ErrorIs(t, s.Synchronize(e.ctx), backend.ErrNotSupported)
	require.NoError(t, s.Launch(add1, one(), backend.Ptr(counter.Ptr()), backend.U64(1)))
	require.NoError(t, s.Launch(appendFn, one(), backend.Ptr(log.Ptr()), backend.U32(7)))
	require.NoError(t, s.CopyAsync(log.Ptr().Add(60), counter.Ptr(), 4))
	require.NoError(t, s.Record(ev))
	require.NoError(t, s.WaitEvent(ev))
	g, err := s.EndCapture()
	require.NoError(t, err)
	_, err = s.EndCapture()
	require.ErrorIs(t, err, backend.ErrInvalidArgument)

	atomic.StoreUint32(word(gate.Bytes()), 1)
	require.NoError(t, s.Synchronize(e.ctx))
	require.Equal(t, uint32(1), e.u32(t, counter.Ptr()), "captured work did not run")
	require.Equal(t, uint32(0), e.u32(t, log.Ptr()))

	for i := range 3 {
		target := s
		if i == 1 {
			target = s2 // any stream of the device
		}
		require.NoError(t, g.Launch(target))
		require.NoError(t, target.Synchronize(e.ctx))
		require.NoError(t, ev.Synchronize(e.ctx))
		require.Equal(t, uint32(2+i), e.u32(t, counter.Ptr()))
		require.Equal(t, uint32(1+i), e.u32(t, log.Ptr()))
		require.Equal(t, uint32(2+i), e.u32(t, log.Ptr().Add(60)), "copy ran after the add in replay %d", i)
	}

	d1, err := e.b.Open(e.ctx, 1)
	require.NoError(t, err)
	s1, err := d1.NewStream(e.ctx)
	require.NoError(t, err)
	require.ErrorIs(t, g.Launch(s1), backend.ErrInvalidArgument, "graph of another device")
	require.NoError(t, s1.Close())
	require.NoError(t, d1.Close())
	require.NoError(t, g.Close())
	require.ErrorIs(t, g.Launch(s), backend.ErrClosed)
}

func TestStickyErrors(t *testing.T) {
	tests := []struct {
		kernel string
		want   error
		msg    string
	}{
		{"fail", backend.ErrInvalidArgument, "asked to fail"},
		{"panic", backend.ErrInternal, "panicked"},
	}
	for _, tc := range tests {
		t.Run(tc.kernel, func(t *testing.T) {
			e := newEnv(t, fake.WithDevices(1))
			s := e.stream(t)
			counter := e.alloc(t, 4)
			ev, err := e.d.NewEvent(e.ctx, false)
			require.NoError(t, err)
			before, err := e.d.NewEvent(e.ctx, false)
			require.NoError(t, err)

			require.NoError(t, s.Record(before))
			require.NoError(t, s.Launch(e.fn(t, tc.kernel), one()))
			require.NoError(t, s.Launch(e.fn(t, "add1"), one(), backend.Ptr(counter.Ptr()), backend.U64(1)))
			require.NoError(t, s.Record(ev))

			for range 2 {
				err := s.Synchronize(e.ctx)
				require.ErrorIs(t, err, tc.want)
				require.ErrorContains(t, err, tc.msg)
				require.ErrorContains(t, err, testModule+"."+tc.kernel)
			}
			require.NoError(t, before.Synchronize(e.ctx), "events recorded before the failure are clean")
			require.ErrorIs(t, ev.Synchronize(e.ctx), tc.want)
			done, err := ev.Done()
			require.True(t, done)
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, uint32(0), e.u32(t, counter.Ptr()), "work after the failure is skipped")
		})
	}
}

func TestCloseStopsSpinningKernel(t *testing.T) {
	e := newEnv(t, fake.WithDevices(1))
	s, err := e.d.NewStream(e.ctx)
	require.NoError(t, err)
	ev, err := e.d.NewEvent(e.ctx, false)
	require.NoError(t, err)
	counter := e.alloc(t, 4)
	require.NoError(t, s.Launch(e.fn(t, "hang"), one()))
	require.NoError(t, s.Record(ev))
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "closing twice is a no-op")

	require.ErrorIs(t, ev.Synchronize(e.ctx), context.Canceled, "the drained event reports the cancelled kernel")
	require.ErrorIs(t, s.Launch(e.fn(t, "add1"), one(), backend.Ptr(counter.Ptr()), backend.U64(1)), backend.ErrClosed)
	require.ErrorIs(t, s.Synchronize(e.ctx), backend.ErrClosed)
	require.ErrorIs(t, s.BeginCapture(), backend.ErrClosed)
}

func TestCloseAllocationWhileKernelHoldsIt(t *testing.T) {
	e := newEnv(t, fake.WithDevices(1))
	s := e.stream(t)
	gate := e.host(t, 8)
	a, err := e.d.Alloc(e.ctx, 4)
	require.NoError(t, err)

	// The kernel resolves a, then spins; a is closed under it; the kernel's
	// late write must land in still-mapped memory, not fault.
	require.NoError(t, s.Launch(e.fn(t, "gatedset"), one(), backend.Ptr(a.Ptr()), backend.Ptr(gate.Ptr()), backend.U32(9)))
	require.Eventually(t, func() bool { return atomic.LoadUint32(word(gate.Bytes()[4:])) == 1 },
		10*time.Second, time.Millisecond, "kernel resolved its pointers")
	require.NoError(t, a.Close())
	atomic.StoreUint32(word(gate.Bytes()), 1)
	require.NoError(t, s.Synchronize(e.ctx))

	// Later work on the closed pointer fails cleanly.
	require.NoError(t, s.Launch(e.fn(t, "set"), one(), backend.Ptr(a.Ptr()), backend.U32(1)))
	err = s.Synchronize(e.ctx)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	require.ErrorContains(t, err, "not inside a live allocation")
}

func TestCopyAsync(t *testing.T) {
	e := newEnv(t, fake.WithDevices(1))
	s := e.stream(t)
	src, dst := e.alloc(t, 64), e.alloc(t, 64)
	want := []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	require.NoError(t, e.d.CopyToDevice(e.ctx, src.Ptr(), want))
	require.NoError(t, s.CopyAsync(dst.Ptr(), src.Ptr(), 64))
	require.NoError(t, s.CopyAsync(dst.Ptr().Add(1), dst.Ptr(), 32), "overlapping copies act as memmove")
	require.NoError(t, s.Synchronize(e.ctx))
	got := make([]byte, 64)
	require.NoError(t, e.d.CopyFromDevice(e.ctx, got, dst.Ptr()))
	require.Equal(t, append(append([]byte{'0'}, want[:32]...), want[33:]...), got)
	require.ErrorIs(t, s.CopyAsync(dst.Ptr(), src.Ptr(), 65), backend.ErrInvalidArgument)
	require.ErrorIs(t, s.CopyAsync(0, src.Ptr(), 1), backend.ErrInvalidArgument)
}

func TestDeviceCloseReportsLeaks(t *testing.T) {
	b, err := fake.New(fake.WithDevices(1))
	require.NoError(t, err)
	ctx := t.Context()
	d, err := b.Open(ctx, 0)
	require.NoError(t, err)
	a, err := d.Alloc(ctx, 16)
	require.NoError(t, err)
	_, err = d.NewStream(ctx)
	require.NoError(t, err)
	_, err = d.LoadModule(ctx, backend.ModuleSource{Name: testModule})
	require.NoError(t, err)

	err = d.Close()
	require.ErrorContains(t, err, "1 allocation(s), 1 stream(s), 1 module(s)")
	require.NoError(t, d.Close(), "closing twice is a no-op")
	_, err = fake.Addresses().Bytes(a.Ptr(), 16)
	require.ErrorIs(t, err, backend.ErrInvalidArgument, "the leaked allocation was released")
	_, err = d.Alloc(ctx, 16)
	require.ErrorIs(t, err, backend.ErrClosed)
	_, err = d.NewStream(ctx)
	require.ErrorIs(t, err, backend.ErrClosed)
	require.NoError(t, b.Close())
	_, err = b.Open(ctx, 0)
	require.ErrorIs(t, err, backend.ErrClosed)
}

func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		b, err := fake.New(fake.WithDevices(2))
		require.NoError(t, err)
		defer b.Close()
		ctx := t.Context()
		for i := range 2 {
			d, err := b.Open(ctx, i)
			require.NoError(t, err)
			mod, err := d.LoadModule(ctx, backend.ModuleSource{Name: testModule})
			require.NoError(t, err)
			hang, err := mod.Function("hang")
			require.NoError(t, err)
			add1, err := mod.Function("add1")
			require.NoError(t, err)
			a, err := d.Alloc(ctx, 64)
			require.NoError(t, err)
			for j := range 4 {
				s, err := d.NewStream(ctx)
				require.NoError(t, err)
				require.NoError(t, s.Launch(add1, one(), backend.Ptr(a.Ptr()), backend.U64(16)))
				if j%2 == 0 {
					require.NoError(t, s.Launch(hang, one()))
					continue // left for d.Close to stop
				}
				require.NoError(t, s.Synchronize(ctx))
				require.NoError(t, s.Close())
			}
			require.Error(t, d.Close(), "streams, module and allocation left open")
		}
	}()
	// Goroutines take a moment to be reaped after they return.
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before)
}
