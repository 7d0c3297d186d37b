//go:build cuda

package cuda

import (
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu/gputest"
)

// Environment of the child process in TestGPUShareableChildProcess.
const (
	envShareChild  = "INTRANODE_CUDA_TEST_SHARE_CHILD"
	envShareDevice = "INTRANODE_CUDA_TEST_SHARE_DEVICE"
	envShareSize   = "INTRANODE_CUDA_TEST_SHARE_SIZE"
)

func TestGPUAllocAndCopy(t *testing.T) {
	b := openGPU(t)
	ctx := timeout(t)
	d := openDevice(t, b, 0)
	const n = 1<<20 + 12
	a := gputest.Alloc(t, d, n)
	require.Equal(t, n, a.Size())
	require.NotZero(t, a.Ptr())

	got := make([]byte, n)
	require.NoError(t, d.CopyFromDevice(ctx, got, a.Ptr()))
	require.Equal(t, make([]byte, n), got, "new memory is zeroed")

	want := pattern(n, 3)
	require.NoError(t, d.CopyToDevice(ctx, a.Ptr(), want))
	require.NoError(t, d.CopyFromDevice(ctx, got, a.Ptr()))
	require.Equal(t, want, got)

	require.NoError(t, d.Memset(ctx, a.Ptr().Add(100), 0xee, 50))
	require.NoError(t, d.CopyFromDevice(ctx, got[:200], a.Ptr()))
	for i := range 200 {
		if i >= 100 && i < 150 {
			require.Equal(t, byte(0xee), got[i], "byte %d", i)
		} else {
			require.Equal(t, want[i], got[i], "byte %d", i)
		}
	}

	b2 := gputest.Alloc(t, d, n)
	s := newStream(t, d)
	require.NoError(t, s.CopyAsync(b2.Ptr(), a.Ptr(), n))
	require.NoError(t, s.Synchronize(ctx))
	got2 := make([]byte, n)
	require.NoError(t, d.CopyFromDevice(ctx, got2, b2.Ptr()))
	require.NoError(t, d.CopyFromDevice(ctx, got, a.Ptr()))
	require.Equal(t, got, got2)

	_, err := d.Alloc(ctx, 0)
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	_, err = a.Export(backend.HandleFD)
	require.ErrorIs(t, err, backend.ErrNotSupported)
	_, err = d.Alloc(ctx, 1<<62)
	require.ErrorIs(t, err, backend.ErrOutOfMemory)
	var de *DriverError
	require.True(t, errors.As(err, &de))
	require.Equal(t, "CUDA_ERROR_OUT_OF_MEMORY", de.Name)
}

func TestGPUShareableSameProcess(t *testing.T) {
	b := openGPU(t)
	ctx := timeout(t)
	n, err := b.DeviceCount(ctx)
	require.NoError(t, err)
	d := openDevice(t, b, 0)
	g := d.Granularity()
	require.Positive(t, g)
	// Open the devices that can reach device 0 before allocating: the
	// allocation is mapped for the devices this process has open.
	peers := map[int]backend.Device{}
	for j := 1; j < n; j++ {
		ok, err := b.PeerAccess(ctx, j, 0)
		require.NoError(t, err)
		if ok {
			peers[j] = openDevice(t, b, j)
		} else {
			t.Logf("device %d cannot access device 0; leaving it out", j)
		}
	}

	a, err := d.AllocShareable(ctx, 1000, backend.HandleFD)
	require.NoError(t, err)
	closeLater(t, a)
	require.Equal(t, g, a.Size(), "rounded up to the granularity")
	got := make([]byte, a.Size())
	require.NoError(t, d.CopyFromDevice(ctx, got, a.Ptr()))
	require.Equal(t, make([]byte, a.Size()), got, "new shareable memory is zeroed")
	want := pattern(a.Size(), 11)
	require.NoError(t, d.CopyToDevice(ctx, a.Ptr(), want))

	h, err := a.Export(backend.HandleFD)
	require.NoError(t, err)
	require.NotNil(t, h.File)
	defer h.File.Close()
	require.Equal(t, a.Size(), h.Size)
	_, err = a.Export(backend.HandleFabric)
	require.ErrorIs(t, err, backend.ErrNotSupported)

	// Import on the same device: a second mapping of the same memory.
	imp, err := d.Import(ctx, h)
	require.NoError(t, err)
	closeLater(t, imp)
	require.NotEqual(t, a.Ptr(), imp.Ptr())
	require.NoError(t, d.CopyFromDevice(ctx, got, imp.Ptr()))
	require.Equal(t, want, got)
	_, err = imp.Export(backend.HandleFD)
	require.ErrorIs(t, err, backend.ErrNotSupported)

	// Import on every other device that can reach device 0.
	for j, dj := range peers {
		pj, err := dj.Import(ctx, h)
		require.NoError(t, err)
		require.NoError(t, dj.CopyFromDevice(ctx, got, pj.Ptr()))
		require.Equal(t, want, got, "device %d reads device 0's memory", j)
		require.NoError(t, dj.Memset(ctx, pj.Ptr(), 0x42, 64))
		require.NoError(t, pj.Close())
		require.NoError(t, d.CopyFromDevice(ctx, got[:64], a.Ptr()))
		require.Equal(t, bytesOf(0x42, 64), got[:64], "device 0 sees device %d's write", j)
		require.NoError(t, d.CopyToDevice(ctx, a.Ptr(), want[:64]))

		// The original mapping is open to peers too: device j can use
		// the pointer directly.
		sj := newStream(t, dj)
		scratch, err := dj.Alloc(ctx, 64)
		require.NoError(t, err)
		require.NoError(t, sj.CopyAsync(scratch.Ptr(), a.Ptr(), 64))
		require.NoError(t, sj.Synchronize(ctx))
		require.NoError(t, dj.CopyFromDevice(ctx, got[:64], scratch.Ptr()))
		require.Equal(t, want[:64], got[:64])
		require.NoError(t, scratch.Close())
	}

	_, err = d.Import(ctx, backend.Handle{Kind: backend.HandleFD, File: h.File, Size: g + 1})
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
	_, err = d.Import(ctx, backend.Handle{Kind: backend.HandleFD, Size: g})
	require.ErrorIs(t, err, backend.ErrInvalidArgument)
}

