package symmetric

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/internal/closing"
	"github.com/intranode/intranode/kernels"
	"github.com/intranode/intranode/symmetric/store"
)

// Memory is a symmetric allocation after rendezvous: every rank's buffer and
// signal pad mapped into this process. Its methods are safe for concurrent
// use; signal operations run in order on one internal stream.
type Memory struct {
	dev   backend.Device
	name  string
	rank  int
	world int
	size  int
	span  int
	opts  options

	local backend.Allocation
	peers []backend.Allocation

	bufs    []backend.DevicePtr
	pads    []backend.DevicePtr
	devPtrs backend.Allocation // [bufs..., pads...] as uint64, for kernels
	status  backend.HostAllocation
	module  backend.Module
	fnBar   backend.Function
	// fnConfirm is kernels.ConfirmKernel.
	fnConfirm backend.Function
	fnPut     backend.Function
	fnWait    backend.Function

	mu     sync.Mutex // serialises signal operations and Close
	stream backend.Stream
	// life guards closed and what Close frees for Confirm, which must not
	// wait behind a signal operation holding mu (a Barrier waits there
	// for its peers). Close holds both; mu comes first.
	life   sync.RWMutex
	closed bool

	// launchEx is set when ranks of the group share a device: see
	// Launch.
	launchEx *store.Exchange
}

// SharesDevice reports whether ranks of the group share a device
// (collective.Options.AllowOverlap: testing only).
func (m *Memory) SharesDevice() bool { return m.launchEx != nil }

// Launch runs launch, which launches a kernel that waits for all its
// peers (an all-reduce, a barrier of the whole group). When ranks of the
// group share a device, every rank meets every other right before its
// launch and right after it: their kernels run in one context, where a
// rank inside a driver call that waits for the context's work (allocating,
// freeing, pinning memory, a synchronous copy) holds up a peer's launch,
// and so its own kernel, spinning for that peer, never ends. Meeting before
// is not enough: a rank that has launched may go on to such a call while a
// peer has yet to launch. Otherwise launch runs alone. Every rank must make
// the same launches, as collectives require anyway; a rank whose launch
// fails still meets its peers after it, so that they do not wait for it.
func (m *Memory) Launch(ctx context.Context, launch func() error) error {
	if m.launchEx == nil {
		return launch()
	}
	// A call without a deadline gets the group's timeout here too.
	ctx, cancel := context.WithTimeout(ctx, TimeoutFor(ctx, m.opts.timeout))
	defer cancel()
	if _, err := m.launchEx.AllGather(ctx, nil); err != nil {
		return fmt.Errorf("symmetric: group %q: waiting for the ranks sharing a device before a launch: %w", m.name, err)
	}
	err := launch()
	if _, xerr := m.launchEx.AllGather(ctx, nil); xerr != nil && err == nil {
		err = fmt.Errorf("symmetric: group %q: waiting for the ranks sharing a device after a launch: %w", m.name, xerr)
	}
	return err
}

// setup builds what kernels need once every peer is mapped.
func (m *Memory) setup(ctx context.Context, module *moduleLoad) error {
	m.bufs = make([]backend.DevicePtr, m.world)
	m.pads = make([]backend.DevicePtr, m.world)
	for r := 0; r < m.world; r++ {
		a := m.local
		if r != m.rank {
			a = m.peers[r]
		}
		m.bufs[r] = a.Ptr()
		m.pads[r] = a.Ptr().Add(m.span)
	}
	table := make([]byte, 16*m.world)
	for r := 0; r < m.world; r++ {
		binary.LittleEndian.PutUint64(table[8*r:], uint64(m.bufs[r]))
		binary.LittleEndian.PutUint64(table[8*(m.world+r):], uint64(m.pads[r]))
	}
	var err error
	if m.devPtrs, err = m.dev.Alloc(ctx, len(table)); err != nil {
		return fmt.Errorf("allocating pointer table: %w", err)
	}
	if err = m.dev.CopyToDevice(ctx, m.devPtrs.Ptr(), table); err != nil {
		return fmt.Errorf("writing pointer table: %w", err)
	}
	if m.status, err = m.dev.AllocHost(ctx, 64); err != nil {
		return fmt.Errorf("allocating status word: %w", err)
	}
	if m.module, err = module.take(); err != nil {
		return fmt.Errorf("loading kernels: %w", err)
	}
	for _, f := range []struct {
		dst  *backend.Function
		name string
	}{{&m.fnBar, kernels.BarrierKernel}, {&m.fnPut, kernels.PutSignalKernel}, {&m.fnWait, kernels.WaitSignalKernel},
		{&m.fnConfirm, kernels.ConfirmKernel}} {
		if *f.dst, err = m.module.Function(f.name); err != nil {
			return err
		}
	}
	if m.stream, err = m.dev.NewStream(ctx); err != nil {
		return fmt.Errorf("creating stream: %w", err)
	}
	return nil
}

