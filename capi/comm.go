package capi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/symmetric/store"
)

// Config is how a Comm is made (intranodeConfig_t).
type Config struct {
	// Backend names the backend ("", "auto": the best one whose probe
	// passes; "fake"; "cuda"; "rocm"; "plugin:PATH"); the process's
	// comms share one instance of each (see Backend).
	Backend string
	// Device is this rank's device index; negative: the rank's index.
	Device int
	// Timeout bounds every wait of the comm: its setup and every call (a
	// peer that dies or stalls makes the call fail within it).
	// collective's default (60 s) when zero.
	Timeout time.Duration
	// BufferSize is the symmetric buffer per rank (collective's default
	// when zero).
	BufferSize int
	// Logger receives the comm's debug logs; silent when nil.
	Logger *slog.Logger
}

// Comm is one rank's communicator of the C interface.
type Comm struct {
	c       *collective.Comm
	st      store.Store
	release func() // the unique id's server, when this process serves it
	timeout time.Duration

	mu      sync.Mutex
	streams map[uintptr]backend.Stream // imported runtime streams, by handle
	owned   map[uintptr]backend.Stream // streams made by NewStream, by token
	allocs  map[uintptr]backend.Allocation
	next    uintptr // the next token NewStream hands out
	failed  error   // the first asynchronous error, sticky
	closed  bool
}

// InitRank makes rank's comm of a group of world ranks that meet through
// the store id names, and rendezvouses it: it returns once every rank has
// joined, or fails within the config's timeout naming the ranks missing.
func InitRank(ctx context.Context, id UniqueID, rank, world int, cfg Config) (*Comm, error) {
	if err := checkRank(rank, world); err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = collective.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, release, err := openStore(ctx, id, store.WithTimeout(timeout))
	if err != nil {
		return nil, err
	}
	c, err := InitWithStore(ctx, st, rank, world, cfg)
	if err != nil {
		_ = st.Close()
		release()
		return nil, err
	}
	c.release = release
	return c, nil
}

// InitWithStore is InitRank for ranks that already share a store (the
// NCCL-API library's, over the NCCL communicator it accelerates). The
// comm takes st over: Destroy closes it.
func InitWithStore(ctx context.Context, st store.Store, rank, world int, cfg Config) (*Comm, error) {
	if err := checkRank(rank, world); err != nil {
		return nil, err
	}
	b, err := Backend(ctx, cfg.Backend)
	if err != nil {
		return nil, err
	}
	opts := collective.Options{Backend: b, Timeout: cfg.Timeout, BufferSize: cfg.BufferSize, Logger: cfg.Logger}
	if cfg.Device >= 0 {
		dev := cfg.Device
		opts.Device = &dev
	}
	cc, err := collective.New(st, rank, world, opts)
	if err != nil {
		return nil, err
	}
	if err := cc.Rendezvous(ctx); err != nil {
		_ = cc.Close()
		return nil, fmt.Errorf("intranode: rank %d of %d: %w", rank, world, err)
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = collective.DefaultTimeout
	}
	return &Comm{c: cc, st: st, release: func() {}, timeout: timeout,
		streams: map[uintptr]backend.Stream{}, owned: map[uintptr]backend.Stream{}, allocs: map[uintptr]backend.Allocation{}}, nil
}

func checkRank(rank, world int) error {
	if world < 1 || rank < 0 || rank >= world {
		return backend.Errorf(backend.CodeInvalidArgument, "intranode: rank %d of %d ranks: want 0 <= rank < nranks", rank, world)
	}
	return nil
}

// Rank is the comm's rank.
func (c *Comm) Rank() int { return c.c.Rank() }

// World is the number of ranks.
func (c *Comm) World() int { return c.c.World() }

// NativeStreams reports whether stream arguments are the backend
// runtime's streams; without them, calls on stream 0 run on the comm's
// own default stream, which only SyncStream can wait for.
func (c *Comm) NativeStreams() bool {
	_, ok := c.c.Device().(backend.NativeStreams)
	return ok
}

// Device is the index of the comm's device.
func (c *Comm) Device() int { return c.c.Device().Index() }

// Collective is the comm under this one.
func (c *Comm) Collective() *collective.Comm { return c.c }

// usable fails once the comm is destroyed or has failed.
func (c *Comm) usable() error {
	if c.closed {
		return backend.Errorf(backend.CodeClosed, "intranode: the comm was destroyed or aborted")
	}
	if c.failed != nil {
		return fmt.Errorf("intranode: the comm failed earlier (destroy it and make a new one): %w", c.failed)
	}
	return nil
}

