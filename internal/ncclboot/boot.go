package ncclboot

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef int (*nb_get_fn)(void *, int *);
typedef int (*nb_allgather_fn)(const void *, void *, size_t, int, void *, void *);

static int nb_get(void *fn, void *comm, int *out) { return ((nb_get_fn)fn)(comm, out); }

// nb_allgather all-gathers count 32-bit words (ncclInt32).
static int nb_allgather(void *fn, uintptr_t send, uintptr_t recv, size_t count, void *comm, uintptr_t stream) {
	return ((nb_allgather_fn)fn)((const void *)send, (void *)recv, count, 2, comm, (void *)stream);
}

static void *nb_open(const char *path, int noload) {
	return dlopen(path, RTLD_NOW | RTLD_LOCAL | (noload ? RTLD_NOLOAD : 0));
}

static const char *nb_error(void) {
	const char *e = dlerror();
	return e ? e : "unknown dlopen error";
}
*/
import "C"

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unsafe"

	"github.com/intranode/intranode/backend"
	"github.com/intranode/intranode/capi"
	"github.com/intranode/intranode/kernels"
)

// Funcs are the real NCCL's functions the bootstrap calls, as C function
// pointers (the library's own, not an interposer's). CommGetAsyncError
// tells when an all-gather on a nonblocking communicator, which returned
// ncclInProgress, has been enqueued.
type Funcs struct {
	CommCount, CommUserRank, CommCuDevice, AllGather, CommGetAsyncError unsafe.Pointer
}

// inProgress is ncclInProgress: a call on a nonblocking communicator
// (ncclConfig_t.blocking = 0, as PyTorch's TORCH_NCCL_USE_COMM_NONBLOCKING
// makes) returns it and finishes in the background; the caller polls
// ncclCommGetAsyncError until the state is no longer ncclInProgress.
const inProgress = 7

