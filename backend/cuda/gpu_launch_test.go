//go:build cuda

package cuda

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu/gputest"
	"github.com/intranode/intranode/kernels"
)

func TestGPUModuleAndLaunch(t *testing.T) {
	b := openGPU(t)
	ctx := timeout(t)
	d := openDevice(t, b, 0)
	m := loadTestModule(t, d)
	_, err := m.Function("no_such_kernel")
	require.ErrorIs(t, err, backend.ErrNotFound)

	const words = 4097
	a := gputest.Alloc(t, d, 4*words)
	s := newStream(t, d)
	cfg := backend.LaunchConfig{Grid: backend.D1((words + 255) / 256), Block: backend.D1(256)}
	// fill_u32 takes (pointer, u32, u64): the u64 sits at offset 16, so a
	// launch that packed the u32 as 8 bytes or misaligned the u64 fails.
	require.NoError(t, s.Launch(kernelFn(t, m, "fill_u32"), cfg, backend.Ptr(a.Ptr()), backend.U32(41), backend.U64(words)))
	require.NoError(t, s.Launch(kernelFn(t, m, "add_one"), cfg, backend.Ptr(a.Ptr()), backend.U64(words)))
	require.NoError(t, s.Synchronize(ctx))
	got := make([]byte, 4*words)
	require.NoError(t, d.CopyFromDevice(ctx, got, a.Ptr()))
	for i, v := range u32s(got) {
		require.Equal(t, uint32(42), v, "word %d", i)
	}

	// A launch the driver rejects is an error at launch time.
	err = s.Launch(kernelFn(t, m, "add_one"), backend.LaunchConfig{Grid: backend.D1(1), Block: backend.D1(4096)}, backend.Ptr(a.Ptr()), backend.U64(words))
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	var de *DriverError
	require.True(t, errors.As(err, &de))
	require.Equal(t, "cuLaunchKernel", de.Op)
	require.NoError(t, s.Synchronize(ctx), "a rejected launch leaves the stream usable")

	// The launch path allocates nothing.
	args := []backend.Arg{backend.Ptr(a.Ptr()), backend.U64(words)}
	addOne := kernelFn(t, m, "add_one")
	allocs := testing.AllocsPerRun(200, func() {
		if err := s.Launch(addOne, cfg, args...); err != nil {
			panic(err)
		}
	})
	require.Zero(t, allocs)
	require.NoError(t, s.Synchronize(ctx))
}

func TestGPUBuiltinModule(t *testing.T) {
	b := openGPU(t)
	ctx := timeout(t)
	d := openDevice(t, b, 0)
	m, err := d.LoadModule(ctx, backend.ModuleSource{Name: kernels.ModuleName})
	if errors.Is(err, backend.ErrNotFound) || errors.Is(err, backend.ErrUnavailable) {
		t.Skipf("built-in kernel image unavailable: %v", err)
	}
	require.NoError(t, err)
	closeLater(t, m)
	for _, name := range kernels.KernelNames() {
		_, err := m.Function(name)
		require.NoError(t, err, name)
	}
	_, err = d.LoadModule(ctx, backend.ModuleSource{Name: "no/such/module"})
	require.ErrorIs(t, err, backend.ErrNotFound)
}

