package gpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/symmetric/store"
)

// CCL is a GPU backend's collective library: NCCL on CUDA, RCCL on ROCm,
// which share one API. The library is opened at run time with dlopen, like
// the driver, so building needs no nccl.h and a binary starts on machines
// without it; calls then fail with an error matching
// backend.ErrUnavailable. It serves
//
//   - the collective layer's fallback (FallbackAllReduce, FallbackMove):
//     what a collective.Comm runs for algorithm None, and the vendor anchor
//     of `intranode bench`;
//   - the step across hosts of collective.HostGroups (NewInterHost).
//
// One communicator serves each collective.Comm (each rank of a group that
// lives in this process has its own) and each inter-host engine, created
// by its first call and cached:
//
//  1. rank 0 calls ncclGetUniqueId and sets the id under
//     "<group>/nccl/<gen>/id" in the group's store; the other ranks get it
//     (gen counts the group's communicators, see bootstrap);
//  2. every rank sets "<group>/nccl/<gen>/join/<rank>" and waits for every
//     rank's key, so a rank that never calls ends in ErrTimeout naming it,
//     before any rank enters the library;
//  3. every rank calls ncclCommInitRank with its device current (made
//     current inside the same C call);
//  4. for a group whose calls include all-to-alls (CCLGroup.SendRecv: the
//     fallback's, not an inter-host engine's), every rank sends one element
//     to every peer and receives one from each (connect), so that the
//     library's send/receive connections are made while every rank is
//     known to be there, not by a later call.
//
// Creation as a whole is bounded by the timeout (SetTimeout), and step 2
// keeps missing ranks out of the library. What a rank that dies between
// steps 2 and 4 costs its peers depends on how communicators are made
// (backend.CCLCreation, SetCreation):
//
//   - guarded (the default): steps 3 and 4 make a non-blocking
//     communicator (ncclCommInitRankConfig with blocking=0, NCCL 2.14 and
//     newer) on the library's thread while this side polls
//     ncclCommGetAsyncError, and then (step 5) ncclCommSplit duplicates
//     it, the same way, into a blocking communicator that shares its
//     connections (splitShare, NCCL 2.18 and newer), which makes the
//     calls. The abort at the timeout ends the library's thread wherever
//     it waits and frees what it held. Calls cost what they cost on any
//     blocking communicator. On 4×H200 (docs/results/2026-11-29-h200x4)
//     20 of 20 kill trials at world 4 and 20 of 20 at world 2 left no
//     survivor holding anything, against 12 of 20 blocking in the same
//     call; a 10-minute kill-and-stop soak, 61 of 63 (one survivor kept
//     one TCP socket of NCCL's in close-wait after a kill of rank 0
//     during a creation; one failed 6.06 s after the fault).
//   - blocking (ncclCommInitRank): steps 3 and 4 run on a goroutine of
//     their own and the caller leaves it at the timeout, but
//     ncclCommInitRank or the first group of sends and receives waits on
//     the dead peer for ever, and no abort can reach a call the library
//     has not returned from: that goroutine, the library's threads,
//     sockets and /dev/shm files stay until the process exits (8 of 20
//     kill trials on 4×H200, docs/results/2026-11-29-h200x4). Guarded
//     creation falls back to it where the library lacks
//     ncclCommInitRankConfig or ncclCommSplit.
//   - non-blocking: as guarded without step 5. The library runs every
//     later call (every ncclGroupEnd) on a new thread too, which took an
//     eager NCCL all-reduce at 4 ranks from 13–24 µs to 110–140 µs a call;
//     calls replayed from a CUDA graph cost the same either way
//     (docs/results/2026-11-28-h200x4-d).
//
// Calls are enqueued on the caller's stream, so stream order and graph
// capture work as for the comm's kernels; the communicator must exist
// before a capture begins (one eager call).
//
// A communicator lives until Release(key) or Close, which abort it with
// ncclCommAbort (no waiting for peers, like Comm.Close).
//
// Before the library first reads its environment, NVLink multicast is
// turned off and the ranks are connected at init (see applyEnvironment).
type CCL struct {
	cfg CCLConfig

	mu       sync.Mutex
	closed   bool
	timeout  time.Duration
	creation backend.CCLCreation
	comms    map[any]*cclComm // by CCLGroup.key
	// stop ends communicators still being created when the backend
	// closes; nil until the first creation.
	stop   context.Context
	cancel context.CancelFunc
}

// CCLConfig says which library a CCL opens and how to call it.
type CCLConfig struct {
	// Backend is the backend's name, Lib the library's ("NCCL", "RCCL"):
	// they start every message.
	Backend, Lib string
	// File is the library to open when the environment variable Env is
	// not set (libnccl.so.2, librccl.so.1).
	File, Env string
	// Core is the backend's core: the streams of calls must be its own.
	Core *Core
	// CreationEnv names the environment variable whose value
	// (backend.ParseCCLCreation) sets SetCreation's initial value.
	CreationEnv string
	// Shims are the backend's calls into the library.
	Shims CCLShims
	Log   *slog.Logger
}