func bytesOf(v byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = v
	}
	return b
}

func TestGPUShareableChildProcess(t *testing.T) {
	b := openGPU(t)
	ctx := timeout(t)
	d := openDevice(t, b, 0)
	a, err := d.AllocShareable(ctx, 3*d.Granularity()/2, backend.HandleFD)
	require.NoError(t, err)
	closeLater(t, a)
	want := pattern(a.Size(), 29)
	require.NoError(t, d.CopyToDevice(ctx, a.Ptr(), want))
	h, err := a.Export(backend.HandleFD)
	require.NoError(t, err)
	defer h.File.Close()

	gputest.RunChildWith(t, gputest.Child{Env: []string{envShareChild + "=1", envShareDevice + "=0", envShareSize + "=" + strconv.Itoa(h.Size)},
		Files: []*os.File{h.File}}, "TestGPUShareableChild") // h.File is fd 3 in the child

	// The child overwrote the first KiB with 0x77.
	got := make([]byte, a.Size())
	require.NoError(t, d.CopyFromDevice(ctx, got, a.Ptr()))
	require.Equal(t, bytesOf(0x77, 1024), got[:1024])
	require.Equal(t, want[1024:], got[1024:])
}

// TestGPUShareableChild is the child half of TestGPUShareableChildProcess:
// it imports the descriptor at fd 3, checks the parent's pattern and writes
// its own.
func TestGPUShareableChild(t *testing.T) {
	if os.Getenv(envShareChild) == "" {
		t.Skip("runs only as TestGPUShareableChildProcess' child process")
	}
	dev, err := strconv.Atoi(os.Getenv(envShareDevice))
	require.NoError(t, err)
	size, err := strconv.Atoi(os.Getenv(envShareSize))
	require.NoError(t, err)
	b := openGPU(t)
	ctx := timeout(t)
	d := openDevice(t, b, dev)
	f := os.NewFile(3, "shared")
	defer f.Close()
	a, err := d.Import(ctx, backend.Handle{Kind: backend.HandleFD, File: f, Size: size})
	require.NoError(t, err)
	got := make([]byte, size)
	require.NoError(t, d.CopyFromDevice(ctx, got, a.Ptr()))
	require.Equal(t, pattern(size, 29), got)
	require.NoError(t, d.Memset(ctx, a.Ptr(), 0x77, 1024))
	require.NoError(t, a.Close())
}

func TestGPUHostMappedKernel(t *testing.T) {
	b := openGPU(t)
	ctx := timeout(t)
	d := openDevice(t, b, 0)
	const words = 1000
	h, err := d.AllocHost(ctx, 4*words)
	require.NoError(t, err)
	closeLater(t, h)
	require.Equal(t, make([]byte, 4*words), h.Bytes(), "new host memory is zeroed")
	for i := range words {
		binary.LittleEndian.PutUint32(h.Bytes()[4*i:], uint32(i))
	}
	m := loadTestModule(t, d)
	s := newStream(t, d)
	require.NoError(t, s.Launch(kernelFn(t, m, "add_one"), backend.LaunchConfig{Grid: backend.D1(4), Block: backend.D1(256)},
		backend.Ptr(h.Ptr()), backend.U64(words)))
	require.NoError(t, s.Synchronize(ctx))
	for i, v := range u32s(h.Bytes()) {
		require.Equal(t, uint32(i+1), v, "word %d", i)
	}
	_, err = h.Export(backend.HandleFD)
	require.ErrorIs(t, err, backend.ErrNotSupported)
}

func TestGPUCheckRange(t *testing.T) {
	gputest.CheckRange(t, openGPU(t))
}

// BenchmarkGPUCheckRange times one range check of a call's buffer
// (collective's argument check): of the device's own allocation (no
// driver call) and of one made through another handle, as a caller's
// tensor is (cuMemGetAddressRange). Run with:
//
//	go test -c -tags cuda -o .gpu/cuda.test ./backend/cuda
//	.gpu/cuda.test -test.run '^$' -test.bench GPUCheckRange -test.benchtime 200000x
func BenchmarkGPUCheckRange(b *testing.B) {
	be := openGPU(b)
	d := openDevice(b, be, 0)
	rc := d.(backend.RangeChecker)
	own := gputest.Alloc(b, d, 1<<20)
	foreign := gputest.Alloc(b, openDevice(b, be, 0), 1<<20)
	for _, tc := range []struct {
		name string
		p    backend.DevicePtr
	}{{"own", own.Ptr()}, {"foreign", foreign.Ptr()}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if err := rc.CheckRange(tc.p.Add(1024), 4096); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
