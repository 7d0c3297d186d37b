//go:build cuda

package cuda

/*
#cgo nocallback inu_nccl_collective
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/backend/internal/gpu"
	"github.com/intranode/intranode/collective"
	"github.com/intranode/intranode/symmetric/store"
)

// NCCL is the CUDA backend's fallback all-reduce: what a collective.Comm
// runs for algorithm None (sizes its kernels would not do faster, and the
// vendor anchor of `intranode bench`). libnccl.so.2 is opened at run time
// with dlopen, like the driver, so building needs no nccl.h and a binary
// starts on machines without NCCL; FallbackAllReduce then fails with an
// error matching backend.ErrUnavailable.
//
// One NCCL communicator serves each collective.Comm (each rank of a group
// that lives in this process has its own), created on the comm's first
// fallback all-reduce and cached in the Backend:
//
//  1. rank 0 calls ncclGetUniqueId and sets the id under
//     "<group>/nccl/<gen>/id" in the comm's store; the other ranks get it
//     (gen counts the group's communicators, see ncclBootstrap);
//  2. every rank sets "<group>/nccl/<gen>/join/<rank>" and waits for every
//     rank's key, so a rank that never calls the fallback ends in
//     ErrTimeout naming it, before any rank enters NCCL;
//  3. every rank calls ncclCommInitRank with its device's primary context
//     current (made current inside the same C call).
//
// Creation as a whole is bounded by the NCCL timeout (SetNCCLTimeout). The
// communicator is a blocking one: on a non-blocking communicator (config
// blocking=0) NCCL runs every later collective call on a thread it creates
// for the call and returns ncclInProgress, which would add a thread's start
// and join to each all-reduce and skew the NCCL anchor. Instead step 2 keeps
// missing ranks out of NCCL, and ncclCommInitRank runs on its own goroutine
// so that a rank that dies between steps 2 and 3 costs the caller the
// timeout, not a hang (the stuck call's communicator is aborted if it ever
// returns).
//
// The all-reduce is enqueued on the caller's stream, so stream order and
// graph capture work as for the comm's kernels; the communicator must exist
// before a capture begins (one eager call).
//
// A communicator lives until ReleaseFallback(comm) or Backend.Close, which
// abort it with ncclCommAbort (no waiting for peers, like Comm.Close). A
// comm that is closed without ReleaseFallback keeps its NCCL communicator,
// and the Backend keeps the comm, until Backend.Close.
//
// Before NCCL first reads its environment the backend turns NVLink
// multicast off and has NCCL connect the ranks at init (see
// applyNCCLEnvironment).

const (
	// EnvNCCLLibrary names the NCCL library to open instead of
	// libnccl.so.2 (a file name searched on the loader path, or a path).
	EnvNCCLLibrary = "INTRANODE_NCCL_LIBRARY"
	// DefaultNCCLTimeout bounds creating and releasing an NCCL
	// communicator when SetNCCLTimeout has not said otherwise.
	DefaultNCCLTimeout = collective.DefaultTimeout

	libncclName       = "libnccl.so.2"
	ncclUniqueIDBytes = C.INU_NCCL_UNIQUE_ID_BYTES
	// missingCheckTimeout bounds the store look-ups that name the ranks
	// that did not join, after the join itself timed out.
	missingCheckTimeout = time.Second
)

// ncclDataType_t and ncclRedOp_t values (nccl.h).
const (
	ncclInt32    = 2
	ncclFloat16  = 6
	ncclFloat32  = 7
	ncclFloat64  = 8
	ncclBfloat16 = 9

	ncclSum  = 0
	ncclProd = 1
	ncclMax  = 2
	ncclMin  = 3
)

// ncclResult_t values (nccl.h), indexed by result.
var ncclResultNames = []string{
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

// ncclDataType maps an element type to NCCL's.
func ncclDataType(d backend.DType) (int, error) {
	switch d {
	case backend.Float32:
		return ncclFloat32, nil
	case backend.Float16:
		return ncclFloat16, nil
	case backend.BFloat16:
		return ncclBfloat16, nil
	case backend.Float64:
		return ncclFloat64, nil
	case backend.Int32:
		return ncclInt32, nil
	}
	return 0, backend.Errorf(backend.CodeInvalidArgument, "cuda: NCCL: unsupported dtype %v", d)
}

// ncclRedOp maps a reduction to NCCL's.
func ncclRedOp(o backend.ReduceOp) (int, error) {
	switch o {
	case backend.Sum:
		return ncclSum, nil
	case backend.Max:
		return ncclMax, nil
	case backend.Min:
		return ncclMin, nil
	}
	return 0, backend.Errorf(backend.CodeInvalidArgument, "cuda: NCCL: unsupported reduction %v", o)
}

// NCCLError is a failed NCCL call: the entry point and the ncclResult_t it
// returned. The backend's errors wrap it under a backend.Code; reach it with
// errors.As to see NCCL's own answer.
type NCCLError struct {
	// Op is the NCCL entry point, e.g. "ncclCommInitRank".
	Op string
	// Result is the ncclResult_t number.
	Result int
	// Description is ncclGetErrorString's text for Result.
	Description string
	// Detail is ncclGetLastError's text, where NCCL has it (2.13 and
	// newer): what went wrong, in NCCL's words.
	Detail string
}

func newNCCLError(op string, r int) *NCCLError {
	e := &NCCLError{Op: op, Result: r}
	if s := C.inu_nccl_error_string(C.int(r)); s != nil {
		e.Description = C.GoString(s)
	}
	if s := C.inu_nccl_last_error(); s != nil {
		e.Detail = C.GoString(s)
	}
	return e
}

// Name is the result's name in nccl.h, e.g. "ncclInvalidArgument".
func (e *NCCLError) Name() string {
	if e.Result >= 0 && e.Result < len(ncclResultNames) {
		return ncclResultNames[e.Result]
	}
	return fmt.Sprintf("ncclResult_t(%d)", e.Result)
}

// Error formats the entry point, the result's name and number, NCCL's
// description and its last error.
func (e *NCCLError) Error() string {
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
func (e *NCCLError) Code() backend.Code {
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

// checkNCCL turns an NCCL shim's result into nil or an error: a
// *DriverError when the shim could not make its context current, else an
// *NCCLError naming op (or ncclCommGetAsyncError for a communicator that
// has failed).
func checkNCCL(op string, r int) error {
	switch {
	case r == C.INU_NCCL_SUCCESS:
		return nil
	case r&C.INU_NCCL_CUDA_FAILED != 0:
		return newDriverError("cuCtxSetCurrent", r&^C.INU_NCCL_CUDA_FAILED)
	case r&C.INU_NCCL_ASYNC != 0:
		return newNCCLError("ncclCommGetAsyncError", r&^C.INU_NCCL_ASYNC)
	}
	return newNCCLError(op, r)
}

// wrapNCCL is wrap for errors that may hold an *NCCLError, whose code it
// keeps.
func wrapNCCL(err error, format string, args ...any) error {
	var ne *NCCLError
	if errors.As(err, &ne) && backend.CodeOf(err) == backend.CodeUnknown {
		return backend.Wrap(ne.Code(), err, fmt.Sprintf(format, args...))
	}
	return wrap(err, format, args...)
}

// formatNCCLVersion spells an ncclGetVersion code as "major.minor.patch"
// (NCCL_VERSION_CODE: 1000*major+100*minor+patch up to 2.8, then
// 10000*major+100*minor+patch).
func formatNCCLVersion(code int) string {
	if code >= 10000 {
		return fmt.Sprintf("%d.%d.%d", code/10000, code%10000/100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/1000, code%1000/100, code%100)
}

// The NCCL library, like the driver's, is loaded once per process and never
// unloaded (its proxy and bootstrap threads live inside it). A failed load
// leaves nothing behind, so a later call tries again.
var ncclLib struct {
	mu     sync.Mutex
	loaded bool
}

// ncclLibraryPath is $INTRANODE_NCCL_LIBRARY, else libnccl.so.2.
func ncclLibraryPath() string {
	if p := os.Getenv(EnvNCCLLibrary); p != "" {
		return p
	}
	return libncclName
}

// loadNCCL opens the NCCL library (ncclLibraryPath) once.
func loadNCCL(log *slog.Logger) error { return loadNCCLFrom(ncclLibraryPath(), log) }

// loadNCCLFrom opens lib as the NCCL library, after setting NCCL's
// environment (applyNCCLEnvironment). Only the first successful load
// counts. Failures match backend.ErrUnavailable.
func loadNCCLFrom(lib string, log *slog.Logger) error {
	ncclLib.mu.Lock()
	defer ncclLib.mu.Unlock()
	if ncclLib.loaded {
		return nil
	}
	if err := applyNCCLEnvironment(log); err != nil {
		return err
	}
	path := C.CString(lib)
	defer C.free(unsafe.Pointer(path))
	var msg [loaderErrorBufferSize]C.char
	switch C.inu_nccl_load(path, &msg[0], C.size_t(len(msg))) {
	case 0:
		ncclLib.loaded = true
		return nil
	case 1:
		return backend.Errorf(backend.CodeUnavailable, "%s not found: %s (install NCCL, or set %s to the library)",
			lib, C.GoString(&msg[0]), EnvNCCLLibrary)
	default:
		return backend.Errorf(backend.CodeUnavailable, "%s is not a usable NCCL: %s", lib, C.GoString(&msg[0]))
	}
}

// applyNCCLEnvironment sets what NCCL must read from its environment before
// its first call:
//
//   - NCCL_NVLS_ENABLE=0, always: intranode never uses NVLink multicast (it
//     can take a shared host's GPUs out of service), so a different value
//     is overridden with a warning;
//   - NCCL_RUNTIME_CONNECT=0 unless it is set: NCCL then connects the
//     ranks inside ncclCommInitRank, which runs under the NCCL timeout,
//     instead of inside the first all-reduce, where a missing peer would
//     block the caller without a deadline.
func applyNCCLEnvironment(log *slog.Logger) error {
	if v, ok := os.LookupEnv("NCCL_NVLS_ENABLE"); !ok || v != "0" {
		if ok {
			log.Warn("cuda: overriding NCCL_NVLS_ENABLE: intranode never uses NVLink multicast", "was", v)
		}
		if err := os.Setenv("NCCL_NVLS_ENABLE", "0"); err != nil {
			return backend.Errorf(backend.CodeInternal, "cuda: setting NCCL_NVLS_ENABLE: %w", err)
		}
	}
	if _, ok := os.LookupEnv("NCCL_RUNTIME_CONNECT"); !ok {
		if err := os.Setenv("NCCL_RUNTIME_CONNECT", "0"); err != nil {
			return backend.Errorf(backend.CodeInternal, "cuda: setting NCCL_RUNTIME_CONNECT: %w", err)
		}
	}
	return nil
}

// ncclVersion asks the loaded library for its version.
func ncclVersion() (string, error) {
	var v C.int
	if err := checkNCCL("ncclGetVersion", int(C.inu_nccl_version(&v))); err != nil {
		return "", err
	}
	return formatNCCLVersion(int(v)), nil
}

// ncclUniqueID calls ncclGetUniqueId. NCCL starts its bootstrap root in
// this process; it waits for the ranks to connect.
func ncclUniqueID() ([]byte, error) {
	var id [ncclUniqueIDBytes]C.uchar
	if err := checkNCCL("ncclGetUniqueId", int(C.inu_nccl_unique_id(&id[0]))); err != nil {
		return nil, err
	}
	out := make([]byte, ncclUniqueIDBytes)
	for i := range id {
		out[i] = byte(id[i])
	}
	return out, nil
}

// ncclState is the Backend's NCCL communicators, one per collective.Comm.
type ncclState struct {
	mu      sync.Mutex
	closed  bool
	timeout time.Duration
	comms   map[any]*ncclComm // by ncclGroup.key
	// stop ends communicators still being created when the Backend
	// closes; nil until the first creation.
	stop   context.Context
	cancel context.CancelFunc
}

// ncclGroup is what a communicator is made for: the key it is cached under
// (the *collective.Comm), and that comm's store, group name, rank and size.
type ncclGroup struct {
	key   any
	store store.Store
	name  string
	rank  int
	world int
}

func groupOf(c *collective.Comm) ncclGroup {
	return ncclGroup{key: c, store: c.Store(), name: c.GroupName(), rank: c.Rank(), world: c.World()}
}

// ncclComm is one rank's NCCL communicator. The fields below ready are set
// by the goroutine that creates it before it closes ready, and read only
// after ready is closed.
type ncclComm struct {
	group string
	rank  int
	world int
	dev   int // device index

	ready chan struct{}

	h       uintptr   // ncclComm_t; 0 when creation failed
	ctx     ctxHandle // device's primary context, retained while h lives
	ordinal int

	failure  atomic.Pointer[ncclFailure]
	released atomic.Bool
	// stuck marks a communicator with a call still blocked inside NCCL:
	// release leaves it (and the context it holds) to the process's exit.
	stuck atomic.Bool
}

// ncclFailure is why a communicator cannot be used: its creation failed
// or NCCL reported an asynchronous error. It sticks: the comm's later
// fallback all-reduces fail with it.
type ncclFailure struct{ err error }

func (nc *ncclComm) fail(err error) { nc.failure.CompareAndSwap(nil, &ncclFailure{err}) }

func (nc *ncclComm) err() error {
	if f := nc.failure.Load(); f != nil {
		return f.err
	}
	return nil
}

func (nc *ncclComm) String() string {
	return fmt.Sprintf("%s rank %d of %d on device %d", nc.group, nc.rank, nc.world, nc.dev)
}

// wait waits, at most timeout, until the communicator's creation has ended.
func (nc *ncclComm) wait(timeout time.Duration) error {
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
		return backend.Errorf(backend.CodeTimeout, "cuda: NCCL communicator for %s still being created after %v", nc, timeout)
	}
}

// release aborts the communicator and releases its context, once, waiting
// at most timeout: the abort waits for CUDA graphs that captured the
// communicator's all-reduce to be destroyed. Call it only once ready is
// closed (or from the goroutine that closes it).
func (nc *ncclComm) release(timeout time.Duration) error {
	if !nc.released.CompareAndSwap(false, true) || nc.h == 0 || nc.stuck.Load() {
		return nil
	}
	done := make(chan error, 1)
	go func() {
		err := checkNCCL("ncclCommAbort", int(C.inu_nccl_abort(C.uintptr_t(nc.ctx), C.uintptr_t(nc.h))))
		if err != nil {
			err = wrapNCCL(err, "cuda: aborting the NCCL communicator for %s", nc)
		}
		if rerr := ctxRelease(nc.ordinal); rerr != nil {
			err = errors.Join(err, wrap(rerr, "cuda: device %d: releasing the primary context", nc.dev))
		}
		done <- err
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return backend.Errorf(backend.CodeTimeout,
			"cuda: the NCCL communicator for %s is still being aborted after %v (is a CUDA graph that captured its all-reduce still alive?)",
			nc, timeout)
	}
}

// close waits for the communicator's creation to end and releases it.
func (nc *ncclComm) close(timeout time.Duration) error {
	if err := nc.wait(timeout); err != nil {
		// The creating goroutine releases it when it finds it dropped.
		return err
	}
	return nc.release(timeout)
}

// SetNCCLTimeout bounds creating an NCCL communicator (the store exchange,
// the wait for every rank and ncclCommInitRank together) and releasing one;
// d <= 0 restores DefaultNCCLTimeout. It applies to communicators created
// or released afterwards.
func (b *Backend) SetNCCLTimeout(d time.Duration) {
	b.nccl.mu.Lock()
	b.nccl.timeout = d
	b.nccl.mu.Unlock()
}

func (b *Backend) ncclTimeoutLocked() time.Duration {
	if b.nccl.timeout > 0 {
		return b.nccl.timeout
	}
	return DefaultNCCLTimeout
}

// NCCLVersion opens the NCCL library (libnccl.so.2, or
// $INTRANODE_NCCL_LIBRARY) and reports its version, "2.28.9". It needs no
// GPU. A missing library is an error matching backend.ErrUnavailable.
func (b *Backend) NCCLVersion() (string, error) {
	if b.Closed() {
		return "", backend.Errorf(backend.CodeClosed, "cuda: backend is closed")
	}
	if err := loadNCCL(b.log); err != nil {
		return "", fmt.Errorf("cuda: %w", err)
	}
	v, err := ncclVersion()
	if err != nil {
		return "", wrapNCCL(err, "cuda: NCCL version")
	}
	return v, nil
}

// FallbackAllReduce reduces count elements of dtype from in into out (they
// may be equal) with NCCL's all-reduce across c's ranks, enqueued on s, a
// stream of this backend on the rank's device. The first call for c
// creates c's NCCL communicator (see the NCCL comment above): it blocks
// until every rank of c has made its first fallback call too, at most the
// NCCL timeout, and must not happen while s is capturing. Later calls only
// enqueue, and may be captured into a graph. A missing NCCL library is an
// error matching backend.ErrUnavailable, a rank that does not join one
// matching backend.ErrTimeout.
func (b *Backend) FallbackAllReduce(ctx context.Context, s backend.Stream, c *collective.Comm, in, out backend.DevicePtr, count int,
	dtype backend.DType, op backend.ReduceOp) error {
	st, ok := s.(*gpu.Stream)
	if !ok || st.Device().Core() != &b.Core {
		return backend.Errorf(backend.CodeInvalidArgument, "cuda: NCCL all-reduce: %T is not a stream of this backend", s)
	}
	if err := st.Usable(); err != nil {
		return err
	}
	if c == nil {
		return backend.Errorf(backend.CodeInvalidArgument, "cuda: NCCL all-reduce: nil comm")
	}
	return b.allReduceNCCL(ctx, st, groupOf(c), in, out, count, dtype, op)
}

// allReduceNCCL is FallbackAllReduce for group g.
func (b *Backend) allReduceNCCL(ctx context.Context, st *gpu.Stream, g ncclGroup, in, out backend.DevicePtr, count int,
	dtype backend.DType, op backend.ReduceOp) error {
	return b.collectiveNCCL(ctx, st, g, collective.OpAllReduce, in, out, count, dtype, op, 0)
}

// FallbackMove runs a reduce-scatter, all-gather, broadcast or all-to-all
// through NCCL for c's ranks (ncclReduceScatter, ncclAllGather,
// ncclBroadcast, and a group of ncclSend/ncclRecv for the all-to-all), on
// the communicator FallbackAllReduce uses, with the same first-call rules.
// count is per rank as collective.Comm's methods take it. An all-to-all
// in place is refused (NCCL's receives would overwrite blocks not yet
// sent): the comm's kernels serve it.
func (b *Backend) FallbackMove(ctx context.Context, s backend.Stream, c *collective.Comm, op collective.Op, in, out backend.DevicePtr,
	count int, dtype backend.DType, red backend.ReduceOp, root int) error {
	st, ok := s.(*gpu.Stream)
	if !ok || st.Device().Core() != &b.Core {
		return backend.Errorf(backend.CodeInvalidArgument, "cuda: NCCL %v: %T is not a stream of this backend", op, s)
	}
	if err := st.Usable(); err != nil {
		return err
	}
	if op == collective.OpAllToAll && in == out {
		return backend.Errorf(backend.CodeUnavailable, "cuda: NCCL has no all-to-all in place")
	}
	if c == nil {
		return backend.Errorf(backend.CodeInvalidArgument, "cuda: NCCL %v: nil comm", op)
	}
	if op != collective.OpReduceScatter {
		red = backend.Sum
	}
	return b.collectiveNCCL(ctx, st, groupOf(c), op, in, out, count, dtype, red, root)
}

// collectiveNCCL enqueues one NCCL collective for group g.
func (b *Backend) collectiveNCCL(ctx context.Context, st *gpu.Stream, g ncclGroup, op collective.Op, in, out backend.DevicePtr, count int,
	dtype backend.DType, red backend.ReduceOp, root int) error {
	if count <= 0 {
		return backend.Errorf(backend.CodeInvalidArgument, "cuda: NCCL %v: count %d must be positive", op, count)
	}
	if op > collective.OpAllToAll {
		return backend.Errorf(backend.CodeInvalidArgument, "cuda: NCCL: unknown collective %v", op)
	}
	dt, err := ncclDataType(dtype)
	if err != nil {
		return err
	}
	rop, err := ncclRedOp(red)
	if err != nil {
		return err
	}
	nc, err := b.ncclFor(ctx, g, st)
	if err != nil {
		return err
	}
	enqueue := func() int {
		return int(C.inu_nccl_collective(C.uintptr_t(st.Device().Ctx()), C.uintptr_t(nc.h), C.int(op), C.uint64_t(in),
			C.uint64_t(out), C.size_t(count), C.size_t(dtype.Size()), C.int(dt), C.int(rop), C.int(root),
			C.int(nc.world), C.uintptr_t(st.Handle())))
	}
	var r int
	if op == collective.OpAllToAll && !st.Capturing() {
		// NCCL connects a send/receive pair to its peer on first use,
		// inside the enqueue call (NCCL_RUNTIME_CONNECT=0 connects only the
		// collectives' rings and trees at init), and a dead peer never
		// answers: the call would block past any deadline. It runs on a
		// goroutine of its own, and the caller leaves at ctx's end. The
		// communicator is then failed and never aborted: ncclCommAbort
		// frees it under the blocked call, which crashed the process when
		// the abort woke it (4×H200 kill trials,
		// docs/results/2026-11-26-session8-h200x4/run5).
		done := make(chan int, 1)
		go func() { done <- enqueue() }()
		select {
		case r = <-done:
		case <-ctx.Done():
			err := backend.Errorf(backend.CodeTimeout,
				"cuda: NCCL all-to-all for %s still connecting to its peers at the call's deadline (a peer gone?): %v", nc, ctx.Err())
			nc.fail(err)
			nc.stuck.Store(true)
			return err
		}
	} else {
		r = enqueue()
	}
	if r == C.INU_NCCL_SUCCESS {
		return nil
	}
	err = wrapNCCL(checkNCCL("nccl "+op.String(), r), "cuda: NCCL %v of %d %v elements (%v) for %s", op, count, dtype, red, nc)
	if r&C.INU_NCCL_ASYNC != 0 {
		nc.fail(err)
	}
	return err
}

// ncclFor returns g's communicator, creating it on first use. Creating it,
// or waiting for another caller to, ends at ctx's deadline or the NCCL
// timeout, whichever comes first: a rank that dies before or inside
// ncclCommInitRank costs its peers no more than their call's deadline.
func (b *Backend) ncclFor(ctx context.Context, g ncclGroup, st *gpu.Stream) (*ncclComm, error) {
	b.nccl.mu.Lock()
	if b.nccl.closed {
		b.nccl.mu.Unlock()
		return nil, backend.Errorf(backend.CodeClosed, "cuda: backend is closed")
	}
	timeout := b.ncclTimeoutLocked()
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(min(timeout, time.Until(dl)), time.Millisecond)
	}
	nc := b.nccl.comms[g.key]
	if nc == nil {
		if st.Capturing() {
			b.nccl.mu.Unlock()
			return nil, backend.Errorf(backend.CodeInvalidArgument,
				"cuda: device %d: the NCCL communicator of %s rank %d is created by its first fallback all-reduce, which cannot run while the stream is capturing: make one call before BeginCapture",
				st.Device().Index(), g.name, g.rank)
		}
		if b.nccl.comms == nil {
			b.nccl.comms = map[any]*ncclComm{}
		}
		if b.nccl.stop == nil {
			b.nccl.stop, b.nccl.cancel = context.WithCancel(context.Background())
		}
		// Creation ends when the backend closes or the caller gives up.
		stop, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(b.nccl.stop, cancel)()
		nc = &ncclComm{group: g.name, rank: g.rank, world: g.world, dev: st.Device().Index(), ready: make(chan struct{})}
		b.nccl.comms[g.key] = nc
		b.nccl.mu.Unlock()
		b.createNCCL(stop, g, nc, st.Device(), timeout)
	} else {
		b.nccl.mu.Unlock()
		if err := nc.wait(timeout); err != nil {
			return nil, err
		}
	}
	if err := nc.err(); err != nil {
		return nil, err
	}
	if nc.dev != st.Device().Index() {
		return nil, backend.Errorf(backend.CodeInvalidArgument,
			"cuda: the NCCL communicator for %s is on device %d, the stream on device %d", nc, nc.dev, st.Device().Index())
	}
	return nc, nil
}

// createNCCL creates nc for g on d, records the outcome in nc and closes
// nc.ready. Creation stops early when stop ends (Backend.Close). A
// communicator that was dropped meanwhile (ReleaseFallback, Close) is
// released here.
func (b *Backend) createNCCL(stop context.Context, g ncclGroup, nc *ncclComm, d *gpu.Device, timeout time.Duration) {
	defer close(nc.ready)
	err := b.initNCCL(stop, g.store, nc, d, timeout)
	b.nccl.mu.Lock()
	dropped := b.nccl.closed || b.nccl.comms[g.key] != nc
	b.nccl.mu.Unlock()
	switch {
	case dropped:
		nc.fail(backend.Errorf(backend.CodeClosed, "cuda: the NCCL communicator for %s was released while being created", nc))
		if err := nc.release(timeout); err != nil {
			b.log.Warn("cuda: releasing a dropped NCCL communicator", "comm", nc.String(), "err", err)
		}
	case err != nil:
		nc.fail(err)
		b.log.Debug("cuda: NCCL communicator not created", "comm", nc.String(), "err", err)
	default:
		b.log.Debug("cuda: NCCL communicator created", "comm", nc.String())
	}
}

// initNCCL runs the three steps of the NCCL comment, together bounded by
// timeout and ended early by stop, and fills nc.h, nc.ctx and nc.ordinal.
func (b *Backend) initNCCL(stop context.Context, st store.Store, nc *ncclComm, d *gpu.Device, timeout time.Duration) error {
	what := "cuda: NCCL communicator for " + nc.String()
	if nc.group == "" {
		return backend.Errorf(backend.CodeInvalidArgument, "%s: the comm has not rendezvoused", what)
	}
	if st == nil {
		return backend.Errorf(backend.CodeInvalidArgument, "%s: the comm has no store", what)
	}
	if err := loadNCCL(b.log); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	ctx, cancel := context.WithTimeout(stop, timeout)
	defer cancel()
	id, err := ncclBootstrap(ctx, st, nc.group, nc.rank, nc.world, ncclUniqueID)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	cctx, err := ctxRetain(b.devices[d.Index()].ordinal)
	if err != nil {
		return wrap(err, "%s: retaining the primary context", what)
	}
	type result struct {
		h   uintptr
		err error
	}
	done := make(chan result, 1)
	go func() {
		var h C.uintptr_t
		r := C.inu_nccl_init(C.uintptr_t(cctx), C.int(nc.world), (*C.uchar)(unsafe.Pointer(&id[0])), C.int(nc.rank), &h)
		done <- result{uintptr(h), checkNCCL("ncclCommInitRank", int(r))}
	}()
	select {
	case res := <-done:
		if res.err != nil {
			_ = ctxRelease(b.devices[d.Index()].ordinal)
			return wrapNCCL(res.err, "%s", what)
		}
		nc.h, nc.ctx, nc.ordinal = res.h, cctx, b.devices[d.Index()].ordinal
		return nil
	case <-ctx.Done():
		go func() {
			if res := <-done; res.h != 0 {
				_ = C.inu_nccl_abort(C.uintptr_t(cctx), C.uintptr_t(res.h))
			}
			_ = ctxRelease(b.devices[d.Index()].ordinal)
		}()
		return backend.Errorf(backend.CodeTimeout,
			"%s: ncclCommInitRank did not finish within %v although every rank had joined (did a rank stop?): %w",
			what, timeout, ctx.Err())
	}
}

// ncclBootstrap agrees on group's NCCL unique id through st and waits until
// every rank has joined. Each creation of the group's communicators is a
// generation: every rank counts its own under "<group>/nccl/rank-<rank>",
// so ranks that release and recreate their communicators together meet
// under fresh keys, "<group>/nccl/<gen>/…". Rank 0 makes the id with newID
// and sets it under ".../id", the others get it; every rank sets
// ".../join/<rank>" and waits for all of them. It fails when ctx ends
// first, naming the ranks that did not join, and then marks the generation
// abandoned (".../abandoned"), so that a rank joining after the others gave
// up fails too instead of entering NCCL alone.
func ncclBootstrap(ctx context.Context, st store.Store, group string, rank, world int,
	newID func() ([]byte, error)) (id []byte, err error) {
	gen, err := st.Add(ctx, fmt.Sprintf("%s/nccl/rank-%d", group, rank), 1)
	if err != nil {
		return nil, storeError(err, "counting the NCCL communicators of rank %d", rank)
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
			return nil, storeError(err, "publishing the NCCL unique id")
		}
	}
	if err := st.Set(ctx, join[rank], []byte{1}); err != nil {
		return nil, storeError(err, "announcing rank %d", rank)
	}
	if rank != 0 {
		if id, err = st.Get(ctx, idKey); err != nil {
			return nil, storeError(err, "waiting for rank 0's NCCL unique id (rank 0 has not made its first fallback all-reduce)")
		}
	}
	if err := st.Wait(ctx, join...); err != nil {
		return nil, storeError(err, "ranks %v did not make their first fallback all-reduce", missingRanks(st, join))
	}
	if gaveUp, err := st.Check(ctx, abandoned); err != nil || gaveUp {
		if err == nil {
			err = backend.Errorf(backend.CodeTimeout, "a rank stopped waiting for the others")
		}
		return nil, storeError(err, "joining NCCL communicator generation %d", gen)
	}
	if len(id) != ncclUniqueIDBytes {
		return nil, backend.Errorf(backend.CodeInternal, "the NCCL unique id under %q has %d bytes, want %d", idKey, len(id), ncclUniqueIDBytes)
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

// ReleaseFallback aborts the NCCL communicator FallbackAllReduce created
// for c, if any, without waiting for c's peers (work of it still queued is
// cut short: synchronise first). The collective layer calls it when c
// closes; a later fallback all-reduce on c would create a new communicator,
// which needs a new rendezvous of c. It waits at most the NCCL timeout.
func (b *Backend) ReleaseFallback(c *collective.Comm) error { return b.releaseNCCL(c) }

// releaseNCCL is ReleaseFallback for the communicator cached under key.
func (b *Backend) releaseNCCL(key any) error {
	b.nccl.mu.Lock()
	nc := b.nccl.comms[key]
	delete(b.nccl.comms, key)
	timeout := b.ncclTimeoutLocked()
	b.nccl.mu.Unlock()
	if nc == nil {
		return nil
	}
	return nc.close(timeout)
}

// closeNCCL aborts every NCCL communicator (Backend.Close), concurrently,
// each waiting at most the NCCL timeout.
func (b *Backend) closeNCCL() error {
	b.nccl.mu.Lock()
	b.nccl.closed = true
	comms := b.nccl.comms
	b.nccl.comms = nil
	timeout := b.ncclTimeoutLocked()
	if b.nccl.cancel != nil {
		b.nccl.cancel()
	}
	b.nccl.mu.Unlock()
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

var _ collective.FallbackAllReducer = (*Backend)(nil)
var _ collective.FallbackMover = (*Backend)(nil)