// CCLShims are a backend's C shims of the library (ccl_impl.h). The int
// results are ncclResult_t values, or'ed with CCLDriverFailed and the
// driver's result when the shim could not make its device current, and
// with CCLAsync when the communicator has failed (Collective).
type CCLShims interface {
	// Load opens the library at path once per process; code 0 is success,
	// 1 a library that cannot be opened, 2 one that lacks an entry point,
	// with msg saying why.
	Load(path string) (code int, msg string)
	// ErrorString and LastError are ncclGetErrorString's and
	// ncclGetLastError's texts ("" where the library has none).
	ErrorString(r int) string
	LastError() string
	// Version is ncclGetVersion, UniqueID ncclGetUniqueId.
	Version() (v, r int)
	UniqueID() (id []byte, r int)
	// Init is ncclCommInitRank with c current or, when nonBlocking is set
	// and the library has it, ncclCommInitRankConfig making a non-blocking
	// communicator (r is then ncclInProgress until it is made).
	Init(c Ctx, world int, id []byte, rank int, nonBlocking bool) (comm uintptr, r int)
	// AsyncError is ncclCommGetAsyncError: ncclInProgress while a
	// non-blocking operation of comm is still running.
	AsyncError(comm uintptr) (state, r int)
	// Collective enqueues one collective of kind on stream s (ccl.h).
	Collective(c Ctx, comm uintptr, kind collective.Op, in, out backend.DevicePtr, count, elemSize, dtype, op, root, world int,
		s Handle) int
	// Abort is ncclCommAbort.
	Abort(c Ctx, comm uintptr) int
	// Features says which optional entry points the library has
	// (CCLHasConfig, CCLHasSplit).
	Features() int
	// Split starts ncclCommSplit of the non-blocking communicator parent
	// into a blocking duplicate sharing its resources, with c current; the
	// library writes the duplicate into slot, memory that Child reads and
	// frees once the split has ended or parent has been aborted (r is
	// ncclInProgress until then, on parent).
	Split(c Ctx, parent uintptr, rank int) (slot uintptr, r int)
	// Child returns the communicator Split wrote into slot (0 if none)
	// and frees slot.
	Child(slot uintptr) uintptr
	// DriverError is the vendor's error for the driver result r that a
	// shim failed to make its device current with.
	DriverError(r int) error
	// Retain returns the context a communicator on d is made in, held
	// until release is called (after its abort).
	Retain(d *Device) (c Ctx, release func() error, err error)
}

// Results of the shims (ccl.h), and the library's bounds.
const (
	cclSuccess       = 0
	cclInProgress    = 7
	cclUniqueIDBytes = 128
	// CCLHasConfig and CCLHasSplit are the bits of CCLShims.Features:
	// the library has ncclCommInitRankConfig, ncclCommSplit.
	CCLHasConfig = 1
	CCLHasSplit  = 2
	// CCLDriverFailed marks a shim's result as the driver's, from making
	// the device current.
	CCLDriverFailed = 0x10000
	// CCLAsync marks a collective's result as the communicator's
	// asynchronous error.
	CCLAsync = 0x20000
	// DefaultCCLTimeout bounds creating and releasing a communicator when
	// SetTimeout has not said otherwise.
	DefaultCCLTimeout = collective.DefaultTimeout
	// missingCheckTimeout bounds the store look-ups that name the ranks
	// that did not join, after the join itself timed out.
	missingCheckTimeout = time.Second
)

// cclLoadMu serialises loading the libraries: the shims keep the opened
// library in a C global.
var cclLoadMu sync.Mutex

// NewCCL returns the library of cfg, not yet opened.
func NewCCL(cfg CCLConfig) *CCL {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	l := &CCL{cfg: cfg}
	if v, ok := os.LookupEnv(cfg.CreationEnv); ok && cfg.CreationEnv != "" {
		c, err := backend.ParseCCLCreation(v)
		if err != nil {
			cfg.Log.Warn(cfg.Backend+": ignoring "+cfg.CreationEnv, "err", err)
		}
		l.creation = c
	}
	return l
}

// Shims returns the backend's calls into the library.
func (l *CCL) Shims() CCLShims { return l.cfg.Shims }

// errorf is backend.Errorf with the backend's and library's names first.
func (l *CCL) errorf(code backend.Code, format string, args ...any) error {
	return backend.Errorf(code, "%s: %s: "+format, append([]any{l.cfg.Backend, l.cfg.Lib}, args...)...)
}

// ncclDataType_t and ncclRedOp_t values (nccl.h; rccl.h has the same).
const (
	cclInt32    = 2
	cclFloat16  = 6
	cclFloat32  = 7
	cclFloat64  = 8
	cclBfloat16 = 9

	cclSum = 0
	cclMax = 2
	cclMin = 3
	cclAvg = 4
)

// ncclResult_t values (nccl.h), indexed by result.
var cclResultNames = []string{
	"ncclSuccess",
	"ncclUnhandledCudaError",
	"ncclSystemError",
	"ncclInternalError",
	"ncclInvalidArgument",
	"ncclInvalidUsage",
	"ncclRemoteError",
	"ncclInProgress",
	"ncclTimeout",
}

// cclDataTypes and cclRedOps map element types and reductions to the
// library's, by backend value.
var (
	cclDataTypes = [...]int{backend.Float32: cclFloat32, backend.Float16: cclFloat16, backend.BFloat16: cclBfloat16,
		backend.Float64: cclFloat64, backend.Int32: cclInt32}
	cclRedOps = [...]int{backend.Sum: cclSum, backend.Max: cclMax, backend.Min: cclMin, backend.Avg: cclAvg}
)

// cclDataType maps an element type to the library's.
func cclDataType(d backend.DType) (int, bool) {
	if !d.Valid() {
		return 0, false
	}
	return cclDataTypes[d], true
}

// cclRedOp maps a reduction to the library's.
func cclRedOp(o backend.ReduceOp) (int, bool) {
	if !o.Valid() {
		return 0, false
	}
	return cclRedOps[o], true
}

// CCLError is a failed call of the library: the entry point and the
// ncclResult_t it returned. The backends' errors wrap it under a
// backend.Code; reach it with errors.As to see the library's own answer.
type CCLError struct {
	// Op is the entry point, e.g. "ncclCommInitRank".
	Op string
	// Result is the ncclResult_t number.
	Result int
	// Description is ncclGetErrorString's text for Result.
	Description string
	// Detail is ncclGetLastError's text, where the library has it (NCCL
	// 2.13 and newer): what went wrong, in its words.
	Detail string
}

// Name is the result's name in nccl.h, e.g. "ncclInvalidArgument".
func (e *CCLError) Name() string {
	if e.Result >= 0 && e.Result < len(cclResultNames) {
		return cclResultNames[e.Result]
	}
	return fmt.Sprintf("ncclResult_t(%d)", e.Result)
}

// Error formats the entry point, the result's name and number, the
// library's description and its last error.
func (e *CCLError) Error() string {
	s := fmt.Sprintf("%s: %s (%d)", e.Op, e.Name(), e.Result)
	if e.Description != "" {
		s += ": " + e.Description
	}
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	return s
}