// Module is the device's built-in kernel module (kernels.ModuleName), loaded
// once by the rendezvous; it stays valid until Close.
func (m *Memory) Module() backend.Module { return m.module }

// Name is the group name the memory was rendezvoused under.
func (m *Memory) Name() string { return m.name }

// Rank is this process's rank in the group.
func (m *Memory) Rank() int { return m.rank }

// World is the group size.
func (m *Memory) World() int { return m.world }

// BufferSize is each rank's buffer size in bytes.
func (m *Memory) BufferSize() int { return m.size }

// SignalPadSize is each rank's signal pad size in bytes.
func (m *Memory) SignalPadSize() int { return kernels.SignalPadSize }

// Device is the device the memory lives on (this rank's).
func (m *Memory) Device() backend.Device { return m.dev }

// Buffer returns rank r's buffer as mapped in this process.
func (m *Memory) Buffer(r int) backend.DevicePtr { return m.bufs[r] }

// SignalPad returns rank r's signal pad as mapped in this process.
func (m *Memory) SignalPad(r int) backend.DevicePtr { return m.pads[r] }

// BufferTable is a device array of World uint64 buffer addresses, in rank
// order, for kernels (kernels.AllReduceArgs.Bufs).
func (m *Memory) BufferTable() backend.DevicePtr { return m.devPtrs.Ptr() }

// SignalPadTable is a device array of World uint64 signal-pad addresses
// (kernels.AllReduceArgs.Pads).
func (m *Memory) SignalPadTable() backend.DevicePtr { return m.devPtrs.Ptr().Add(8 * m.world) }

// View is a typed window on one rank's buffer.
type View struct {
	Ptr   backend.DevicePtr
	Count int
	DType backend.DType
}

// Bytes is the view's length in bytes.
func (v View) Bytes() int { return v.Count * v.DType.Size() }

// GetBuffer returns a view of count elements of dtype at byte offset off of
// rank r's buffer; it fails if the window does not fit in the buffer or is
// not aligned to the element size.
func (m *Memory) GetBuffer(r, count int, dtype backend.DType, off int) (View, error) {
	if r < 0 || r >= m.world {
		return View{}, backend.Errorf(backend.CodeInvalidArgument, "symmetric: rank %d out of range [0,%d)", r, m.world)
	}
	if !dtype.Valid() {
		return View{}, backend.Errorf(backend.CodeInvalidArgument, "symmetric: invalid dtype %v", dtype)
	}
	if n, ok := dtype.Bytes(count); !ok || off < 0 || off%dtype.Size() != 0 || off > m.size || n > m.size-off {
		return View{}, backend.Errorf(backend.CodeInvalidArgument,
			"symmetric: view of %d %v at offset %d does not fit a %d-byte buffer", count, dtype, off, m.size)
	}
	return View{Ptr: m.bufs[r].Add(off), Count: count, DType: dtype}, nil
}

// Barrier waits until every rank of the group has reached a Barrier on the
// same channel. It runs on the device (a barrier kernel) and returns an
// error matching backend.ErrTimeout, naming the rank that did not arrive,
// when ctx's deadline (or the default timeout) passes first.
func (m *Memory) Barrier(ctx context.Context, channel int) error {
	return m.signal(ctx, "barrier", m.fnBar, -1, channel, m.allMask())
}

