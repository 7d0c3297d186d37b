package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/connectivity"
	"github.com/intranode/intranode/internal/numeric"
)

// canary is the byte pattern written around every buffer a case hands to a
// kernel; an out-of-bounds write changes it and fails the case.
const (
	canary     = 0xA5
	canarySize = 256
)

// commOptions are the options every case's comm starts from: device = rank
// (modulo the device count when the backend lets ranks share devices).
func commOptions(ctx context.Context, e *Env, bufferSize int) (collective.Options, error) {
	n, err := e.Backend.DeviceCount(ctx)
	if err != nil {
		return collective.Options{}, err
	}
	dev := e.Rank
	overlap := false
	switch {
	case e.ShareDevice:
		dev, overlap = 0, true
	case e.World > n:
		if !e.Backend.Capabilities().Has(backend.CapOverlapDevices) {
			return collective.Options{}, Skip("world %d exceeds the %d devices", e.World, n)
		}
		dev, overlap = e.Rank%n, true
	}
	return collective.Options{Backend: e.Backend, Device: &dev, AllowOverlap: overlap, BufferSize: bufferSize,
		Timeout: e.Timeout}, nil
}

// newComm creates and rendezvouses a comm for the rank.
func newComm(ctx context.Context, e *Env, bufferSize int) (*collective.Comm, error) {
	opts, err := commOptions(ctx, e, bufferSize)
	if err != nil {
		return nil, err
	}
	c, err := collective.New(e.Store, e.Rank, e.World, opts)
	if err != nil {
		return nil, err
	}
	if err := c.Rendezvous(ctx); err != nil {
		_ = c.Close()
		if errors.Is(err, collective.ErrTopology) && !connectivity.ForcedFullyConnected() {
			return nil, Skip("the devices of this world are refused: %v", err)
		}
		return nil, err
	}
	return c, nil
}

// closeComm waits for every rank, then closes.
func closeComm(ctx context.Context, c *collective.Comm) error {
	berr := c.Barrier(ctx)
	return errors.Join(berr, c.Close())
}

// guarded is device memory with canaries on both sides of the usable part:
// an allocation of its own, or a range of memory the case holds (the
// symmetric buffer). The host buffers it hands out (host, read) are lent
// by the run's pool and go back to it at close: they are the caller's
// until then.
type guarded struct {
	dev   backend.Device
	alloc backend.Allocation // nil: at lies in memory guarded does not own
	at    backend.DevicePtr  // the canary before the usable part
	n     int
	pool  *hostPool
	lent  [][]byte
}

func newGuarded(ctx context.Context, e *Env, dev backend.Device, n int) (*guarded, error) {
	a, err := dev.Alloc(ctx, n+2*canarySize)
	if err != nil {
		return nil, err
	}
	g, err := newGuardedAt(ctx, e, dev, a.Ptr(), n)
	if err != nil {
		_ = a.Close()
		return nil, err
	}
	g.alloc = a
	return g, nil
}

// newGuardedAt guards the n bytes at at+canarySize, with its canaries in
// the canarySize bytes on either side; the caller keeps the memory.
func newGuardedAt(ctx context.Context, e *Env, dev backend.Device, at backend.DevicePtr, n int) (*guarded, error) {
	if err := dev.Memset(ctx, at, canary, n+2*canarySize); err != nil {
		return nil, err
	}
	return &guarded{dev: dev, at: at, n: n, pool: e.pool}, nil
}

// newPatterned is a guarded buffer of count elements of d holding this
// rank's pattern for seed (numeric.Pattern), and that pattern on the host.
func newPatterned(ctx context.Context, e *Env, dev backend.Device, d backend.DType, count, seed int) (*guarded, []byte, error) {
	g, err := newGuarded(ctx, e, dev, count*d.Size())
	if err != nil {
		return nil, nil, err
	}
	host := g.host(count * d.Size())
	numeric.Pattern(d, host, count, e.Rank, seed)
	if err := g.write(ctx, host); err != nil {
		_ = g.close()
		return nil, nil, err
	}
	return g, host, nil
}

// host returns n zeroed host bytes, the caller's until g is closed.
func (g *guarded) host(n int) []byte {
	b := g.pool.get(n)
	g.lent = append(g.lent, b)
	return b
}

// unchanged fails when the buffer no longer holds want (a call that must
// leave its input alone wrote to it); what names the call.
func (g *guarded) unchanged(ctx context.Context, want []byte, what fmt.Stringer) error {
	back, err := g.read(ctx)
	if err != nil {
		return err
	}
	if !bytes.Equal(back, want) {
		return fmt.Errorf("%v modified its input", what)
	}
	return nil
}

func (g *guarded) ptr() backend.DevicePtr { return g.at.Add(canarySize) }

func (g *guarded) write(ctx context.Context, b []byte) error {
	return g.dev.CopyToDevice(ctx, g.ptr(), b[:g.n])
}

// read copies the usable part to a new host buffer (g.host).
func (g *guarded) read(ctx context.Context) ([]byte, error) {
	out := g.host(g.n)
	return out, g.dev.CopyFromDevice(ctx, out, g.ptr())
}

