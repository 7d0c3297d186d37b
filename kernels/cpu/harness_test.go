package cpu

import (
	"context"
	"encoding/binary"
	"os"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/race"
	"github.com/intranode/intranode/kernels"
)

// testMem is a Memory over heap slices at synthetic device addresses:
// allocation k lives at 1<<40 + k<<32. Allocate everything before kernels
// run; Bytes only reads the region list.
type testMem struct {
	regions []region
}

type region struct {
	base backend.DevicePtr
	b    []byte
}

// alloc returns a zeroed, 16-byte aligned allocation of n bytes.
func (m *testMem) alloc(n int) (backend.DevicePtr, []byte) {
	raw := make([]byte, n+16)
	off := int(-uintptr(unsafe.Pointer(&raw[0])) & 15)
	b := raw[off : off+n]
	p := backend.DevicePtr(1<<40 + uint64(len(m.regions))<<32)
	m.regions = append(m.regions, region{base: p, b: b})
	return p, b
}

func (m *testMem) Bytes(p backend.DevicePtr, n int) ([]byte, error) {
	for _, r := range m.regions {
		if p >= r.base && p < r.base+backend.DevicePtr(len(r.b)) {
			off := int(p - r.base)
			if n < 0 || n > len(r.b)-off {
				return nil, backend.Errorf(backend.CodeInvalidArgument, "test memory: [%#x, +%d) overruns its allocation", uint64(p), n)
			}
			return r.b[off : off+n : off+n], nil
		}
	}
	return nil, backend.Errorf(backend.CodeInvalidArgument, "test memory: %#x is not allocated", uint64(p))
}

// group is world ranks' symmetric buffers, signal pads, status words and
// private input/output buffers, all in one testMem.
type group struct {
	mem      *testMem
	world    int
	bufSize  int
	bufs     []backend.DevicePtr
	bufBytes [][]byte
	pads     []backend.DevicePtr
	padBytes [][]byte
	bufTable backend.DevicePtr
	padTable backend.DevicePtr
	status   []backend.DevicePtr
	statBuf  [][]byte
	in, out  []backend.DevicePtr
	inBytes  [][]byte
	outBytes [][]byte
}

func newGroup(world, bufSize int) *group {
	g := &group{mem: &testMem{}, world: world, bufSize: bufSize}
	for range world {
		p, b := g.mem.alloc(bufSize)
		g.bufs, g.bufBytes = append(g.bufs, p), append(g.bufBytes, b)
		p, b = g.mem.alloc(kernels.SignalPadSize)
		g.pads, g.padBytes = append(g.pads, p), append(g.padBytes, b)
		p, b = g.mem.alloc(4)
		g.status, g.statBuf = append(g.status, p), append(g.statBuf, b)
		p, b = g.mem.alloc(bufSize)
		g.in, g.inBytes = append(g.in, p), append(g.inBytes, b)
		p, b = g.mem.alloc(bufSize)
		g.out, g.outBytes = append(g.out, p), append(g.outBytes, b)
	}
	var tb []byte
	g.bufTable, tb = g.mem.alloc(8 * world)
	for r, p := range g.bufs {
		binary.LittleEndian.PutUint64(tb[8*r:], uint64(p))
	}
	g.padTable, tb = g.mem.alloc(8 * world)
	for r, p := range g.pads {
		binary.LittleEndian.PutUint64(tb[8*r:], uint64(p))
	}
	return g
}

// statusOf reads and clears rank r's status word (ranks have joined).
func (g *group) statusOf(r int) uint32 {
	w := binary.LittleEndian.Uint32(g.statBuf[r])
	clear(g.statBuf[r])
	return w
}

// signalArgs are SignalArgs for rank r with a long timeout.
func (g *group) signalArgs(r int) kernels.SignalArgs {
	return kernels.SignalArgs{Pads: g.padTable, Rank: uint32(r), World: uint32(g.world), Status: g.status[r],
		TimeoutNs: uint64(20 * time.Second)}
}

// allReduceArgs are AllReduceArgs for rank r with a long timeout.
func (g *group) allReduceArgs(r int, in, out backend.DevicePtr, count int, d backend.DType, op backend.ReduceOp) kernels.AllReduceArgs {
	return kernels.AllReduceArgs{Bufs: g.bufTable, Pads: g.padTable, Input: in, Output: out, Count: uint64(count),
		Rank: uint32(r), World: uint32(g.world), DType: d, Op: op, Status: g.status[r], TimeoutNs: uint64(20 * time.Second)}
}

// runRanks runs fn for every rank in ranks on its own goroutine and returns
// the errors by rank.
func runRanks(ranks []int, fn func(r int) error) map[int]error {
	var mu sync.Mutex
	errs := map[int]error{}
	var wg sync.WaitGroup
	for _, r := range ranks {
		wg.Go(func() {
			err := fn(r)
			mu.Lock()
			errs[r] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return errs
}

func allRanks(world int) []int {
	rs := make([]int, world)
	for r := range rs {
		rs[r] = r
	}
	return rs
}

// requireClean checks that every rank returned nil and left its status
// word at 0.
func (g *group) requireClean(t *testing.T, errs map[int]error, what string) {
	t.Helper()
	for r, err := range errs {
		require.NoError(t, err, "%s: rank %d", what, r)
		w := g.statusOf(r)
		code, peer, ch := kernels.DecodeStatus(w)
		require.Zero(t, w, "%s: rank %d status code %d peer %d channel %d", what, r, code, peer, ch)
	}
}

// testCtx bounds a test so that a broken kernel fails it instead of
// hanging; no assertion depends on how long anything takes.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func hcmExtra(r int) uint64 {
	base := r &^ 3
	var quad [3]int
	i := 0
	for p := base; p < base+4; p++ {
		if p != r {
			quad[i] = p
			i++
		}
	}
	return kernels.PackHCM(quad, r^4, 0)
}

func TestMain(m *testing.M) {
	race.ShareCores()
	os.Exit(m.Run())
}
