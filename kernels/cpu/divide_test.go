package cpu

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/numeric"
	"github.com/intranode/intranode/kernels"
)

// TestDivide checks the division kernel element by element against the
// quotient computed here in float64 and rounded once to the element type
// (exactly the kernel's result: a float32 quotient of values that fit
// float32 rounds the same way), in place and out of place, at every
// divisor, on counts that leave a tail.
func TestDivide(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, d := range backend.DTypes {
		for world := 1; world <= kernels.MaxRanks; world++ {
			for _, inPlace := range []bool{false, true} {
				const count = 1003
				m := &testMem{}
				size := d.Size()
				in, inB := m.alloc(count * size)
				out, outB := in, inB
				if !inPlace {
					out, outB = m.alloc(count * size)
				}
				st, stB := m.alloc(4)
				vals := make([]float64, count)
				for i := range vals {
					vals[i] = math.Round((rng.Float64()*2-1)*1e4) / 8
					if i == 0 {
						vals[i] = -7 // int32 division toward zero: -7/2 = -3
					}
				}
				numeric.Encode(d, inB, vals)
				want := make([]float64, count)
				for i := range want {
					x := numeric.Get(d, inB, i)
					if d == backend.Int32 {
						want[i] = float64(int32(x) / int32(world))
						continue
					}
					q := make([]byte, size)
					numeric.Put(d, q, 0, x/float64(world))
					want[i] = numeric.Get(d, q, 0)
				}
				args := kernels.AllReduceArgs{Input: in, Output: out, Count: count, World: uint32(world), DType: d, Status: st}
				require.NoError(t, Divide(d)(context.Background(), m, backend.LaunchConfig{}, args.Args()))
				require.Zero(t, binary.LittleEndian.Uint32(stB), "status")
				for i := range want {
					require.Equal(t, want[i], numeric.Get(d, outB, i), "%v world %d in place %v element %d (%g)", d, world, inPlace, i, vals[i])
				}
			}
		}
	}
}

// TestDivideBadArgs: a division the kernel cannot run stores the bad
// arguments status and changes nothing.
func TestDivideBadArgs(t *testing.T) {
	m := &testMem{}
	buf, b := m.alloc(64)
	b[0] = 1
	st, stB := m.alloc(4)
	for name, a := range map[string]kernels.AllReduceArgs{
		"divisor 0":    {Input: buf, Output: buf, Count: 4, World: 0, DType: backend.Float32, Status: st},
		"divisor 9":    {Input: buf, Output: buf, Count: 4, World: 9, DType: backend.Float32, Status: st},
		"dtype":        {Input: buf, Output: buf, Count: 4, World: 2, DType: backend.Int32, Status: st},
		"misaligned":   {Input: buf + 2, Output: buf + 2, Count: 4, World: 2, DType: backend.Float32, Status: st},
		"past the end": {Input: buf, Output: buf, Count: 17, World: 2, DType: backend.Float32, Status: st},
	} {
		binary.LittleEndian.PutUint32(stB, 0)
		err := Divide(backend.Float32)(context.Background(), m, backend.LaunchConfig{}, a.Args())
		require.ErrorIs(t, err, backend.ErrInvalidArgument, name)
		code, _, _ := kernels.DecodeStatus(binary.LittleEndian.Uint32(stB))
		require.Equal(t, kernels.StatusBadArgs, code, name)
		require.Equal(t, byte(1), b[0], name)
	}
}
