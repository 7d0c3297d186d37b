//go:build cuda

package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu/gputest"
	"github.com/intranode/intranode/internal/numeric"
	"github.com/intranode/intranode/kernels"
	"github.com/intranode/intranode/kernels/cpu"
)

// builtinModule loads the built-in kernel image ($INTRANODE_CUDA_KERNELS
// when set) on d, or skips.
func builtinModule(t testing.TB, d backend.Device) backend.Module {
	m, err := d.LoadModule(context.Background(), backend.ModuleSource{Name: kernels.ModuleName})
	if errors.Is(err, backend.ErrNotFound) || errors.Is(err, backend.ErrUnavailable) {
		t.Skipf("built-in kernel image unavailable: %v", err)
	}
	require.NoError(t, err)
	closeLater(t, m)
	return m
}

// divideLaunch is a launch of the division kernel over n bytes with a
// block per `per` bytes, at most maxBlocks blocks.
func divideLaunch(n, per, maxBlocks int) backend.LaunchConfig {
	return backend.LaunchConfig{Grid: backend.D1(uint32(max(1, min((n+per-1)/per, maxBlocks)))), Block: backend.D1(512), Early: true}
}

// cpuMem is cpu.Memory over host slices at the device addresses they
// stand for.
type cpuMem map[backend.DevicePtr][]byte

func (m cpuMem) Bytes(p backend.DevicePtr, n int) ([]byte, error) {
	for base, b := range m {
		if p >= base && int(p-base)+n <= len(b) {
			return b[p-base : int(p-base)+n], nil
		}
	}
	return nil, fmt.Errorf("%#x not mapped", uint64(p))
}

// extremes are values at the ends of the floating types' ranges: zeros,
// subnormals of each type, the smallest normals, the largest finite
// values, infinities. Where the quotient of one of them is subnormal, or
// one rounds to such a value, the kernel's result must still be the
// correctly rounded quotient.
var extremes = []float64{0, math.Copysign(0, -1), 1e-45, -3e-45, 1e-40, -1.17549435e-38, 9.2e-41, 6e-8, -6.1e-5,
	3.4e38, -3.4e38, 65504, -65504, 5e-324, -1e-310, 2.2250738585072014e-308, 1.7e308, math.Inf(1), math.Inf(-1)}

// TestGPUDivide runs the division kernel (kernels.Divide) on the GPU for
// every dtype and divisor, in place and out of place, at an offset that
// leaves the vectors misaligned, with extremes among random values, and
// requires the bits the Go kernel of
// the fake backend (kernels/cpu) computes from the same input, with
// collective's grid and with two blocks, whose threads each take several
// rounds of loads.
func TestGPUDivide(t *testing.T) {
	b := openGPU(t)
	ctx := timeout(t)
	d := openDevice(t, b, 0)
	m := builtinModule(t, d)
	s := newStream(t, d)
	rng := rand.New(rand.NewPCG(3, 5))
	const count = 70001
	for _, dt := range backend.DTypes {
		size := dt.Size()
		fn := kernelFn(t, m, kernels.KernelName(kernels.Divide, dt))
		host := make([]byte, (count+1)*size)
		vals := make([]float64, count+1)
		for i := range vals {
			vals[i] = (rng.Float64()*2 - 1) * 1e4
			if dt != backend.Int32 && i%97 == 5 {
				vals[i] = extremes[(i/97)%len(extremes)]
			}
		}
		numeric.Encode(dt, host, vals)
		in := gputest.Alloc(t, d, len(host))
		out := gputest.Alloc(t, d, len(host))
		for world := uint32(1); world <= kernels.MaxRanks; world++ {
			for _, shape := range []struct{ shift, blocks int }{{0, 1024}, {1, 1024}, {0, 2}} {
				shift := shape.shift
				for _, inPlace := range []bool{false, true} {
					require.NoError(t, d.CopyToDevice(ctx, in.Ptr(), host))
					require.NoError(t, d.CopyToDevice(ctx, out.Ptr(), make([]byte, len(host))))
					src := in.Ptr().Add(shift * size)
					dst := out.Ptr().Add(shift * size)
					if inPlace {
						dst = src
					}
					args := kernels.AllReduceArgs{Input: src, Output: dst, Count: count, World: world, DType: dt}
					require.NoError(t, s.Launch(fn, divideLaunch(count*size, 8<<10, shape.blocks), args.Args()...))
					require.NoError(t, s.Synchronize(ctx))
					got := make([]byte, len(host))
					src2 := out
					if inPlace {
						src2 = in
					}
					require.NoError(t, d.CopyFromDevice(ctx, got, src2.Ptr()))

					want := append([]byte(nil), host...)
					wantOut := make([]byte, len(host))
					wantDst := wantOut
					if inPlace {
						wantDst = want
					}
					mem := cpuMem{1 << 40: want, 2 << 40: wantOut}
					cin, cout := backend.DevicePtr(1<<40+shift*size), backend.DevicePtr(2<<40+shift*size)
					if inPlace {
						cout = cin
					}
					cargs := kernels.AllReduceArgs{Input: cin, Output: cout, Count: count, World: world, DType: dt}
					require.NoError(t, cpu.Divide(dt)(ctx, mem, backend.LaunchConfig{}, cargs.Args()))
					if wrong, first := numeric.Compare(dt, got, wantDst, count+1); wrong > 0 {
						t.Fatalf("%v world %d %+v in place %v: %d wrong, first %v", dt, world, shape, inPlace, wrong, first)
					}
				}
			}
		}
	}
}