// Code classifies the result for portable callers.
func (e *CCLError) Code() backend.Code {
	switch e.Result {
	case 4, 5: // ncclInvalidArgument, ncclInvalidUsage
		return backend.CodeInvalidArgument
	case 6: // ncclRemoteError
		return backend.CodePeerFailed
	case 7, 8: // ncclInProgress (only seen when the caller gave up), ncclTimeout
		return backend.CodeTimeout
	}
	return backend.CodeInternal
}

// Check turns a shim's result into nil or an error: the vendor's driver
// error when the shim could not make its device current, else a *CCLError
// naming op (or ncclCommGetAsyncError for a communicator that has failed).
func (l *CCL) Check(op string, r int) error {
	switch {
	case r == cclSuccess:
		return nil
	case r&CCLDriverFailed != 0:
		return l.cfg.Shims.DriverError(r &^ CCLDriverFailed)
	case r&CCLAsync != 0:
		op, r = "ncclCommGetAsyncError", r&^CCLAsync
	}
	return &CCLError{Op: op, Result: r, Description: l.cfg.Shims.ErrorString(r), Detail: l.cfg.Shims.LastError()}
}

// FormatCCLVersion spells an ncclGetVersion code as "major.minor.patch"
// (NCCL_VERSION_CODE: 1000*major+100*minor+patch up to 2.8, then
// 10000*major+100*minor+patch).
func FormatCCLVersion(code int) string {
	if code >= 10000 {
		return fmt.Sprintf("%d.%d.%d", code/10000, code%10000/100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/1000, code%1000/100, code%100)
}

// Path is the library to open: $Env, else File.
func (l *CCL) Path() string {
	if p := os.Getenv(l.cfg.Env); p != "" {
		return p
	}
	return l.cfg.File
}

// load opens the library (Path) after setting its environment
// (applyEnvironment). A failed load leaves nothing behind, so a later call
// tries again; the library is never unloaded (its proxy and bootstrap
// threads live inside it). Failures match backend.ErrUnavailable.
func (l *CCL) load() error {
	cclLoadMu.Lock()
	defer cclLoadMu.Unlock()
	if err := l.applyEnvironment(); err != nil {
		return err
	}
	lib := l.Path()
	switch code, msg := l.cfg.Shims.Load(lib); code {
	case 0:
		return nil
	case 1:
		return backend.Errorf(backend.CodeUnavailable, "%s not found: %s (install %s, or set %s to the library)",
			lib, msg, l.cfg.Lib, l.cfg.Env)
	default:
		return backend.Errorf(backend.CodeUnavailable, "%s is not a usable %s: %s", lib, l.cfg.Lib, msg)
	}
}

// applyEnvironment sets what the library must read from its environment
// before its first call (RCCL reads NCCL's variables):
//
//   - NCCL_NVLS_ENABLE=0, always: intranode never uses NVLink multicast (it
//     can take a shared host's GPUs out of service), so a different value
//     is overridden with a warning;
//   - NCCL_RUNTIME_CONNECT=0 unless it is set: the library then connects
//     the ranks inside ncclCommInitRank, which runs under the timeout,
//     instead of inside the first call, where a missing peer would block
//     the caller without a deadline;
//   - NCCL_SOCKET_RETRY_CNT unless it is set, to SocketRetries of the
//     timeout, at most 3 s (7 retries). The library retries a refused
//     connection 34 times with growing sleeps by default, about a minute,
//     inside a ncclCommInitRank no one can interrupt; yet every socket it
//     connects to listened before its address was sent, so a refusal
//     means the peer's process has ended. Bounded, a creation whose peer
//     died returns (and its half-made communicator is aborted) within
//     seconds of its caller giving up, instead of outliving Close;
//   - NCCL_RAS_ENABLE=0 unless it is set: the library's RAS thread (2.24
//     and later) listens on two TCP ports for the process's life and keeps
//     a connection to every process it has shared a communicator with,
//     past ncclCommAbort, retrying it once a second after that process
//     has died: a descriptor per peer per fault. intranode reports its
//     groups' failures itself.
func (l *CCL) applyEnvironment() error {
	if v, ok := os.LookupEnv("NCCL_NVLS_ENABLE"); !ok || v != "0" {
		if ok {
			l.cfg.Log.Warn(l.cfg.Backend+": overriding NCCL_NVLS_ENABLE: intranode never uses NVLink multicast", "was", v)
		}
		if err := os.Setenv("NCCL_NVLS_ENABLE", "0"); err != nil {
			return backend.Errorf(backend.CodeInternal, "%s: setting NCCL_NVLS_ENABLE: %w", l.cfg.Backend, err)
		}
	}
	l.mu.Lock()
	timeout := l.timeoutLocked()
	l.mu.Unlock()
	for _, v := range []struct{ name, value string }{
		{"NCCL_RUNTIME_CONNECT", "0"},
		{"NCCL_SOCKET_RETRY_CNT", strconv.Itoa(SocketRetries(min(timeout, maxSocketRetryTime)))},
		{"NCCL_RAS_ENABLE", "0"},
	} {
		if _, ok := os.LookupEnv(v.name); ok {
			continue
		}
		if err := os.Setenv(v.name, v.value); err != nil {
			return backend.Errorf(backend.CodeInternal, "%s: setting %s: %w", l.cfg.Backend, v.name, err)
		}
	}
	return nil
}

// maxSocketRetryTime bounds the library's retries of refused
// connections (applyEnvironment): every listening socket it connects to
// was listening before its address was sent, so a refusal means the
// process behind it has ended.
const maxSocketRetryTime = 3 * time.Second

// socketRetrySleep is the library's default NCCL_SOCKET_RETRY_SLEEP_MSEC:
// its n-th retry of a refused connection sleeps n times this.
const socketRetrySleep = 100 * time.Millisecond

// SocketRetries is the NCCL_SOCKET_RETRY_CNT whose sleeps add up to no
// more than timeout (at least 1, at most the library's default of 34,
// about a minute).
func SocketRetries(timeout time.Duration) int {
	n := 1
	for n < 34 && socketRetrySleep*time.Duration((n+1)*(n+2)/2) <= timeout {
		n++
	}
	return n
}

// Version opens the library and reports its version, "2.28.9". It needs no
// GPU. A missing library is an error matching backend.ErrUnavailable.
func (l *CCL) Version() (string, error) {
	if l.cfg.Core.Closed() {
		return "", backend.Errorf(backend.CodeClosed, "%s: backend is closed", l.cfg.Backend)
	}
	if err := l.load(); err != nil {
		return "", fmt.Errorf("%s: %w", l.cfg.Backend, err)
	}
	v, r := l.cfg.Shims.Version()
	if err := l.Check("ncclGetVersion", r); err != nil {
		return "", Wrap(err, "%s: %s version", l.cfg.Backend, l.cfg.Lib)
	}
	return FormatCCLVersion(v), nil
}

// SetTimeout bounds creating a communicator (the store exchange, the wait
// for every rank and ncclCommInitRank together) and releasing one; d <= 0
// restores DefaultCCLTimeout. It applies to communicators created or
// released afterwards.
func (l *CCL) SetTimeout(d time.Duration) {
	l.mu.Lock()
	l.timeout = d
	l.mu.Unlock()
}

// SetCreation says how communicators created afterwards are made (see
// CCL and backend.CCLCreation).
func (l *CCL) SetCreation(c backend.CCLCreation) {
	l.mu.Lock()
	l.creation = c
	l.mu.Unlock()
}

func (l *CCL) timeoutLocked() time.Duration {
	if l.timeout > 0 {
		return l.timeout
	}
	return DefaultCCLTimeout
}

// CCLGroup is what a communicator is made for: the key it is cached under
// (the *collective.Comm, an inter-host engine), and the store, group name,
// rank and size of its members. SendRecv says that its calls include
// all-to-alls (groups of sends and receives), whose connections to every
// peer are then made at creation (step 4 of CCL).
type CCLGroup struct {
	Key         any
	Store       store.Store
	Name        string
	Rank, World int
	SendRecv    bool
}

func groupOf(c *collective.Comm) CCLGroup {
	return CCLGroup{Key: c, Store: c.Store(), Name: c.GroupName(), Rank: c.Rank(), World: c.World(), SendRecv: true}
}

// cclComm is one rank's communicator. The fields below ready are set by
// the goroutine that creates it before it closes ready, and read only
// after ready is closed.
type cclComm struct {
	lib   *CCL
	group string
	rank  int
	world int
	dev   int // device index
	// sendRecv: connect to every peer at creation (CCLGroup.SendRecv).
	sendRecv bool

	ready chan struct{}

	h       uintptr // ncclComm_t of the calls; 0 when creation failed
	parent  uintptr // the non-blocking communicator h duplicates (guarded creation), or 0
	ctx     Ctx     // the context it was made in, retained while h lives
	release func() error

	failure  atomic.Pointer[cclFailure]
	released atomic.Bool
	// stuck marks a communicator with a call still blocked inside the
	// library: release leaves it (and the context it holds) to the
	// process's exit.
	stuck atomic.Bool
}

// cclFailure is why a communicator cannot be used: its creation failed or
// the library reported an asynchronous error. It sticks: later calls fail
// with it.
type cclFailure struct{ err error }

func (nc *cclComm) fail(err error) { nc.failure.CompareAndSwap(nil, &cclFailure{err}) }

func (nc *cclComm) err() error {
	if f := nc.failure.Load(); f != nil {
		return f.err
	}
	return nil
}

func (nc *cclComm) String() string {
	return fmt.Sprintf("%s rank %d of %d on device %d", nc.group, nc.rank, nc.world, nc.dev)
}

// wait waits, at most timeout, until the communicator's creation has ended.
func (nc *cclComm) wait(timeout time.Duration) error {
	select {
	case <-nc.ready:
		return nil
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-nc.ready:
		return nil
	case <-t.C:
		return nc.lib.errorf(backend.CodeTimeout, "communicator for %s still being created after %v", nc, timeout)
	}
}

// abort aborts the communicator and releases its context, once, waiting at
// most timeout: the abort waits for graphs that captured the
// communicator's calls to be destroyed. Call it only once ready is closed
// (or from the goroutine that closes it).
func (nc *cclComm) abort(timeout time.Duration) error {
	if !nc.released.CompareAndSwap(false, true) || nc.h == 0 || nc.stuck.Load() {
		return nil
	}
	l := nc.lib
	done := make(chan error, 1)
	go func() {
		err := errors.Join(l.abortComm(nc.ctx, nc.parent), l.abortComm(nc.ctx, nc.h))
		if err != nil {
			err = Wrap(err, "%s: aborting the %s communicator for %s", l.cfg.Backend, l.cfg.Lib, nc)
		}
		if rerr := nc.release(); rerr != nil {
			err = errors.Join(err, Wrap(rerr, "%s: device %d: releasing the context", l.cfg.Backend, nc.dev))
		}
		done <- err
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return l.errorf(backend.CodeTimeout,
			"the communicator for %s is still being aborted after %v (is a graph that captured its calls still alive?)",
			nc, timeout)
	}
}

// close waits for the communicator's creation to end and aborts it.
func (nc *cclComm) close(timeout time.Duration) error {
	if err := nc.wait(timeout); err != nil {
		// The creating goroutine releases it when it finds it dropped.
		return err
	}
	return nc.abort(timeout)
}

// stream checks that s is a usable stream of this backend.
func (l *CCL) stream(s backend.Stream, what string) (*Stream, error) {
	st, ok := s.(*Stream)
	if !ok || st.Device().Core() != l.cfg.Core {
		return nil, l.errorf(backend.CodeInvalidArgument, "%s: %T is not a stream of this backend", what, s)
	}
	return st, st.Usable()
}

// FallbackAllReduce reduces count elements of dtype from in into out (they
// may be equal) with the library's all-reduce across c's ranks, enqueued
// on s, a stream of this backend on the rank's device. The first call for
// c creates c's communicator (see CCL): it blocks until every rank of c
// has made its first fallback call too, at most the timeout, and must not
// happen while s is capturing. Later calls only enqueue, and may be
// captured into a graph. A missing library is an error matching
// backend.ErrUnavailable, a rank that does not join one matching
// backend.ErrTimeout.
func (l *CCL) FallbackAllReduce(ctx context.Context, s backend.Stream, c *collective.Comm, in, out backend.DevicePtr, count int,
	dtype backend.DType, op backend.ReduceOp) error {
	if _, err := l.stream(s, "all-reduce"); err != nil {
		return err
	}
	if c == nil {
		return l.errorf(backend.CodeInvalidArgument, "all-reduce: nil comm")
	}
	return l.Collective(ctx, s, groupOf(c), collective.OpAllReduce, in, out, count, dtype, op, 0)
}

// FallbackMove runs a reduce-scatter, all-gather, broadcast or all-to-all
// through the library for c's ranks (ncclReduceScatter, ncclAllGather,
// ncclBroadcast, and a group of ncclSend/ncclRecv for the all-to-all), on
// the communicator FallbackAllReduce uses, with the same first-call rules.
// count is per rank as collective.Comm's methods take it. An all-to-all in
// place is refused (the receives would overwrite blocks not yet sent): the
// comm's kernels serve it.
func (l *CCL) FallbackMove(ctx context.Context, s backend.Stream, c *collective.Comm, op collective.Op, in, out backend.DevicePtr,
	count int, dtype backend.DType, red backend.ReduceOp, root int) error {
	if _, err := l.stream(s, op.String()); err != nil {
		return err
	}
	if op == collective.OpAllToAll && in == out {
		return l.errorf(backend.CodeUnavailable, "no all-to-all in place")
	}
	if c == nil {
		return l.errorf(backend.CodeInvalidArgument, "%v: nil comm", op)
	}
	if op != collective.OpReduceScatter {
		red = backend.Sum
	}
	return l.Collective(ctx, s, groupOf(c), op, in, out, count, dtype, red, root)
}

// Collective enqueues one collective for group g on s, a stream of this
// backend, creating g's communicator on first use (see CCL). count is per
// rank as collective.Comm's methods take it; red serves the all-reduce and
// the reduce-scatter, root the broadcast.
func (l *CCL) Collective(ctx context.Context, s backend.Stream, g CCLGroup, op collective.Op, in, out backend.DevicePtr, count int,
	dtype backend.DType, red backend.ReduceOp, root int) error {
	st, err := l.stream(s, op.String())
	if err != nil {
		return err
	}
	if count <= 0 {
		return l.errorf(backend.CodeInvalidArgument, "%v: count %d must be positive", op, count)
	}
	if op > collective.OpAllToAll {
		return l.errorf(backend.CodeInvalidArgument, "unknown collective %v", op)
	}
	dt, ok := cclDataType(dtype)
	if !ok {
		return l.errorf(backend.CodeInvalidArgument, "unsupported dtype %v", dtype)
	}
	rop, ok := cclRedOp(red)
	if !ok {
		return l.errorf(backend.CodeInvalidArgument, "unsupported reduction %v", red)
	}
	nc, err := l.commFor(ctx, g, st)
	if err != nil {
		return err
	}
	enqueue := func() int {
		return l.cfg.Shims.Collective(st.Device().Ctx(), nc.h, op, in, out, count, dtype.Size(), dt, rop, root, nc.world, st.Handle())
	}
	var r int
	if op == collective.OpAllToAll && !st.Capturing() {
		// The library connects a send/receive pair to its peer on first
		// use, inside the enqueue call (NCCL_RUNTIME_CONNECT=0 connects
		// only the collectives' rings and trees at init), and a dead peer
		// never answers: the call would block past any deadline. Creation
		// makes those connections (connect), so this call should not
		// block; should the library connect again anyway, it runs on a
		// goroutine of its own, and the caller leaves at ctx's end. The
		// communicator is then failed and never aborted: ncclCommAbort
		// frees it under the blocked call, which crashed the process when
		// the abort woke it (4×H200 kill trials,
		// docs/results/2026-11-26-h200x4-a/run5).
		done := make(chan int, 1)
		go func() { done <- enqueue() }()
		select {
		case r = <-done:
		case <-ctx.Done():
			err := l.errorf(backend.CodeTimeout,
				"all-to-all for %s still connecting to its peers at the call's deadline (a peer gone?): %v", nc, ctx.Err())
			nc.fail(err)
			nc.stuck.Store(true)
			return err
		}
	} else {
		r = enqueue()
	}
	// A call the library runs on its own thread (one that connects
	// first) is waited for, to the caller's deadline.
	r = l.settle(ctx, nc.h, r)
	if r == cclSuccess {
		return nil
	}
	err = Wrap(l.Check("nccl "+op.String(), r), "%s: %s %v of %d %v elements (%v) for %s", l.cfg.Backend, l.cfg.Lib, op, count, dtype, red, nc)
	if r&CCLAsync != 0 || r == cclInProgress {
		nc.fail(err)
	}
	return err
}

// commFor returns g's communicator, creating it on first use. Creating it,
// or waiting for another caller to, ends at ctx's deadline or the timeout,
// whichever comes first: a rank that dies before or inside
// ncclCommInitRank costs its peers no more than their call's deadline.
func (l *CCL) commFor(ctx context.Context, g CCLGroup, st *Stream) (*cclComm, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, backend.Errorf(backend.CodeClosed, "%s: backend is closed", l.cfg.Backend)
	}
	timeout := l.timeoutLocked()
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(min(timeout, time.Until(dl)), time.Millisecond)
	}
	nc := l.comms[g.Key]
	if nc == nil {
		if st.Capturing() {
			l.mu.Unlock()
			return nil, l.errorf(backend.CodeInvalidArgument,
				"device %d: the communicator of %s rank %d is created by its first call, which cannot run while the stream is capturing: make one call before BeginCapture",
				st.Device().Index(), g.Name, g.Rank)
		}
		if l.comms == nil {
			l.comms = map[any]*cclComm{}
		}
		if l.stop == nil {
			l.stop, l.cancel = context.WithCancel(context.Background())
		}
		// Creation ends when the backend closes or the caller gives up.
		stop, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(l.stop, cancel)()
		nc = &cclComm{lib: l, group: g.Name, rank: g.Rank, world: g.World, sendRecv: g.SendRecv, dev: st.Device().Index(),
			ready: make(chan struct{})}
		l.comms[g.Key] = nc
		l.mu.Unlock()
		l.create(stop, g, nc, st.Device(), timeout)
	} else {
		l.mu.Unlock()
		if err := nc.wait(timeout); err != nil {
			return nil, err
		}
	}
	if err := nc.err(); err != nil {
		return nil, err
	}
	if nc.dev != st.Device().Index() {
		return nil, l.errorf(backend.CodeInvalidArgument,
			"the communicator for %s is on device %d, the stream on device %d", nc, nc.dev, st.Device().Index())
	}
	return nc, nil
}