// checkCanaries fails if anything wrote outside the usable part.
func (g *guarded) checkCanaries(ctx context.Context) error {
	side := make([]byte, canarySize)
	for _, before := range []bool{true, false} {
		at := g.at.Add(canarySize + g.n)
		if before {
			at = g.at
		}
		if err := g.dev.CopyFromDevice(ctx, side, at); err != nil {
			return err
		}
		for i, v := range side {
			if v == canary {
				continue
			}
			if before {
				return fmt.Errorf("canary overwritten %d bytes before a %d-byte buffer", canarySize-i, g.n)
			}
			return fmt.Errorf("canary overwritten %d bytes after a %d-byte buffer", i+1, g.n)
		}
	}
	return nil
}

func (g *guarded) close() error {
	g.pool.put(g.lent)
	g.lent = nil
	if g.alloc == nil {
		return nil
	}
	return g.alloc.Close()
}

// hostPool keeps the host buffers of checked calls (inputs, results read
// back, expected values) for the calls after them: one pool serves every
// rank and case of a run in this process. Under the race detector, every
// new allocation over 64 KiB gets new shadow memory, and each of its pages
// faults when first touched: with new buffers for every call, those faults
// took about a fifth of the suite's time on the fake (2-core development
// machine, 2026-11-27). Safe for concurrent use.
type hostPool struct {
	mu   sync.Mutex
	free [][]byte
}

// maxPooled bounds how many buffers a pool keeps.
const maxPooled = 32

// get returns n zeroed bytes: the smallest kept buffer that holds them, or
// a new one. A nil pool keeps nothing.
func (p *hostPool) get(n int) []byte {
	if p == nil {
		return make([]byte, n)
	}
	p.mu.Lock()
	best := -1
	for i, b := range p.free {
		if cap(b) >= n && (best < 0 || cap(b) < cap(p.free[best])) {
			best = i
		}
	}
	var b []byte
	if best >= 0 {
		b = p.free[best]
		p.free = slices.Delete(p.free, best, best+1)
	}
	p.mu.Unlock()
	if b == nil {
		// Room to the next power of two, so that the slightly larger
		// sizes of a sweep reuse it too.
		return make([]byte, n, 1<<bits.Len(uint(n-1)))
	}
	b = b[:n]
	clear(b)
	return b
}

// put gives buffers back; past maxPooled the smallest are dropped.
func (p *hostPool) put(bufs [][]byte) {
	if p == nil || len(bufs) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free = append(p.free, bufs...)
	if len(p.free) > maxPooled {
		slices.SortFunc(p.free, func(a, b []byte) int { return cap(b) - cap(a) })
		clear(p.free[maxPooled:])
		p.free = p.free[:maxPooled]
	}
}

// checkResult compares an all-reduce result with the exact expected values.
func (e *Env) checkResult(d backend.DType, op backend.ReduceOp, got []byte, count, seed int) error {
	want := e.expected.get(expectKey{coll: collective.OpAllReduce, d: d, op: op, count: count, world: e.World, seed: seed}, func() []byte {
		b := make([]byte, count*d.Size())
		numeric.Expected(d, op, b, count, e.World, seed)
		return b
	})
	if wrong, first := numeric.Compare(d, got, want, count); wrong > 0 {
		return fmt.Errorf("%d of %d elements wrong; first at %v", wrong, count, first)
	}
	return nil
}

// expectations lets the ranks of a case that run as goroutines of one
// process compute each expected result that every rank shares (all-reduce,
// all-gather, broadcast) once instead of once per rank: the first rank to ask
// computes it, the others wait for it, and the last of the ranks drops it.
// A nil *expectations computes every result for its caller alone.
type expectations struct {
	ranks int
	mu    sync.Mutex
	m     map[expectKey]*expectation
}

type expectKey struct {
	coll                     collective.Op
	d                        backend.DType
	op                       backend.ReduceOp
	count, world, seed, root int
}

type expectation struct {
	once sync.Once
	b    []byte
	left int // ranks yet to take it
}

func newExpectations(ranks int) *expectations {
	return &expectations{ranks: ranks, m: map[expectKey]*expectation{}}
}

// get returns the result for k, computed by compute once for all ranks.
// The bytes are shared: callers only read them.
func (x *expectations) get(k expectKey, compute func() []byte) []byte {
	if x == nil || x.ranks < 2 {
		return compute()
	}
	x.mu.Lock()
	ex, ok := x.m[k]
	if !ok {
		ex = &expectation{left: x.ranks}
		x.m[k] = ex
	}
	ex.left--
	if ex.left == 0 {
		delete(x.m, k)
	}
	x.mu.Unlock()
	ex.once.Do(func() { ex.b = compute() })
	return ex.b
}

// closeInto closes c when a case returns, after the case's own buffers
// (deferred later, so released first), joining any error into *err.
func closeInto(err *error, c *collective.Comm) {
	*err = errors.Join(*err, c.Close())
}

// withComm runs f on a comm of bufferSize bytes rendezvoused for the case,
// then meets the other ranks (a Barrier, so that no rank closes while a
// peer still reads its buffer) and closes the comm. The case's error joins
// Close's.
func withComm(ctx context.Context, e *Env, bufferSize int, f func(c *collective.Comm) error) (err error) {
	c, err := newComm(ctx, e, bufferSize)
	if err != nil {
		return err
	}
	defer closeInto(&err, c)
	if err := f(c); err != nil {
		return err
	}
	return c.Barrier(ctx)
}
