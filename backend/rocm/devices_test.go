//go:build rocm

package rocm

// Cases that run the same on the fake runtime (TestFake…, in CI) and on an
// AMD GPU (TestGPU…, gpu_test.go): everything the backend does through the
// runtime that a GPU can do without a peer.

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu/gputest"
	"github.com/intranode/intranode/kernels"
)

func TestFakeAllocCopyAndHost(t *testing.T) {
	testAllocCopyAndHost(t, openFake(t, newFakeHIP(1), xgmiBox(1)))
}

func TestFakeBuiltinModuleAndLaunch(t *testing.T) {
	testBuiltinModuleAndLaunch(t, openFake(t, newFakeHIP(1), xgmiBox(1)))
}

func TestFakeStreamsEventsGraphs(t *testing.T) {
	testStreamsEventsGraphs(t, openFake(t, newFakeHIP(1), xgmiBox(1)))
}

func TestFakeSynchronizeTimesOut(t *testing.T) {
	testSynchronizeTimesOut(t, openFake(t, newFakeHIP(1), xgmiBox(1)))
}

func testAllocCopyAndHost(t *testing.T, b *Backend) {
	ctx := context.Background()
	d := openDev(t, b, 0)
	a := gputest.Alloc(t, d, 4096)
	want := pattern(4096, 3)
	require.NoError(t, d.CopyToDevice(ctx, a.Ptr(), want))
	got := make([]byte, 4096)
	require.NoError(t, d.CopyFromDevice(ctx, got, a.Ptr()))
	require.Equal(t, want, got)
	require.NoError(t, d.Memset(ctx, a.Ptr().Add(100), 0xee, 10))
	require.NoError(t, d.CopyFromDevice(ctx, got, a.Ptr()))
	require.Equal(t, byte(0xee), got[105])
	_, err := a.Export(backend.HandleFD)
	require.ErrorIs(t, err, backend.ErrNotSupported)

	hm, err := d.AllocHost(ctx, 64)
	require.NoError(t, err)
	closeLater(t, hm)
	require.Len(t, hm.Bytes(), 64)
	hm.Bytes()[7] = 42
	require.NoError(t, d.CopyFromDevice(ctx, got[:8], hm.Ptr()))
	require.Equal(t, byte(42), got[7])
}

func testBuiltinModuleAndLaunch(t *testing.T, b *Backend) {
	ctx := context.Background()
	d := openDev(t, b, 0)
	m := gputest.BuiltinModule(t, d)
	_, err := m.Function("no_such_kernel")
	require.ErrorIs(t, err, backend.ErrNotFound)
	put, err := m.Function(kernels.PutSignalKernel)
	require.NoError(t, err)
	require.Equal(t, kernels.PutSignalKernel, put.Name())

	// World 1: rank 0 signals itself on channel 5; its pad says so.
	pad := gputest.Alloc(t, d, kernels.SignalPadSize)
	table := gputest.Alloc(t, d, 8)
	var ptr [8]byte
	binary.LittleEndian.PutUint64(ptr[:], uint64(pad.Ptr()))
	require.NoError(t, d.CopyToDevice(ctx, table.Ptr(), ptr[:]))
	status, err := d.AllocHost(ctx, 4)
	require.NoError(t, err)
	closeLater(t, status)
	s, err := d.NewStream(ctx)
	require.NoError(t, err)
	args := kernels.SignalArgs{Pads: table.Ptr(), Rank: 0, World: 1, Peer: 0, Channel: 5, Status: status.Ptr(), TimeoutNs: uint64(time.Second)}
	cfg := backend.LaunchConfig{Grid: backend.D1(1), Block: backend.D1(32)}
	require.NoError(t, s.Launch(put, cfg, args.Args()...))
	require.NoError(t, s.Launch(put, cfg, args.Args()...))
	require.NoError(t, s.Synchronize(ctx))
	words := make([]byte, 4)
	require.NoError(t, d.CopyFromDevice(ctx, words, pad.Ptr().Add(kernels.InboxWord(5, 0))))
	require.Equal(t, []uint32{2}, u32s(words))
	require.Zero(t, binary.LittleEndian.Uint32(status.Bytes()))

	require.NoError(t, s.Close())

	// An all-reduce of one rank (the 12-argument launch): the output is the
	// input, through the one-shot kernel's LL path.
	oneShot, err := m.Function(kernels.KernelName(kernels.OneShot, backend.Float32))
	require.NoError(t, err)
	const count = 1000
	in := gputest.Alloc(t, d, 4*count)
	out := gputest.Alloc(t, d, 4*count)
	buf := gputest.Alloc(t, d, 4*count)
	bufs := gputest.Alloc(t, d, 8)
	binary.LittleEndian.PutUint64(ptr[:], uint64(buf.Ptr()))
	require.NoError(t, d.CopyToDevice(ctx, bufs.Ptr(), ptr[:]))
	want := pattern(4*count, 1)
	require.NoError(t, d.CopyToDevice(ctx, in.Ptr(), want))
	s2, err := d.NewStream(ctx)
	require.NoError(t, err)
	closeLater(t, s2)
	ar := kernels.AllReduceArgs{Bufs: bufs.Ptr(), Pads: table.Ptr(), Input: in.Ptr(), Output: out.Ptr(), Count: count,
		Rank: 0, World: 1, DType: backend.Float32, Op: backend.Sum, Status: status.Ptr(), TimeoutNs: uint64(time.Second)}
	require.NoError(t, s2.Launch(oneShot, backend.LaunchConfig{Grid: backend.D1(1), Block: backend.D1(512)}, ar.Args()...))
	require.NoError(t, s2.Synchronize(ctx))
	require.Zero(t, binary.LittleEndian.Uint32(status.Bytes()), "status word")
	got := make([]byte, 4*count)
	require.NoError(t, d.CopyFromDevice(ctx, got, out.Ptr()))
	require.Equal(t, want, got)
}