// create creates nc for g on d, records the outcome in nc and closes
// nc.ready. Creation stops early when stop ends (Close). A communicator
// that was dropped meanwhile (Release, Close) is released here.
func (l *CCL) create(stop context.Context, g CCLGroup, nc *cclComm, d *Device, timeout time.Duration) {
	defer close(nc.ready)
	err := l.init(stop, g.Store, nc, d, timeout)
	l.mu.Lock()
	dropped := l.closed || l.comms[g.Key] != nc
	l.mu.Unlock()
	switch {
	case dropped:
		nc.fail(l.errorf(backend.CodeClosed, "the communicator for %s was released while being created", nc))
		if err := nc.abort(timeout); err != nil {
			l.cfg.Log.Warn(l.cfg.Backend+": releasing a dropped communicator", "lib", l.cfg.Lib, "comm", nc.String(), "err", err)
		}
	case err != nil:
		nc.fail(err)
		l.cfg.Log.Debug(l.cfg.Backend+": communicator not created", "lib", l.cfg.Lib, "comm", nc.String(), "err", err)
	default:
		l.cfg.Log.Debug(l.cfg.Backend+": communicator created", "lib", l.cfg.Lib, "comm", nc.String())
	}
}

// init runs the three steps of the CCL comment, together bounded by
// timeout and ended early by stop, and fills nc.h, nc.ctx and nc.release.
func (l *CCL) init(stop context.Context, st store.Store, nc *cclComm, d *Device, timeout time.Duration) error {
	what := fmt.Sprintf("%s: %s communicator for %s", l.cfg.Backend, l.cfg.Lib, nc)
	if nc.group == "" {
		return backend.Errorf(backend.CodeInvalidArgument, "%s: the comm has not rendezvoused", what)
	}
	if st == nil {
		return backend.Errorf(backend.CodeInvalidArgument, "%s: the comm has no store", what)
	}
	if err := l.load(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	mode := l.creationFor()
	ctx, cancel := context.WithTimeout(stop, timeout)
	defer cancel()
	id, err := bootstrap(ctx, st, nc.group, nc.rank, nc.world, func() ([]byte, error) {
		id, r := l.cfg.Shims.UniqueID()
		return id, l.Check("ncclGetUniqueId", r)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	cctx, release, err := l.cfg.Shims.Retain(d)
	if err != nil {
		return Wrap(err, "%s: retaining the device's context", what)
	}
	// made is what creation made: the communicator h (the parent, under
	// guarded creation) and the slot its blocking duplicate is written to.
	type made struct {
		h, slot uintptr
		err     error
	}
	done := make(chan made, 1)
	scratch := func() error { return nil } // nothing to connect
	// nonBlocking: Init makes a non-blocking communicator, so the
	// goroutine below leaves its waits when ctx ends (settle) instead of
	// staying inside the library.
	nonBlocking := mode != backend.CCLBlocking
	go func() {
		var m made
		var r int
		m.h, r = l.cfg.Shims.Init(cctx, nc.world, id, nc.rank, nonBlocking)
		m.err = l.Check("ncclCommInitRank", l.settle(ctx, m.h, pending(nonBlocking, r)))
		if m.err == nil && nc.world > 1 && nc.sendRecv {
			var free func() error
			if free, m.err = l.connect(ctx, d, m.h, nc.world); free != nil {
				scratch = sync.OnceValue(free)
			}
		}
		if m.err == nil && mode == backend.CCLGuarded {
			m.slot, r = l.cfg.Shims.Split(cctx, m.h, nc.rank)
			m.err = l.Check("ncclCommSplit", l.settle(ctx, m.h, pending(true, r)))
		}
		done <- m
	}()
	// end aborts what a failed creation made (a kernel still waiting for
	// a peer ends with the abort), then frees the connecting all-to-all's
	// buffer and stream. The parent goes first: its abort joins a split
	// still running, which writes the child it was making, failed or not,
	// into the slot (and then has its sockets to release too).
	end := func(m made) {
		_ = l.abortComm(cctx, m.h)
		_ = l.abortComm(cctx, l.cfg.Shims.Child(m.slot))
		_ = scratch()
		_ = release()
	}
	select {
	case m := <-done:
		if m.err != nil {
			end(m)
			return Wrap(m.err, "%s", what)
		}
		if err := scratch(); err != nil {
			end(m)
			return Wrap(err, "%s: freeing the connecting all-to-all's buffer", what)
		}
		nc.h, nc.ctx, nc.release = m.h, cctx, release
		if m.slot != 0 {
			nc.parent, nc.h = m.h, l.cfg.Shims.Child(m.slot)
			if nc.h == 0 {
				_ = l.abortComm(cctx, nc.parent)
				_ = release()
				nc.parent = 0
				return backend.Errorf(backend.CodeInternal, "%s: ncclCommSplit succeeded without making a communicator", what)
			}
		}
		l.cfg.Log.Debug(l.cfg.Backend+": communicator made", "lib", l.cfg.Lib, "comm", nc.String(), "creation", mode.String())
		return nil
	case <-ctx.Done():
		if nonBlocking {
			// The goroutine returns now; the abort ends the library's
			// own creation thread, so nothing of the communicator
			// outlives this call.
			end(<-done)
		} else {
			go func() { end(<-done) }()
		}
		return backend.Errorf(backend.CodeTimeout,
			"%s: ncclCommInitRank and the connection to every peer did not finish within %v although every rank had joined (did a rank stop?): %w",
			what, timeout, ctx.Err())
	}
}

// creationFor returns how the next communicator is made: SetCreation's
// mode, as far as the library can (guarded needs ncclCommInitRankConfig
// and ncclCommSplit, non-blocking the first).
func (l *CCL) creationFor() backend.CCLCreation {
	l.mu.Lock()
	mode := l.creation
	l.mu.Unlock()
	f := l.cfg.Shims.Features()
	switch {
	case mode == backend.CCLGuarded && f&(CCLHasConfig|CCLHasSplit) != CCLHasConfig|CCLHasSplit,
		mode == backend.CCLNonBlocking && f&CCLHasConfig == 0:
		return backend.CCLBlocking
	}
	return mode
}

// abortComm aborts the communicator h with c current; 0 is none. A
// guarded creation's parent is aborted before its child, as NCCL's
// documentation orders it.
func (l *CCL) abortComm(c Ctx, h uintptr) error {
	if h == 0 {
		return nil
	}
	return l.Check("ncclCommAbort", l.cfg.Shims.Abort(c, h))
}

// settle waits while the non-blocking communicator h reports
// ncclInProgress (r is the result of the call that started the
// operation), polling ncclCommGetAsyncError, and returns the operation's
// result: cclSuccess, the library's error or'ed with CCLAsync, or
// ncclInProgress when ctx ended first (the caller then aborts h). It polls
// without sleeping for the first settleSpin (a call the library launches
// on its thread ends within tens of microseconds, below the runtime's
// timer resolution), then sleeps between polls.
func (l *CCL) settle(ctx context.Context, h uintptr, r int) int {
	if r != cclInProgress {
		return r
	}
	start := time.Now()
	poll := 50 * time.Microsecond
	for {
		state, r := l.cfg.Shims.AsyncError(h)
		switch {
		case r != cclSuccess:
			return r
		case state == cclSuccess:
			return cclSuccess
		case state != cclInProgress:
			return CCLAsync | state
		}
		if ctx.Err() != nil {
			return cclInProgress
		}
		if time.Since(start) < settleSpin {
			runtime.Gosched()
			continue
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return cclInProgress
		case <-t.C:
		}
		poll = min(2*poll, 5*time.Millisecond)
	}
}

// pending is the result r of an operation on a non-blocking communicator
// as settle should take it: ncclSuccess too may mean that the operation
// goes on on the library's thread (NCCL 2.28's ncclCommSplit returns it,
// and writes the new communicator when done), so settle asks
// ncclCommGetAsyncError, which says ncclInProgress until then.
func pending(nonBlocking bool, r int) int {
	if nonBlocking && r == cclSuccess {
		return cclInProgress
	}
	return r
}

// settleSpin is how long settle polls before it sleeps.
const settleSpin = 2 * time.Millisecond

// connect makes the communicator's send/receive connections to every peer
// at creation, with one all-to-all of one element, and waits for it (at
// most until ctx ends). The library connects a pair on its first send or
// receive, inside the enqueue call, waiting on the peer with no deadline;
// ncclCommAbort cannot end that wait (it frees the communicator under the
// blocked call), so a peer that died before a rank's first all-to-all left
// that rank's communicator, its sockets and shared-memory files held for
// the process's life (4×H200 kill trials,
// docs/results/2026-11-28-h200x4-b). At creation every rank is present,
// and a creation that does not finish is aborted once its call returns.
// The library connects the same channels for any size (all of a peer's
// send/receive channels on first use), so no later all-to-all connects.
// The returned function frees the buffer and stream; call it once the
// all-to-all has finished or the communicator has been aborted.
func (l *CCL) connect(ctx context.Context, d *Device, h uintptr, world int) (func() error, error) {
	const elem = 4
	buf, err := d.Alloc(ctx, 2*world*elem)
	if err != nil {
		return nil, Wrap(err, "the connecting all-to-all's buffer")
	}
	s, err := d.NewStream(ctx)
	if err != nil {
		return buf.Close, Wrap(err, "the connecting all-to-all's stream")
	}
	free := func() error { return errors.Join(s.Close(), buf.Close()) }
	st := s.(*Stream)
	r := l.cfg.Shims.Collective(d.Ctx(), h, collective.OpAllToAll, buf.Ptr(), buf.Ptr().Add(world*elem), 1, elem, cclInt32, cclSum,
		0, world, st.Handle())
	// On a non-blocking communicator the connections are made on the
	// library's thread, which the abort of a creation that ran out of
	// time ends.
	r = l.settle(ctx, h, r)
	if err := l.Check("connecting to every peer (ncclSend/ncclRecv)", r); err != nil {
		return free, err
	}
	if err := st.Synchronize(ctx); err != nil {
		return free, Wrap(err, "waiting for the connecting all-to-all")
	}
	return free, nil
}

// bootstrap agrees on group's unique id through st and waits until every
// rank has joined. Each creation of the group's communicators is a
// generation: every rank counts its own under "<group>/nccl/rank-<rank>",
// so ranks that release and recreate their communicators together meet
// under fresh keys, "<group>/nccl/<gen>/…". Rank 0 makes the id with newID
// and sets it under ".../id", the others get it; every rank sets
// ".../join/<rank>" and waits for all of them. It fails when ctx ends
// first, naming the ranks that did not join, and then marks the generation
// abandoned (".../abandoned"), so that a rank joining after the others gave
// up fails too instead of entering the library alone.
func bootstrap(ctx context.Context, st store.Store, group string, rank, world int,
	newID func() ([]byte, error)) (id []byte, err error) {
	gen, err := st.Add(ctx, fmt.Sprintf("%s/nccl/rank-%d", group, rank), 1)
	if err != nil {
		return nil, storeError(err, "counting the communicators of rank %d", rank)
	}
	prefix := fmt.Sprintf("%s/nccl/%d", group, gen)
	idKey, abandoned := prefix+"/id", prefix+"/abandoned"
	join := make([]string, world)
	for r := range join {
		join[r] = fmt.Sprintf("%s/join/%d", prefix, r)
	}
	defer func() {
		if err != nil {
			actx, cancel := context.WithTimeout(context.Background(), missingCheckTimeout)
			defer cancel()
			_ = st.Set(actx, abandoned, []byte(fmt.Sprint(rank)))
		}
	}()
	if rank == 0 {
		if id, err = newID(); err != nil {
			return nil, err
		}
		if err := st.Set(ctx, idKey, id); err != nil {
			return nil, storeError(err, "publishing the unique id")
		}
	}
	if err := st.Set(ctx, join[rank], []byte{1}); err != nil {
		return nil, storeError(err, "announcing rank %d", rank)
	}
	if rank != 0 {
		if id, err = st.Get(ctx, idKey); err != nil {
			return nil, storeError(err, "waiting for rank 0's unique id (rank 0 has not made its first call)")
		}
	}
	if err := st.Wait(ctx, join...); err != nil {
		return nil, storeError(err, "ranks %v did not make their first call", missingRanks(st, join))
	}
	if gaveUp, err := st.Check(ctx, abandoned); err != nil || gaveUp {
		if err == nil {
			err = backend.Errorf(backend.CodeTimeout, "a rank stopped waiting for the others")
		}
		return nil, storeError(err, "joining communicator generation %d", gen)
	}
	if len(id) != cclUniqueIDBytes {
		return nil, backend.Errorf(backend.CodeInternal, "the unique id under %q has %d bytes, want %d", idKey, len(id), cclUniqueIDBytes)
	}
	return id, nil
}

// missingRanks lists the ranks whose key in keys is not set (all of them
// when the store cannot say).
func missingRanks(st store.Store, keys []string) []int {
	ctx, cancel := context.WithTimeout(context.Background(), missingCheckTimeout)
	defer cancel()
	var out []int
	for r, k := range keys {
		if ok, err := st.Check(ctx, k); err != nil || !ok {
			out = append(out, r)
		}
	}
	return out
}

// storeError attaches a message to a store error, keeping its code (a
// timeout stays ErrTimeout).
func storeError(err error, format string, args ...any) error {
	code := backend.CodeOf(err)
	if code == backend.CodeUnknown {
		code = backend.CodeInternal
	}
	return backend.Wrap(code, err, fmt.Sprintf(format, args...))
}

// Release aborts the communicator cached under key (a *collective.Comm's,
// or an inter-host engine's), if any, without waiting for its peers (work
// of it still queued is cut short: synchronise first). A later call for
// the same key creates a new communicator, which for a comm needs a new
// rendezvous. It waits at most the timeout.
func (l *CCL) Release(key any) error {
	l.mu.Lock()
	nc := l.comms[key]
	delete(l.comms, key)
	timeout := l.timeoutLocked()
	l.mu.Unlock()
	if nc == nil {
		return nil
	}
	return nc.close(timeout)
}

// Close aborts every communicator (the backend's Close), concurrently,
// each waiting at most the timeout.
func (l *CCL) Close() error {
	l.mu.Lock()
	l.closed = true
	comms := l.comms
	l.comms = nil
	timeout := l.timeoutLocked()
	if l.cancel != nil {
		l.cancel()
	}
	l.mu.Unlock()
	errs := make([]error, 0, len(comms))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, nc := range comms {
		wg.Go(func() {
			if err := nc.close(timeout); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// cclInterHost is a communicator among the members of a
// collective.InterHostConfig: the step of collective.HostGroups'
// collectives that crosses hosts. It is made as the fallback's are (see
// CCL): by the first call of every member, its unique id exchanged through
// the config's store, on the device of the calling stream, within that
// call's deadline. The library picks its transport: across hosts its
// network one, between processes that NCCL_HOSTID places on different
// "hosts" of one machine its socket transport.
type cclInterHost struct {
	l *CCL
	g CCLGroup
}

// NewInterHost returns the library's communicator for cfg (for
// collective.InterHostBackend). It fails with backend.ErrUnavailable when
// the library cannot be loaded.
func (l *CCL) NewInterHost(ctx context.Context, cfg collective.InterHostConfig) (collective.InterHost, error) {
	switch {
	case cfg.Store == nil || cfg.Name == "":
		return nil, l.errorf(backend.CodeInvalidArgument, "inter-host communicator: no store or name")
	case cfg.World < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.World:
		return nil, l.errorf(backend.CodeInvalidArgument, "inter-host communicator %s: rank %d of %d", cfg.Name, cfg.Rank, cfg.World)
	}
	if err := ctx.Err(); err != nil {
		return nil, backend.Wrap(backend.CodeTimeout, err, l.cfg.Backend+": inter-host communicator "+cfg.Name)
	}
	if err := l.load(); err != nil {
		return nil, fmt.Errorf("%s: inter-host communicator %s: %w", l.cfg.Backend, cfg.Name, err)
	}
	e := &cclInterHost{l: l}
	e.g = CCLGroup{Key: e, Store: cfg.Store, Name: cfg.Name, Rank: cfg.Rank, World: cfg.World}
	return e, nil
}

func (e *cclInterHost) call(ctx context.Context, s backend.Stream, op collective.Op, in, out backend.DevicePtr, count int,
	dtype backend.DType, red backend.ReduceOp) error {
	return e.l.Collective(ctx, s, e.g, op, in, out, count, dtype, red, 0)
}

// AllReduce enqueues ncclAllReduce of count elements.
func (e *cclInterHost) AllReduce(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int,
	dtype backend.DType, op backend.ReduceOp) error {
	return e.call(ctx, s, collective.OpAllReduce, in, out, count, dtype, op)
}

// ReduceScatter enqueues ncclReduceScatter of count elements per member.
func (e *cclInterHost) ReduceScatter(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int,
	dtype backend.DType, op backend.ReduceOp) error {
	return e.call(ctx, s, collective.OpReduceScatter, in, out, count, dtype, op)
}

// AllGather enqueues ncclAllGather of count elements per member.
func (e *cclInterHost) AllGather(ctx context.Context, s backend.Stream, in, out backend.DevicePtr, count int,
	dtype backend.DType) error {
	return e.call(ctx, s, collective.OpAllGather, in, out, count, dtype, backend.Sum)
}

// Err is the communicator's recorded failure: one the library reported
// (ncclCommGetAsyncError after a call) or its creation's.
func (e *cclInterHost) Err() error {
	e.l.mu.Lock()
	nc := e.l.comms[e]
	e.l.mu.Unlock()
	if nc == nil {
		return nil
	}
	select {
	case <-nc.ready:
		return nc.err()
	default:
		return nil
	}
}

// Close aborts the communicator (ncclCommAbort): no waiting for peers.
func (e *cclInterHost) Close() error { return e.l.Release(e) }
