package ncclapi

/*
#cgo CFLAGS: -I${SRCDIR}
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "nccl_decl.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/capi"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/internal/ncclboot"
)

// Environment variables (docs/NCCL.md).
const (
	// EnvSwitch set to off, 0 or false forwards everything (read by the C
	// side).
	EnvSwitch = "INTRANODE_NCCL"
	// EnvDebug is INFO (a line per communicator: accelerated or not, and
	// why) or TRACE (and a line per call).
	EnvDebug = "INTRANODE_NCCL_DEBUG"
	// EnvBackend names intranode's backend ("auto" when unset).
	EnvBackend = "INTRANODE_NCCL_BACKEND"
	// EnvTimeoutMs bounds the bootstrap and every accelerated call's wait
	// for a peer, in milliseconds (DefaultTimeout when unset).
	EnvTimeoutMs = "INTRANODE_NCCL_TIMEOUT_MS"
)

// DefaultTimeout bounds the bootstrap and every accelerated call's wait for
// a peer when INTRANODE_NCCL_TIMEOUT_MS is unset: PyTorch's default for
// NCCL process groups. NCCL itself waits without bound, so a shorter limit
// would fail jobs whose ranks drift apart for minutes (one rank compiling
// or saving a checkpoint while the others wait in a collective) that run
// under NCCL alone.
const DefaultTimeout = 10 * time.Minute

// settings are read from the environment once.
type settings struct {
	backend string
	timeout time.Duration
	log     *slog.Logger // INFO and TRACE
	commLog *slog.Logger // the comms' own debug logs: TRACE only
	trace   bool
}

var loadSettings = sync.OnceValue(func() settings {
	s := settings{backend: os.Getenv(EnvBackend), timeout: DefaultTimeout, log: slog.New(slog.DiscardHandler)}
	s.commLog = s.log
	if ms, err := strconv.Atoi(os.Getenv(EnvTimeoutMs)); err == nil && ms > 0 {
		s.timeout = time.Duration(ms) * time.Millisecond
	}
	switch strings.ToUpper(os.Getenv(EnvDebug)) {
	case "TRACE":
		s.trace = true
		s.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("lib", "intranode-nccl", "pid", os.Getpid())
		s.commLog = s.log
	case "INFO":
		s.log = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("lib", "intranode-nccl", "pid", os.Getpid())
	}
	return s
})

// state is what the library knows of one NCCL communicator.
type state struct {
	mu  sync.Mutex // serialises the bootstrap and the calls
	off string     // why it is not accelerated, for good
	// comm is intranode's comm once bootstrapped; readers that must not
	// wait for mu (the watchdog's ncclCommGetAsyncError) load it too.
	comm atomic.Pointer[capi.Comm]
	// lost is the bootstrap's ncclboot.ErrSequenceLost: every later call
	// on the communicator fails with it, and ncclCommGetAsyncError
	// reports it, since the NCCL communicator's call sequence is unknown.
	lost atomic.Pointer[error]
	// cancel ends a bootstrap in flight, for an abort or destroy that
	// must not wait for its timeout.
	cancel atomic.Pointer[context.CancelFunc]
}

// comms is the registry of the communicators seen, by NCCL handle, to
// *state. A sync.Map: every accelerated call and every
// ncclCommGetAsyncError poll (nccl-tests polls on every thread while it
// waits) looks a handle up, and those look-ups take no lock.
var comms sync.Map

// stateOf returns the state of a communicator, made at its first sight.
func stateOf(comm uintptr) *state {
	if st := formed(comm); st != nil {
		return st
	}
	st, _ := comms.LoadOrStore(comm, &state{})
	return st.(*state)
}

// formed returns the state of a communicator seen before, or nil.
func formed(comm uintptr) *state {
	if st, ok := comms.Load(comm); ok {
		return st.(*state)
	}
	return nil
}

// forward is intranodeNcclRun's answer for "NCCL runs this call".
const forward = -1

// ncclResult maps an error to NCCL's result codes and records its message
// as the thread's last error.
func ncclResult(err error) C.int {
	msg := err.Error()
	C.intranode_set_error((*C.char)(unsafe.Pointer(unsafe.StringData(msg))), C.size_t(len(msg)))
	switch capi.ResultOf(err) {
	case capi.InvalidArgument:
		return C.ncclInvalidArgument
	case capi.Timeout, capi.PeerFailed, capi.Mismatch:
		return C.ncclRemoteError
	case capi.Closed, capi.NotSupported:
		return C.ncclInvalidUsage
	case capi.OutOfMemory, capi.Unavailable:
		return C.ncclSystemError
	}
	return C.ncclInternalError
}

// dtypes and reductions intranode runs, by NCCL value.
var (
	dtypes = map[C.int]backend.DType{C.ncclFloat32: backend.Float32, C.ncclFloat16: backend.Float16,
		C.ncclBfloat16: backend.BFloat16, C.ncclFloat64: backend.Float64, C.ncclInt32: backend.Int32}
	reductions = map[C.int]backend.ReduceOp{C.ncclSum: backend.Sum, C.ncclMax: backend.Max, C.ncclMin: backend.Min,
		C.ncclAvg: backend.Avg}
	ops = map[C.int]collective.Op{C.IN_ALLREDUCE: collective.OpAllReduce, C.IN_REDUCESCATTER: collective.OpReduceScatter,
		C.IN_ALLGATHER: collective.OpAllGather, C.IN_BROADCAST: collective.OpBroadcast, C.IN_ALLTOALL: collective.OpAllToAll}
)

// realFuncs are the real NCCL's functions the bootstrap calls.
var realFuncs = sync.OnceValue(func() ncclboot.Funcs {
	sym := func(name string) unsafe.Pointer {
		cname := C.CString(name)
		defer C.free(unsafe.Pointer(cname))
		return C.intranode_real_sym(cname)
	}
	return ncclboot.Funcs{CommCount: sym("ncclCommCount"), CommUserRank: sym("ncclCommUserRank"),
		CommCuDevice: sym("ncclCommCuDevice"), AllGather: sym("ncclAllGather"), CommGetAsyncError: sym("ncclCommGetAsyncError")}
})

// bootstrap forms intranode's comm for an NCCL communicator (ncclboot).
func bootstrap(ctx context.Context, comm C.ncclComm_t, set settings, st *ncclboot.Stats) (*capi.Comm, error) {
	f := realFuncs()
	if f.CommCount == nil || f.CommUserRank == nil || f.CommCuDevice == nil || f.AllGather == nil || f.CommGetAsyncError == nil {
		return nil, fmt.Errorf("the real NCCL lacks a function the bootstrap needs: %s", C.GoString(C.intranode_real_error()))
	}
	return ncclboot.Bootstrap(f, unsafe.Pointer(comm), ncclboot.Options{Context: ctx, Backend: set.backend, Timeout: set.timeout,
		Log: set.log, CommLog: set.commLog, Trace: set.trace, Stats: st})
}

// intranodeNcclRun runs n collectives, all on one NCCL communicator (a
// single call, or a group's), on intranode's kernels in order and returns
// the NCCL result, or forward (-1) when NCCL is to run them all: a
// datatype or reduction intranode does not have, a communicator it cannot
// serve, a size where its selection picks the vendor library for any of
// them. Every rank decides the same for the same calls.
//
//export intranodeNcclRun
func intranodeNcclRun(first *C.struct_intranode_call, n C.int) C.int {
	set := loadSettings()
	cs := unsafe.Slice(first, int(n))
	comm := uintptr(unsafe.Pointer(first.comm))
	st := stateOf(comm)
	if err := st.lost.Load(); err != nil {
		return ncclResult(*err)
	}
	// A single call (the common case) allocates nothing here.
	var oneCall [1]capi.Call
	var oneAlgo [1]collective.Algo
	calls, algos := oneCall[:], oneAlgo[:]
	if len(cs) > 1 {
		calls, algos = make([]capi.Call, len(cs)), make([]collective.Algo, len(cs))
	}
	for i := range cs {
		c := &cs[i]
		op, okOp := ops[c.op]
		dt, okType := dtypes[c.dtype]
		red, okRed := reductions[c.red]
		if !okOp || !okType || (!okRed && op.Reduces()) {
			if set.trace {
				set.log.Debug("forwarded: collective, datatype or reduction intranode lacks", "op", op, "ncclDtype", int(c.dtype), "ncclOp", int(c.red), "calls", n)
			}
			return forward
		}
		calls[i] = capi.Call{Op: op, Send: uintptr(c.send), Recv: uintptr(c.recv), Count: uint64(c.count), DType: dt, Red: red,
			Root: int(c.root), Stream: uintptr(c.stream)}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.off != "" {
		return forward
	}
	if err := st.lost.Load(); err != nil {
		return ncclResult(*err) // lost by a bootstrap this call waited for
	}
	cm := st.comm.Load()
	if cm == nil {
		var r C.int
		if cm, r = formComm(set, st, cs); cm == nil {
			return r
		}
	}
	for i, call := range calls {
		algo, err := cm.Select(call)
		if err != nil {
			return ncclResult(err)
		}
		if algo == collective.None {
			if set.trace {
				set.log.Debug("forwarded: NCCL is faster", "op", call.Op, "count", call.Count, "dtype", call.DType, "calls", n)
			}
			return forward
		}
		algos[i] = algo
	}
	ctx := context.Background()
	for i, call := range calls {
		if err := cm.Run(ctx, call, algos[i]); err != nil {
			return ncclResult(err)
		}
		if set.trace {
			set.log.Debug("ran", "op", call.Op, "count", call.Count, "dtype", call.DType, "algo", algos[i])
		}
	}
	if !cm.NativeStreams() {
		// No runtime stream the caller could wait on: the calls complete
		// before they return.
		if err := cm.SyncStream(ctx, 0); err != nil {
			return ncclResult(err)
		}
	}
	return C.ncclSuccess
}

// formComm bootstraps intranode's comm for the communicator of calls,
// whose state st the caller has locked, at its first eligible call (or
// group). It returns the comm, or nil and the calls' answer: forward when
// the communicator is not accelerated (for now, under graph capture; for
// good, otherwise), an error when its call sequence is lost.
func formComm(set settings, st *state, calls []C.struct_intranode_call) (*capi.Comm, C.int) {
	c := &calls[0]
	comm := uintptr(unsafe.Pointer(c.comm))
	for i := range calls {
		if C.intranode_stream_capturing(calls[i].stream) != 0 {
			// The bootstrap synchronizes; it waits for a call outside capture.
			if set.trace {
				set.log.Debug("forwarded: first eligible call is under graph capture", "comm", fmt.Sprintf("%#x", comm))
			}
			return nil, forward
		}
	}
	if set.trace {
		set.log.Debug("bootstrapping", "comm", fmt.Sprintf("%#x", comm))
		done := make(chan struct{})
		defer close(done)
		go dumpIfSlow(done, set.log)
	}
	start := time.Now()
	var stats ncclboot.Stats
	ctx, cancel := context.WithCancel(context.Background())
	st.cancel.Store(&cancel)
	cm, err := bootstrap(ctx, c.comm, set, &stats)
	st.cancel.Store(nil)
	cancel()
	if errors.Is(err, ncclboot.ErrSequenceLost) {
		st.lost.Store(&err)
		C.intranode_set_state(c.comm, 3)
		set.log.Info("failed: every call fails", "comm", fmt.Sprintf("%#x", comm), "why", err, "took", time.Since(start))
		return nil, ncclResult(err)
	}
	if err != nil {
		st.off = err.Error()
		C.intranode_set_state(c.comm, 1)
		set.log.Info("not accelerated", "comm", fmt.Sprintf("%#x", comm), "why", st.off, "took", time.Since(start))
		return nil, forward
	}
	st.comm.Store(cm)
	C.intranode_set_state(c.comm, 2)
	set.log.Info("accelerated", append([]any{"comm", fmt.Sprintf("%#x", comm), "rank", cm.Rank(), "nranks", cm.World(),
		"device", cm.Device(), "bootstrap", time.Since(start)}, stats.Attrs()...)...)
	return cm, 0
}

// lockEnded makes a bootstrap in flight on st give up now, not at its
// timeout, and takes st.mu, which that bootstrap holds until it has
// ended; the caller unlocks.
func (st *state) lockEnded() {
	if cancel := st.cancel.Load(); cancel != nil {
		(*cancel)()
	}
	st.mu.Lock()
}

// intranodeNcclCommGone releases what the library holds for a
// communicator being destroyed or, when abort is set, aborted. It does not
// wait for peers. As NCCL's, a destroy lets the communicator's
// accelerated calls still running finish (on a GPU the frees wait for
// them); an abort first stops those still waiting for a peer.
//
//export intranodeNcclCommGone
func intranodeNcclCommGone(comm C.ncclComm_t, abort C.int) {
	v, ok := comms.LoadAndDelete(uintptr(unsafe.Pointer(comm)))
	if !ok {
		return
	}
	st := v.(*state)
	st.lockEnded()
	defer st.mu.Unlock()
	// After the lock, so that a bootstrap that just ended cannot mark the
	// handle again: it may be reused for a new communicator.
	C.intranode_set_state(comm, 0)
	if cm := st.comm.Swap(nil); cm != nil {
		end := cm.Destroy
		if abort != 0 {
			end = cm.Abort
		}
		if err := end(); err != nil {
			loadSettings().log.Info("releasing the comm", "err", err)
		}
	}
}

// intranodeNcclCommInterrupt stops intranode's share of a communicator
// whose operations in flight NCCL is told to stop (ncclCommRevoke,
// ncclCommShrink with NCCL_SHRINK_ABORT): a bootstrap in flight gives up,
// the comm's kernels still waiting for a peer stop (capi.Comm.Interrupt),
// and every later call goes to NCCL, which owns a revoked communicator's
// state; ncclCommDestroy or ncclCommAbort releases the rest.
//
//export intranodeNcclCommInterrupt
func intranodeNcclCommInterrupt(comm C.ncclComm_t) {
	st := stateOf(uintptr(unsafe.Pointer(comm))) // never seen: it is never bootstrapped
	st.lockEnded()
	defer st.mu.Unlock()
	if st.off == "" {
		st.off = "revoked"
	}
	C.intranode_set_state(comm, 1)
	if cm := st.comm.Load(); cm != nil {
		cm.Interrupt()
	}
	loadSettings().log.Info("revoked: every call goes to NCCL", "comm", fmt.Sprintf("%#x", comm))
}

// intranodeNcclAsyncError is the first asynchronous failure of the
// communicator's accelerated calls, as an NCCL result (0: none).
//
//export intranodeNcclAsyncError
func intranodeNcclAsyncError(comm C.ncclComm_t) C.int {
	st := formed(uintptr(unsafe.Pointer(comm)))
	if st == nil {
		return C.ncclSuccess
	}
	if err := st.lost.Load(); err != nil {
		return ncclResult(*err)
	}
	cm := st.comm.Load()
	if cm == nil {
		return C.ncclSuccess
	}
	if err := cm.AsyncError(); err != nil {
		return ncclResult(err)
	}
	return C.ncclSuccess
}

// memory is the device memory ncclMemAlloc serves on a backend without a
// GPU runtime (the fake): NCCL would allocate with cudaMalloc, which such
// a backend does not have. With a runtime the real ncclMemAlloc serves.
var memory = struct {
	sync.Mutex
	probed bool
	dev    backend.Device // nil: forward to NCCL
	allocs map[uintptr]backend.Allocation
}{allocs: map[uintptr]backend.Allocation{}}

//export intranodeNcclMemAlloc
func intranodeNcclMemAlloc(out *unsafe.Pointer, size C.size_t) C.int {
	if C.intranode_enabled() == 0 {
		return forward
	}
	memory.Lock()
	defer memory.Unlock()
	if !memory.probed {
		memory.probed = true
		ctx := context.Background()
		if b, err := capi.Backend(ctx, loadSettings().backend); err == nil {
			if d, err := b.Open(ctx, 0); err == nil {
				if _, native := d.(backend.NativeStreams); !native {
					memory.dev = d
				} else {
					_ = d.Close()
				}
			}
		}
	}
	if memory.dev == nil {
		return forward
	}
	if out == nil || size == 0 || uint64(size) > 1<<40 {
		return ncclResult(backend.Errorf(backend.CodeInvalidArgument, "ncclMemAlloc: ptr %p, size %d", out, uint64(size)))
	}
	a, err := memory.dev.Alloc(context.Background(), int(size))
	if err != nil {
		return ncclResult(err)
	}
	memory.allocs[uintptr(a.Ptr())] = a
	*out = ptr(uintptr(a.Ptr()))
	return C.ncclSuccess
}

//export intranodeNcclMemFree
func intranodeNcclMemFree(p unsafe.Pointer) C.int {
	memory.Lock()
	defer memory.Unlock()
	a, ok := memory.allocs[uintptr(p)]
	if !ok {
		return forward
	}
	delete(memory.allocs, uintptr(p))
	if err := a.Close(); err != nil {
		return ncclResult(err)
	}
	return C.ncclSuccess
}

// dumpIfSlow writes every goroutine's stack to the log when a bootstrap
// has not ended after slowBootstrap (TRACE only): what it waits for.
func dumpIfSlow(done <-chan struct{}, log *slog.Logger) {
	select {
	case <-done:
	case <-time.After(slowBootstrap):
		var b strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
		log.Debug("bootstrap is slow; goroutines", "stacks", b.String())
	}
}

// slowBootstrap is when dumpIfSlow writes the stacks.
const slowBootstrap = 10 * time.Second

func ptr(v uintptr) unsafe.Pointer { return C.intranode_ptr(C.uintptr_t(v)) }