// Confirm enqueues on s, after a call through the vendor library, the
// barrier of every rank that confirms the call (kernels.ConfirmKernel, on
// kernels.ConfirmChannel) and returns. status is the caller's pair of
// host-mapped words: the status word, where a rank that has not confirmed
// by timeoutNs is reported, then kernels.FailedWord, which the caller sets
// before it aborts its vendor communicator so that this rank confirms
// nothing after that. It does not wait behind a Barrier or a signal that
// another goroutine has running on the memory.
func (m *Memory) Confirm(ctx context.Context, s backend.Stream, status backend.DevicePtr, timeoutNs uint64) error {
	m.life.RLock()
	defer m.life.RUnlock()
	if m.closed {
		return backend.Errorf(backend.CodeClosed, "symmetric: confirm on closed memory")
	}
	if err := ctx.Err(); err != nil {
		return backend.Wrap(backend.CodeTimeout, err, "symmetric: confirm")
	}
	return m.launchSignal(s, m.fnConfirm, "confirm", kernels.SignalArgs{Channel: kernels.ConfirmChannel, Mask: m.allMask(),
		Status: status, TimeoutNs: timeoutNs})
}

// launchSignal launches the signal kernel fn (one block of 32 threads) on
// s with args, whose group fields (pads, rank, world) it fills in; op
// names the operation in an error.
func (m *Memory) launchSignal(s backend.Stream, fn backend.Function, op string, args kernels.SignalArgs) error {
	args.Pads, args.Rank, args.World = m.SignalPadTable(), uint32(m.rank), uint32(m.world)
	if err := s.Launch(fn, backend.LaunchConfig{Grid: backend.D1(1), Block: backend.D1(32)}, args.Args()...); err != nil {
		return fmt.Errorf("symmetric: %s: %w", op, err)
	}
	return nil
}

// PutSignal signals rank dst on the channel.
func (m *Memory) PutSignal(ctx context.Context, dst, channel int) error {
	return m.signal(ctx, "put signal", m.fnPut, dst, channel, 0)
}

// WaitSignal waits for a signal from rank src on the channel.
func (m *Memory) WaitSignal(ctx context.Context, src, channel int) error {
	return m.signal(ctx, "wait signal", m.fnWait, src, channel, 0)
}

// BarrierRanks is Barrier among a subset of ranks; every listed rank must
// call it with the same set.
func (m *Memory) BarrierRanks(ctx context.Context, channel int, ranks []int) error {
	var mask uint32
	for _, r := range ranks {
		if r < 0 || r >= m.world {
			return backend.Errorf(backend.CodeInvalidArgument, "symmetric: barrier rank %d out of range [0,%d)", r, m.world)
		}
		mask |= 1 << r
	}
	if mask&(1<<m.rank) == 0 {
		return backend.Errorf(backend.CodeInvalidArgument, "symmetric: rank %d calls a barrier it is not part of", m.rank)
	}
	return m.signal(ctx, "barrier", m.fnBar, -1, channel, mask)
}

func (m *Memory) allMask() uint32 { return uint32(1)<<m.world - 1 }

func (m *Memory) signal(ctx context.Context, op string, fn backend.Function, peer, channel int, mask uint32) error {
	w, err := m.signalStatus(ctx, op, fn, peer, channel, mask)
	if err != nil {
		return err
	}
	return StatusWordError(w, fmt.Sprintf("symmetric %s (group %q rank %d)", op, m.name, m.rank))
}