// stream resolves a stream argument: a token NewStream handed out, else
// the backend's runtime stream h (0: the default stream), imported once
// and kept. On a backend without runtime streams, 0 is a stream of the
// comm's own, made at first use.
func (c *Comm) stream(h uintptr) (backend.Stream, error) {
	if s, ok := c.owned[h]; ok {
		return s, nil
	}
	if s, ok := c.streams[h]; ok {
		return s, nil
	}
	ns, ok := c.c.Device().(backend.NativeStreams)
	if !ok && h == 0 {
		// No runtime streams: NULL is the comm's own default stream.
		s, err := c.c.Device().NewStream(context.Background())
		if err != nil {
			return nil, err
		}
		c.streams[0] = s
		return s, nil
	}
	if !ok {
		return nil, backend.Errorf(backend.CodeInvalidArgument,
			"intranode: stream %#x: the %s backend has no runtime streams; pass a stream made by intranodeStreamCreate", h, c.c.Backend().Name())
	}
	s, err := ns.ImportStream(h)
	if err != nil {
		return nil, err
	}
	c.streams[h] = s
	return s, nil
}

// NewStream makes a stream of the comm's device and returns its handle:
// the runtime's stream where the backend has one, otherwise a token that
// only this comm's calls understand.
func (c *Comm) NewStream(ctx context.Context) (uintptr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return 0, err
	}
	s, err := c.c.Device().NewStream(ctx)
	if err != nil {
		return 0, err
	}
	h, ok := uintptr(0), false
	if ns, isNative := c.c.Device().(backend.NativeStreams); isNative {
		h, ok = ns.NativeStream(s)
	}
	if !ok {
		c.next += 16
		h = c.next
	}
	c.owned[h] = s
	return h, nil
}

// syncGrace is how long past the comm's timeout SyncStream waits.
const syncGrace = time.Second

// SyncStream waits for the work queued on stream h, within the comm's
// timeout and a second, and reports the comm's asynchronous error if the wait failed.
func (c *Comm) SyncStream(ctx context.Context, h uintptr) error {
	c.mu.Lock()
	s, err := c.stream(h)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	// The comm's kernels give up on a peer at the comm's timeout and then
	// report it in the status AsyncError reads; the wait allows them a
	// second more to do so.
	ctx, cancel := context.WithTimeout(ctx, c.timeout+syncGrace)
	defer cancel()
	if err := s.Synchronize(ctx); err != nil {
		if aerr := c.AsyncError(); aerr != nil {
			return aerr
		}
		return err
	}
	return c.AsyncError()
}

// DestroyStream releases a stream NewStream made.
func (c *Comm) DestroyStream(h uintptr) error {
	c.mu.Lock()
	s, ok := c.owned[h]
	delete(c.owned, h)
	c.mu.Unlock()
	if !ok {
		return backend.Errorf(backend.CodeInvalidArgument, "intranode: stream %#x was not made by this comm's intranodeStreamCreate", h)
	}
	return s.Close()
}

// Alloc allocates size bytes of the comm's device and returns the device
// pointer.
func (c *Comm) Alloc(ctx context.Context, size int) (uintptr, error) {
	if size <= 0 {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "intranode: allocation of %d bytes", size)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(); err != nil {
		return 0, err
	}
	a, err := c.c.Device().Alloc(ctx, size)
	if err != nil {
		return 0, err
	}
	p := uintptr(a.Ptr())
	c.allocs[p] = a
	return p, nil
}

// Free releases memory Alloc returned.
func (c *Comm) Free(p uintptr) error {
	c.mu.Lock()
	a, ok := c.allocs[p]
	delete(c.allocs, p)
	c.mu.Unlock()
	if !ok {
		return backend.Errorf(backend.CodeInvalidArgument, "intranode: %#x was not allocated by this comm's intranodeMemAlloc", p)
	}
	return a.Close()
}

// AsyncError returns the comm's first asynchronous failure (a kernel that
// timed out waiting for a peer, ranks that made different calls), nil
// while there is none. It does not wait.
func (c *Comm) AsyncError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed != nil {
		return c.failed
	}
	if c.closed {
		return nil
	}
	if err := c.c.CheckStatus(); err != nil {
		c.failed = err
	}
	return c.failed
}

// Destroy releases everything the comm holds. It does not wait for peers;
// on a GPU it waits for the comm's collectives still running, as
// ncclCommDestroy does (collective.Comm.Close).
func (c *Comm) Destroy() error { return c.destroy(false) }

// Abort is Destroy that first stops the comm's collectives still waiting
// for a peer (collective.Comm.Interrupt), as ncclCommAbort does.
func (c *Comm) Abort() error { return c.destroy(true) }

// Interrupt stops the comm's collectives still waiting for a peer
// (collective.Comm.Interrupt); their outputs are undefined, and every
// later call fails. Destroy still releases the comm.
func (c *Comm) Interrupt() { c.c.Interrupt() }

func (c *Comm) destroy(abort bool) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	if abort {
		// Before the streams, whose closing waits for their work.
		c.Interrupt()
	}
	var errs []error
	for _, s := range c.streams {
		errs = append(errs, s.Close())
	}
	for _, s := range c.owned {
		errs = append(errs, s.Close())
	}
	for _, a := range c.allocs {
		errs = append(errs, a.Close())
	}
	c.streams, c.owned, c.allocs = nil, nil, nil
	c.mu.Unlock()
	errs = append(errs, c.c.Close(), c.st.Close())
	c.release()
	return errors.Join(errs...)
}