func TestGPUStreamOrderingAndEvents(t *testing.T) {
	b := openGPU(t)
	ctx := timeout(t)
	d := openDevice(t, b, 0)
	m := loadTestModule(t, d)
	const words = 1 << 20
	src := gputest.Alloc(t, d, 4*words)
	dst := gputest.Alloc(t, d, 4*words)
	s1, s2 := newStream(t, d), newStream(t, d)
	start, err := d.NewEvent(ctx, true)
	require.NoError(t, err)
	closeLater(t, start)
	end, err := d.NewEvent(ctx, true)
	require.NoError(t, err)
	closeLater(t, end)
	cfg := backend.LaunchConfig{Grid: backend.D1(words / 256), Block: backend.D1(256)}

	// s1: fill, then 10 increments; s2 waits for s1's event, then copies.
	require.NoError(t, s1.Record(start))
	require.NoError(t, s1.Launch(kernelFn(t, m, "fill_u32"), cfg, backend.Ptr(src.Ptr()), backend.U32(100), backend.U64(words)))
	for range 10 {
		require.NoError(t, s1.Launch(kernelFn(t, m, "add_one"), cfg, backend.Ptr(src.Ptr()), backend.U64(words)))
	}
	require.NoError(t, s1.Record(end))
	require.NoError(t, s2.WaitEvent(end))
	require.NoError(t, s2.CopyAsync(dst.Ptr(), src.Ptr(), 4*words))
	require.NoError(t, s2.Synchronize(ctx))
	done, err := end.Done()
	require.NoError(t, err)
	require.True(t, done)
	require.NoError(t, end.Synchronize(ctx))
	got := make([]byte, 4*words)
	require.NoError(t, d.CopyFromDevice(ctx, got, dst.Ptr()))
	for i, v := range u32s(got) {
		if v != 110 {
			require.Equal(t, uint32(110), v, "word %d", i)
		}
	}
	el, err := end.Elapsed(start)
	require.NoError(t, err)
	require.Positive(t, el)
	t.Logf("fill + 10 increments of 4 MiB: %v", el)

	plain, err := d.NewEvent(ctx, false)
	require.NoError(t, err)
	closeLater(t, plain)
	require.NoError(t, s1.Record(plain))
	require.NoError(t, plain.Synchronize(context.Background()))
	_, err = plain.Elapsed(start)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
}

func TestGPUGraphCaptureReplay(t *testing.T) {
	b := openGPU(t)
	ctx := timeout(t)
	d := openDevice(t, b, 0)
	m := loadTestModule(t, d)
	const words = 10000
	a := gputest.Alloc(t, d, 4*words)
	s := newStream(t, d)
	cfg := backend.LaunchConfig{Grid: backend.D1((words + 255) / 256), Block: backend.D1(256)}
	addOne := kernelFn(t, m, "add_one")

	require.NoError(t, s.BeginCapture())
	require.ErrorIs(t, s.BeginCapture(), backend.ErrInvalidArgument)
	for range 3 {
		require.NoError(t, s.Launch(addOne, cfg, backend.Ptr(a.Ptr()), backend.U64(words)))
	}
	g, err := s.EndCapture()
	require.NoError(t, err)
	closeLater(t, g)
	_, err = s.EndCapture()
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	require.NoError(t, s.Synchronize(ctx))

	got := make([]byte, 4*words)
	require.NoError(t, d.CopyFromDevice(ctx, got, a.Ptr()))
	require.Equal(t, make([]byte, 4*words), got, "captured work does not run")

	for range 5 {
		require.NoError(t, g.Launch(s))
	}
	require.NoError(t, s.Synchronize(ctx))
	require.NoError(t, d.CopyFromDevice(ctx, got, a.Ptr()))
	for i, v := range u32s(got) {
		require.Equal(t, uint32(15), v, "word %d", i)
	}

	// Capture from one goroutine and end it from another: relaxed mode
	// does not care which OS thread ends the capture.
	require.NoError(t, s.BeginCapture())
	require.NoError(t, s.Launch(addOne, cfg, backend.Ptr(a.Ptr()), backend.U64(words)))
	type result struct {
		g   backend.Graph
		err error
	}
	ch := make(chan result)
	go func() {
		g, err := s.EndCapture()
		ch <- result{g, err}
	}()
	r := <-ch
	require.NoError(t, r.err)
	closeLater(t, r.g)
	require.NoError(t, r.g.Launch(s))
	require.NoError(t, s.Synchronize(ctx))
	require.NoError(t, d.CopyFromDevice(ctx, got[:4], a.Ptr()))
	require.Equal(t, uint32(16), u32s(got[:4])[0])
}

func TestGPUSynchronizeTimeout(t *testing.T) {
	b := openGPU(t)
	d := openDevice(t, b, 0)
	m := loadTestModule(t, d)
	flag, err := d.AllocHost(context.Background(), 8)
	require.NoError(t, err)
	closeLater(t, flag)
	out := gputest.Alloc(t, d, 4)
	s := newStream(t, d)
	release := func() {
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&flag.Bytes()[0])), 7)
	}
	// However the test ends, let the kernel finish.
	t.Cleanup(release)

	require.NoError(t, s.Launch(kernelFn(t, m, "spin_until"), backend.LaunchConfig{Grid: backend.D1(1), Block: backend.D1(1)},
		backend.Ptr(flag.Ptr()), backend.Ptr(out.Ptr())))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	err = s.Synchronize(ctx)
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(began), 5*time.Second)

	ev, err := d.NewEvent(context.Background(), false)
	require.NoError(t, err)
	closeLater(t, ev)
	require.NoError(t, s.Record(ev))
	done, err := ev.Done()
	require.NoError(t, err)
	require.False(t, done)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	require.ErrorIs(t, ev.Synchronize(ctx2), backend.ErrTimeout)

	release()
	require.NoError(t, s.Synchronize(timeout(t)))
	got := make([]byte, 4)
	require.NoError(t, d.CopyFromDevice(context.Background(), got, out.Ptr()))
	require.Equal(t, uint32(7), u32s(got)[0])
}