// BenchmarkGPUDivide times the division kernel over bf16 buffers of
// 1 KiB to 256 MiB, with a block per 8 to 64 KiB and at most 256 to 2048
// blocks (the sweep behind collective's divideConfig), dividing by 2 (a
// multiplication by the exact reciprocal) and, with collective's grid, by
// 3 (a true division): graph replays of
// 20 launches, as an average's second half runs in a captured training
// step; ns/launch is one launch. Run with:
//
//	go test -c -tags cuda -o .gpu/cuda.test ./backend/cuda
//	.gpu/cuda.test -test.run '^$' -test.bench GPUDivide -test.benchtime 50x
func BenchmarkGPUDivide(b *testing.B) {
	be := openGPU(b)
	d := openDevice(b, be, 0)
	m := builtinModule(b, d)
	s := newStream(b, d)
	fn := kernelFn(b, m, kernels.KernelName(kernels.Divide, backend.BFloat16))
	buf := gputest.Alloc(b, d, 256<<20)
	type grid struct{ per, max int }
	for _, n := range []int{1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20} {
		for _, gr := range []grid{{64 << 10, 256}, {8 << 10, 256}, {8 << 10, 1024}, {8 << 10, 2048}, {16 << 10, 1024}, {32 << 10, 1024}, {4 << 10, 1024}} {
			if n <= 1<<10 && gr.per != 64<<10 {
				continue // one block whatever the policy
			}
			divideBench(b, s, fn, buf.Ptr(), n, gr.per, gr.max, 2)
		}
		divideBench(b, s, fn, buf.Ptr(), n, 8<<10, 1024, 3) // a true division
	}
}

// divideBench is one size and grid of BenchmarkGPUDivide.
func divideBench(b *testing.B, s backend.Stream, fn backend.Function, buf backend.DevicePtr, n, per, maxBlocks int, world uint32) {
	b.Run(fmt.Sprintf("%dB/per%dK/max%d/world%d", n, per>>10, maxBlocks, world), func(b *testing.B) {
		const chain = 20
		args := kernels.AllReduceArgs{Input: buf, Output: buf, Count: uint64(n / 2), World: world, DType: backend.BFloat16}
		require.NoError(b, s.BeginCapture())
		for range chain {
			require.NoError(b, s.Launch(fn, divideLaunch(n, per, maxBlocks), args.Args()...))
		}
		g, err := s.EndCapture()
		require.NoError(b, err)
		defer g.Close()
		require.NoError(b, g.Launch(s))
		require.NoError(b, s.Synchronize(context.Background()))
		start := time.Now()
		for b.Loop() {
			if err := g.Launch(s); err != nil {
				b.Fatal(err)
			}
		}
		require.NoError(b, s.Synchronize(context.Background()))
		perLaunch := float64(time.Since(start).Nanoseconds()) / float64(b.N*chain)
		b.ReportMetric(perLaunch, "ns/launch")
		b.ReportMetric(float64(2*n)/perLaunch, "GB/s")
	})
}