// signalStatus runs a signal kernel and returns the status word it left
// (taken, so cleared).
func (m *Memory) signalStatus(ctx context.Context, op string, fn backend.Function, peer, channel int, mask uint32) (uint32, error) {
	if channel < 0 || channel >= kernels.NumChannels {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "symmetric: channel %d out of range [0,%d)", channel, kernels.NumChannels)
	}
	if mask == 0 && (peer < 0 || peer >= m.world || peer == m.rank) {
		return 0, backend.Errorf(backend.CodeInvalidArgument, "symmetric: %s peer %d invalid for rank %d of %d", op, peer, m.rank, m.world)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, backend.Errorf(backend.CodeClosed, "symmetric: %s on closed memory", op)
	}
	timeout := TimeoutFor(ctx, m.opts.timeout)
	launch := func() error {
		return m.launchSignal(m.stream, fn, op, kernels.SignalArgs{Peer: uint32(max(peer, 0)), Channel: uint32(channel),
			Mask: mask, Status: m.status.Ptr(), TimeoutNs: uint64(timeout)})
	}
	// A barrier among all ranks meets them around its launch (Launch); a
	// subset's barrier and a signal between two ranks do not (the other
	// ranks make no matching call).
	var err error
	if mask == m.allMask() {
		err = m.Launch(ctx, launch)
	} else {
		err = launch()
	}
	if err != nil {
		return 0, err
	}
	// The kernel gives up at its own deadline; allow the host a little
	// longer so the kernel's status, not the host's impatience, says why.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout+5*time.Second)
	defer cancel()
	if err := m.stream.Synchronize(sctx); err != nil {
		return 0, fmt.Errorf("symmetric: %s: %w", op, err)
	}
	return TakeStatus(m.status.Bytes()), nil
}

// TimeoutFor is the device-side wait bound for a call: the time left before
// ctx's deadline, or def when ctx has none.
func TimeoutFor(ctx context.Context, def time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return def
}

// StatusError reads and clears a kernel status word (the first 4 bytes of
// word) and turns a failure into an error.
func StatusError(word []byte, what string) error {
	return StatusWordError(TakeStatus(word), what)
}

// TakeStatus reads and clears a kernel status word (host-mapped memory that
// kernels update with compare-and-swap from 0).
func TakeStatus(word []byte) uint32 { return atomicSwapStatus(word) }

// StatusWordError turns a status word already taken into an error naming
// what failed: nil for 0, backend.ErrTimeout naming the rank that did not
// arrive, backend.ErrInvalidArgument for rejected arguments.
func StatusWordError(w uint32, what string) error {
	if w == 0 {
		return nil
	}
	code, peer, ch := kernels.DecodeStatus(w)
	switch code {
	case kernels.StatusTimeout:
		return backend.Errorf(backend.CodeTimeout, "%s: rank %d did not arrive on channel %d before the deadline", what, peer, ch)
	case kernels.StatusBadArgs:
		return backend.Errorf(backend.CodeInvalidArgument, "%s: kernel rejected its arguments", what)
	case kernels.StatusMismatch:
		return backend.Errorf(backend.CodeInvalidArgument, "%s: rank %d made a different call (channel %d)", what, peer, ch)
	case kernels.StatusClosed:
		return backend.Errorf(backend.CodeClosed, "%s: closed while the call ran", what)
	default:
		return backend.Errorf(backend.CodeInternal, "%s: kernel status %#x", what, w)
	}
}

// Close unmaps every peer's buffer and frees this rank's block. It does not
// synchronise with peers: call Barrier first if they may still be reading.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.life.Lock()
	defer m.life.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	var errs []error
	if m.launchEx != nil {
		ctx, cancel := context.WithTimeout(context.Background(), m.opts.timeout)
		errs = append(errs, m.launchEx.Close(ctx))
		cancel()
	}
	if m.stream != nil {
		errs = append(errs, m.stream.Close())
	}
	if m.module != nil {
		errs = append(errs, m.module.Close())
	}
	if m.status != nil {
		errs = append(errs, m.status.Close())
	}
	if m.devPtrs != nil {
		errs = append(errs, m.devPtrs.Close())
	}
	errs = append(errs, m.closePeers())
	return errors.Join(errs...)
}

func (m *Memory) closePeers() error {
	var errs []error
	for r, p := range m.peers {
		if p != nil {
			errs = append(errs, p.Close())
			m.peers[r] = nil
		}
	}
	errs = closing.Field(errs, &m.local)
	return errors.Join(errs...)
}

func dupFD(fd, size int) (backend.Handle, error) {
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return backend.Handle{}, err
	}
	return backend.Handle{Kind: backend.HandleFD, File: os.NewFile(uintptr(nfd), "symm-peer"), Size: size}, nil
}