func testStreamsEventsGraphs(t *testing.T, b *Backend) {
	ctx := context.Background()
	d := openDev(t, b, 0)
	src := gputest.Alloc(t, d, 1024)
	dst := gputest.Alloc(t, d, 1024)
	require.NoError(t, d.CopyToDevice(ctx, src.Ptr(), pattern(1024, 9)))
	s, err := d.NewStream(ctx)
	require.NoError(t, err)
	closeLater(t, s)
	start, err := d.NewEvent(ctx, true)
	require.NoError(t, err)
	closeLater(t, start)
	end, err := d.NewEvent(ctx, true)
	require.NoError(t, err)
	closeLater(t, end)

	require.NoError(t, s.BeginCapture())
	require.ErrorIs(t, s.BeginCapture(), backend.ErrInvalidArgument)
	require.NoError(t, s.CopyAsync(dst.Ptr(), src.Ptr(), 1024))
	g, err := s.EndCapture()
	require.NoError(t, err)
	closeLater(t, g)
	_, err = s.EndCapture()
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	got := make([]byte, 1024)
	require.NoError(t, d.CopyFromDevice(ctx, got, dst.Ptr()))
	require.Equal(t, make([]byte, 1024), got, "captured work does not run")

	require.NoError(t, s.Record(start))
	require.NoError(t, g.Launch(s))
	require.NoError(t, s.Record(end))
	require.NoError(t, end.Synchronize(ctx))
	done, err := end.Done()
	require.NoError(t, err)
	require.True(t, done)
	el, err := end.Elapsed(start)
	require.NoError(t, err)
	require.GreaterOrEqual(t, el, time.Duration(0))
	require.NoError(t, d.CopyFromDevice(ctx, got, dst.Ptr()))
	require.Equal(t, pattern(1024, 9), got)

	other, err := d.NewStream(ctx)
	require.NoError(t, err)
	closeLater(t, other)
	require.NoError(t, other.WaitEvent(end))
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, other.Synchronize(tctx))

	plain, err := d.NewEvent(ctx, false)
	require.NoError(t, err)
	closeLater(t, plain)
	_, err = plain.Elapsed(start)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	require.NoError(t, s.CopyAsync(dst.Ptr(), src.Ptr(), 0))
	require.ErrorIs(t, s.CopyAsync(dst.Ptr(), src.Ptr(), -1), backend.ErrInvalidArgument)
}

func testSynchronizeTimesOut(t *testing.T, b *Backend) {
	ctx := context.Background()
	d := openDev(t, b, 0)
	m := gputest.BuiltinModule(t, d)
	wait, err := m.Function(kernels.WaitSignalKernel)
	require.NoError(t, err)
	pad := gputest.Alloc(t, d, kernels.SignalPadSize)
	table := gputest.Alloc(t, d, 16)
	var ptrs [16]byte
	binary.LittleEndian.PutUint64(ptrs[:], uint64(pad.Ptr()))
	binary.LittleEndian.PutUint64(ptrs[8:], uint64(pad.Ptr()))
	require.NoError(t, d.CopyToDevice(ctx, table.Ptr(), ptrs[:]))
	status, err := d.AllocHost(ctx, 4)
	require.NoError(t, err)
	closeLater(t, status)
	s, err := d.NewStream(ctx)
	require.NoError(t, err)
	closeLater(t, s)
	// Rank 0 of 2 waits 300 ms for a signal nobody sends.
	args := kernels.SignalArgs{Pads: table.Ptr(), Rank: 0, World: 2, Peer: 1, Channel: 0, Status: status.Ptr(), TimeoutNs: uint64(300 * time.Millisecond)}
	require.NoError(t, s.Launch(wait, backend.LaunchConfig{Grid: backend.D1(1), Block: backend.D1(32)}, args.Args()...))
	tctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	err = s.Synchronize(tctx)
	require.ErrorIs(t, err, backend.ErrTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, s.Synchronize(context.Background()))
	code, peer, _ := kernels.DecodeStatus(binary.LittleEndian.Uint32(status.Bytes()))
	require.Equal(t, kernels.StatusTimeout, code)
	require.Equal(t, 1, peer)
}

func TestFakeCheckRange(t *testing.T) {
	gputest.CheckRange(t, openFake(t, newFakeHIP(1), xgmiBox(1)))
}
