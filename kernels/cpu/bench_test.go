package cpu

import (
	"fmt"
	"testing"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/kernels"
)

// BenchmarkAllReduce measures one all-reduce of every rank (goroutines on
// this machine's cores), mostly synchronisation cost for small counts and
// reduction throughput for large ones.
func BenchmarkAllReduce(b *testing.B) {
	for _, ac := range []algoCase{{kernels.OneShot, 2}, {kernels.TwoShot, 2}, {kernels.OneShot, 8}, {kernels.TwoShot, 8}, {kernels.HCM, 8},
		{kernels.Pipeline, 2}, {kernels.Pipeline, 8}} {
		for _, count := range []int{1, 1 << 10, 1 << 15, 1 << 18} {
			d := backend.BFloat16
			b.Run(fmt.Sprintf("%s/world%d/%v/%d", ac.algo, ac.world, d, count), func(b *testing.B) {
				g := newGroup(ac.world, max(4*count*d.Size(), 4096))
				fn := AllReduce(ac.algo, d)
				ctx := b.Context()
				b.SetBytes(int64(count * d.Size()))
				for b.Loop() {
					errs := runRanks(allRanks(ac.world), func(r int) error {
						a := g.allReduceArgs(r, g.in[r], g.out[r], count, d, backend.Sum)
						if ac.algo == kernels.HCM {
							a.Extra = hcmExtra(r)
						}
						return fn(ctx, g.mem, backend.LaunchConfig{}, a.Args())
					})
					for _, err := range errs {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// BenchmarkCopy is the CPU's limit for the fake backend: a plain copy of
// the same bytes an all-reduce moves, for docs/PERFORMANCE.md.
func BenchmarkCopy(b *testing.B) {
	for _, n := range []int{1 << 10, 64 << 10, 1 << 20, 4 << 20} {
		src := make([]byte, n)
		dst := make([]byte, n)
		b.Run(fmt.Sprintf("bytes=%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				copy(dst, src)
			}
		})
	}
}

// BenchmarkReduce measures the element loop alone: two or eight sources of
// 1 Mi elements into a separate destination, every dtype, sum and max.
func BenchmarkReduce(b *testing.B) {
	const n = 1 << 20
	for _, d := range []backend.DType{backend.BFloat16, backend.Float16, backend.Float32, backend.Float64, backend.Int32} {
		for _, op := range []backend.ReduceOp{backend.Sum, backend.Max} {
			for _, k := range []int{2, 8} {
				srcs := make([][]byte, k)
				for i := range srcs {
					srcs[i] = make([]byte, n*d.Size())
				}
				dst := make([]byte, n*d.Size())
				b.Run(fmt.Sprintf("%v/%v/srcs=%d", d, op, k), func(b *testing.B) {
					b.SetBytes(int64(n * d.Size()))
					for b.Loop() {
						reduce(d, op, dst, srcs)
					}
				})
			}
		}
	}
}