// Load opens the NCCL at path (empty: the libnccl.so.2 the process has
// loaded, else a fresh one) and looks the bootstrap's functions up in it.
func Load(path string) (Funcs, error) {
	noload := C.int(0)
	if path == "" {
		path, noload = "libnccl.so.2", 1
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	h := C.nb_open(cpath, noload)
	if h == nil && noload == 1 {
		h = C.nb_open(cpath, 0)
	}
	if h == nil {
		return Funcs{}, backend.Errorf(backend.CodeUnavailable, "intranode: loading NCCL (%s): %s", path, C.GoString(C.nb_error()))
	}
	var f Funcs
	for _, s := range []struct {
		name string
		p    *unsafe.Pointer
	}{{"ncclCommCount", &f.CommCount}, {"ncclCommUserRank", &f.CommUserRank}, {"ncclCommCuDevice", &f.CommCuDevice},
		{"ncclAllGather", &f.AllGather}, {"ncclCommGetAsyncError", &f.CommGetAsyncError}} {
		cname := C.CString(s.name)
		*s.p = C.dlsym(h, cname)
		C.free(unsafe.Pointer(cname))
		if *s.p == nil {
			return Funcs{}, backend.Errorf(backend.CodeNotSupported, "intranode: %s has no %s", path, s.name)
		}
	}
	return f, nil
}

// Options are how Bootstrap forms the comm.
type Options struct {
	// Context, when not nil, cancels the bootstrap (the communicator is
	// being aborted); Timeout bounds it either way.
	Context context.Context
	// Backend names intranode's backend ("" is "auto").
	Backend string
	// Timeout bounds the bootstrap and every wait of the comm's calls.
	Timeout time.Duration
	// Log receives the bootstrap's steps when Trace is set; CommLog the
	// comm's own debug logs. Both may be nil.
	Log, CommLog *slog.Logger
	Trace        bool
	// Stats, when not nil, receives where the bootstrap's time went,
	// whether it succeeded or not.
	Stats *Stats
}

// Stats says where a bootstrap's time went.
type Stats struct {
	// Open is opening the backend (the first time in the process), the
	// device and the all-gathers' stream.
	Open time.Duration
	// First is the first all-gather: it waits for the last rank to make
	// its first eligible call, and NCCL connects the communicator's
	// all-gather path in it.
	First time.Duration
	// Rounds counts the all-gathers, the first included, and Gather is
	// the time spent in them.
	Rounds int
	Gather time.Duration
	// Total is the whole bootstrap; Total-Open-Gather is intranode's own
	// setup (symmetric memory, peer mappings, kernels).
	Total time.Duration
}

// Attrs are slog attributes for a log line.
func (s Stats) Attrs() []any {
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	return []any{"open", r(s.Open), "first_gather", r(s.First), "gathers", s.Rounds, "gather", r(s.Gather),
		"setup", r(s.Total - s.Open - s.Gather)}
}

// Bootstrap forms rank's intranode comm over the NCCL communicator comm,
// every rank at the same point. An error means no rank has the comm.
func Bootstrap(f Funcs, comm unsafe.Pointer, o Options) (*capi.Comm, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	var n, r, d C.int
	for _, q := range []struct {
		fn  unsafe.Pointer
		out *C.int
	}{{f.CommCount, &n}, {f.CommUserRank, &r}, {f.CommCuDevice, &d}} {
		if res := C.nb_get(q.fn, comm, q.out); res != 0 {
			return nil, fmt.Errorf("intranode bootstrap: ncclCommCount/UserRank/CuDevice: NCCL result %d", int(res))
		}
	}
	world, rank, dev := int(n), int(r), int(d)
	if o.Trace {
		o.Log.Debug("bootstrap: the NCCL communicator", "rank", rank, "nranks", world, "device", dev)
	}
	if world < 2 || world > kernels.MaxRanks {
		return nil, fmt.Errorf("%d ranks: intranode serves 2 to %d", world, kernels.MaxRanks)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	parent := o.Context
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	var st Stats
	start := time.Now()
	if o.Stats != nil {
		defer func() {
			st.Total = time.Since(start)
			*o.Stats = st
		}()
	}
	g, err := openGather(ctx, o.Backend, dev, f, comm, world)
	st.Open = time.Since(start)
	if err != nil {
		return nil, err
	}
	defer g.close()
	// The kernels' module loads while the first all-gather waits for the
	// last rank and NCCL connects the communicator (about 150 ms on GPUs):
	// the comm's rendezvous, which loads it after that all-gather, then
	// finds it loaded (a device's built-in module is loaded once per
	// process) instead of spending some 45 ms on it.
	ended := make(chan struct{})
	defer close(ended)
	go preloadModule(ctx, o.Backend, dev, ended)
	gather := func(ctx context.Context, mine []byte) ([][]byte, error) {
		t := time.Now()
		all, err := g.allGather(ctx, mine)
		took := time.Since(t)
		if st.Rounds == 0 {
			st.First = took
		}
		st.Rounds++
		st.Gather += took
		if o.Trace {
			o.Log.Debug("bootstrap: round", "rank", rank, "bytes", len(mine), "took", took, "err", err)
		}
		return all, err
	}
	gs := newGatherStore(world, gather)
	cm, ierr := capi.InitWithStore(ctx, gs, rank, world, capi.Config{Backend: o.Backend, Device: dev, Timeout: timeout, Logger: o.CommLog})
	ok, ferr := gs.finish(ctx, ierr == nil)
	switch {
	case ierr == nil && ok:
		return cm, nil
	case ierr == nil:
		_ = cm.Destroy()
		if ferr != nil {
			return nil, ferr
		}
		return nil, fmt.Errorf("intranode bootstrap: %s", gs.endedText())
	case errors.Is(ferr, ErrSequenceLost) && !errors.Is(ierr, ErrSequenceLost):
		return nil, fmt.Errorf("%w (the comm: %v)", ferr, ierr)
	}
	return nil, ierr
}

// preloadModule loads the kernels' module on a handle of device index of
// its own and holds it until ended closes, when the comm, if formed, holds
// its own reference. The bootstrap never waits for it: a load held up
// behind a kernel that never ends (an all-gather waiting for a dead rank)
// holds up only this goroutine. A failed load is left for the comm's
// rendezvous to report.
func preloadModule(ctx context.Context, name string, index int, ended <-chan struct{}) {
	b, err := capi.Backend(ctx, name)
	if err != nil {
		return
	}
	d, err := b.Open(ctx, index)
	if err != nil {
		return
	}
	defer d.Close()
	m, err := d.LoadModule(ctx, backend.ModuleSource{Name: kernels.ModuleName})
	if err != nil {
		return
	}
	<-ended
	_ = m.Close()
}

// ncclGather all-gathers bytes on an NCCL communicator through a scratch
// buffer of the device and a stream of its own.
type ncclGather struct {
	dev         backend.Device
	s           backend.Stream
	native      uintptr // the stream NCCL is given (0 without runtime streams)
	scratch     backend.Allocation
	inflight    bool // an all-gather into scratch was issued and not seen done
	allGatherFn unsafe.Pointer
	asyncFn     unsafe.Pointer // ncclCommGetAsyncError
	comm        unsafe.Pointer
	world       int
}

func openGather(ctx context.Context, name string, index int, f Funcs, comm unsafe.Pointer, world int) (_ *ncclGather, err error) {
	g := &ncclGather{allGatherFn: f.AllGather, asyncFn: f.CommGetAsyncError, comm: comm, world: world}
	defer func() {
		if err != nil {
			g.close()
		}
	}()
	b, err := capi.Backend(ctx, name)
	if err != nil {
		return nil, err
	}
	if g.dev, err = b.Open(ctx, index); err != nil {
		return nil, err
	}
	if g.s, err = g.dev.NewStream(ctx); err != nil {
		return nil, err
	}
	if ns, ok := g.dev.(backend.NativeStreams); ok {
		g.native, _ = ns.NativeStream(g.s)
	}
	return g, nil
}

// close releases the gather's stream and device, and its scratch unless
// an all-gather into it was issued and not seen done: NCCL may still
// write it until the communicator is aborted, so it is left allocated.
func (g *ncclGather) close() {
	if g.scratch != nil && !g.inflight {
		_ = g.scratch.Close()
	}
	if g.s != nil {
		_ = g.s.Close()
	}
	if g.dev != nil {
		_ = g.dev.Close()
	}
}

// round all-gathers len(mine) bytes (a multiple of 4) from every rank.
func (g *ncclGather) round(ctx context.Context, mine []byte) ([][]byte, error) {
	size := len(mine)
	need := size * (g.world + 1)
	if g.scratch == nil || g.scratch.Size() < need {
		if g.scratch != nil {
			_ = g.scratch.Close()
			g.scratch = nil
		}
		a, err := g.dev.Alloc(ctx, max(need, 64<<10))
		if err != nil {
			return nil, err
		}
		g.scratch = a
	}
	send := g.scratch.Ptr()
	recv := send.Add(size)
	if err := g.dev.CopyToDevice(ctx, send, mine); err != nil {
		return nil, err
	}
	res := C.nb_allgather(g.allGatherFn, C.uintptr_t(send), C.uintptr_t(recv), C.size_t(size/4), g.comm, C.uintptr_t(g.native))
	g.inflight = res == 0 || res == inProgress
	if res == inProgress {
		res = g.settle(ctx)
	}
	if res == -1 {
		return nil, backend.Errorf(waitCode(ctx.Err(), backend.CodeTimeout), "intranode bootstrap: ncclAllGather still in progress on the nonblocking NCCL communicator: %v", ctx.Err())
	}
	if res != 0 {
		return nil, backend.Errorf(backend.CodePeerFailed, "intranode bootstrap: ncclAllGather returned %d", int(res))
	}
	if err := g.s.Synchronize(ctx); err != nil {
		return nil, backend.Wrap(waitCode(ctx.Err(), backend.CodeTimeout), err, "intranode bootstrap: waiting for ncclAllGather")
	}
	g.inflight = false
	all := make([]byte, size*g.world)
	if err := g.dev.CopyFromDevice(ctx, all, recv); err != nil {
		return nil, err
	}
	out := make([][]byte, g.world)
	for r := range out {
		out[r] = all[r*size : (r+1)*size]
	}
	return out, nil
}

// settle polls the real ncclCommGetAsyncError after a call that returned
// ncclInProgress until the communicator's state is something else, and
// returns that state, or -1 when ctx ends first. The polls back off from
// 10 µs to 1 ms.
func (g *ncclGather) settle(ctx context.Context) C.int {
	wait := 10 * time.Microsecond
	for {
		var state C.int
		if res := C.nb_get(g.asyncFn, g.comm, &state); res != 0 {
			return res
		}
		if state != inProgress {
			return state
		}
		select {
		case <-ctx.Done():
			return -1
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Millisecond)
	}
}

// allGather all-gathers byte strings of any length: their lengths first,
// then the strings padded to the longest.
func (g *ncclGather) allGather(ctx context.Context, mine []byte) ([][]byte, error) {
	lens, err := g.round(ctx, binary.LittleEndian.AppendUint64(nil, uint64(len(mine))))
	if err != nil {
		return nil, err
	}
	longest := 0
	for r, l := range lens {
		n := binary.LittleEndian.Uint64(l)
		if n > 64<<20 {
			return nil, backend.Errorf(backend.CodeInternal, "intranode bootstrap: rank %d sends %d bytes", r, n)
		}
		longest = max(longest, int(n))
	}
	padded := make([]byte, max((longest+3)&^3, 4))
	copy(padded, mine)
	all, err := g.round(ctx, padded)
	if err != nil {
		return nil, err
	}
	for r := range all {
		all[r] = all[r][:binary.LittleEndian.Uint64(lens[r])]
	}
	return all, nil
}