// BenchmarkGPULaunchEager times one eager launch through the backend (the
// host's side: the driver's cuLaunchKernel, or cuLaunchKernelEx with the
// early-start attribute that the collectives' launches carry).
func BenchmarkGPULaunchEager(b *testing.B) {
	for _, early := range []bool{false, true} {
		b.Run(fmt.Sprintf("early=%v", early), func(b *testing.B) {
			s, f, args, cfg := benchSetup(b)
			cfg.Early = early
			for b.Loop() {
				if err := s.Launch(f, cfg, args...); err != nil {
					b.Fatal(err)
				}
			}
			require.NoError(b, s.Synchronize(context.Background()))
		})
	}
}

func BenchmarkGPUGraphReplay(b *testing.B) {
	s, f, args, cfg := benchSetup(b)
	require.NoError(b, s.BeginCapture())
	require.NoError(b, s.Launch(f, cfg, args...))
	g, err := s.EndCapture()
	require.NoError(b, err)
	closeLater(b, g)
	for b.Loop() {
		if err := g.Launch(s); err != nil {
			b.Fatal(err)
		}
	}
	require.NoError(b, s.Synchronize(context.Background()))
}

// benchSetup returns a stream and a one-block add_one launch on device 0.
func benchSetup(b *testing.B) (backend.Stream, backend.Function, []backend.Arg, backend.LaunchConfig) {
	be := openGPU(b)
	d := openDevice(b, be, 0)
	m := loadTestModule(b, d)
	a, err := d.Alloc(context.Background(), 4*256)
	require.NoError(b, err)
	closeLater(b, a)
	s := newStream(b, d)
	return s, kernelFn(b, m, "add_one"), []backend.Arg{backend.Ptr(a.Ptr()), backend.U64(256)},
		backend.LaunchConfig{Grid: backend.D1(1), Block: backend.D1(256)}
}

// TestGPUImportStream: a runtime stream handed in from outside Go (the C
// interface's callers) is used as a backend stream, and closing the
// wrapper leaves the runtime stream to its owner.
func TestGPUImportStream(t *testing.T) {
	b := openGPU(t)
	ctx := timeout(t)
	d := openDevice(t, b, 0)
	ns, ok := d.(backend.NativeStreams)
	require.True(t, ok, "the CUDA device has runtime streams")
	owner := newStream(t, d)
	h, ok := ns.NativeStream(owner)
	require.True(t, ok)
	require.NotZero(t, h)
	imported, err := ns.ImportStream(h)
	require.NoError(t, err)
	got, ok := ns.NativeStream(imported)
	require.True(t, ok)
	require.Equal(t, h, got)

	src := gputest.Alloc(t, d, 4096)
	dst := gputest.Alloc(t, d, 4096)
	want := make([]byte, 4096)
	for i := range want {
		want[i] = byte(i * 7)
	}
	require.NoError(t, d.CopyToDevice(ctx, src.Ptr(), want))
	require.NoError(t, imported.CopyAsync(dst.Ptr(), src.Ptr(), 4096))
	require.NoError(t, imported.Synchronize(ctx))
	out := make([]byte, 4096)
	require.NoError(t, d.CopyFromDevice(ctx, out, dst.Ptr()))
	require.Equal(t, want, out)

	// Closing the wrapper does not destroy the runtime stream: its owner
	// still uses it (the driver refuses a destroyed stream).
	require.NoError(t, imported.Close())
	require.NoError(t, owner.CopyAsync(src.Ptr(), dst.Ptr(), 4096))
	require.NoError(t, owner.Synchronize(ctx))
}
