// ncclapi.c: the C side of the NCCL-API library. It loads the real NCCL,
// forwards every function it does not run itself, keeps NCCL's group
// state per thread, and hands the collectives it may run to Go
// (intranodeNcclRun), which decides. Logic beyond that lives in Go.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_decl.h"
#include "_cgo_export.h"

// --- the real library -----------------------------------------------------

ncclResult_t ncclAllReduce(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);

static void *real;
static char real_error[512];
static pthread_once_t real_once = PTHREAD_ONCE_INIT;

// load opens the NCCL the program would have used: INTRANODE_NCCL_LIBRARY
// if set, else the libnccl.so.2 already loaded (in any scope), else a
// fresh one. A library that turns out to be this one is refused.
static void load(void) {
	const char *path = getenv("INTRANODE_NCCL_LIBRARY");
	if (path != NULL && *path != 0) {
		real = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	} else {
		path = "libnccl.so.2";
		real = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
		if (real == NULL) real = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	}
	if (real == NULL) {
		snprintf(real_error, sizeof real_error, "intranode: cannot load the real NCCL (%s): %s", path, dlerror());
		return;
	}
	if (dlsym(real, "ncclAllReduce") == (void *)ncclAllReduce) {
		snprintf(real_error, sizeof real_error,
		         "intranode: %s is this library, not NCCL; set INTRANODE_NCCL_LIBRARY to the real libnccl.so.2", path);
		real = NULL;
	}
}

void *intranode_real_sym(const char *name) {
	pthread_once(&real_once, load);
	return real != NULL ? dlsym(real, name) : NULL;
}

const char *intranode_real_error(void) {
	pthread_once(&real_once, load);
	return real_error;
}

// --- errors -----------------------------------------------------------------

static __thread char last_error[1024];
static __thread int last_error_ours;

void intranode_set_error(const char *msg, size_t n) {
	if (n >= sizeof last_error) n = sizeof last_error - 1;
	memcpy(last_error, msg, n);
	last_error[n] = 0;
	last_error_ours = 1;
}

// missing reports a function the real library lacks (or no real library).
ncclResult_t intranode_missing(const char *name) {
	char msg[768];
	const char *why = intranode_real_error();
	int n = *why ? snprintf(msg, sizeof msg, "%s", why)
	             : snprintf(msg, sizeof msg, "intranode: the real NCCL has no %s", name);
	intranode_set_error(msg, n < 0 ? 0 : (size_t)n);
	return *why ? ncclSystemError : ncclInvalidUsage;
}

// REAL(name, ret, params) binds the real library's name once, as f_.
#define REAL(name, ret, params)                                                           \
	typedef ret(*name##_fn) params;                                                       \
	static name##_fn fn_;                                                                 \
	name##_fn f_ = __atomic_load_n(&fn_, __ATOMIC_ACQUIRE);                               \
	if (f_ == NULL) {                                                                     \
		f_ = (name##_fn)intranode_real_sym(#name);                                        \
		__atomic_store_n(&fn_, f_, __ATOMIC_RELEASE);                                     \
	}

// --- switches ---------------------------------------------------------------

static int enabled = -1;

// intranode_enabled: INTRANODE_NCCL=off (or 0, false) makes the library a
// pure pass-through.
int intranode_enabled(void) {
	int e = __atomic_load_n(&enabled, __ATOMIC_RELAXED);
	if (e < 0) {
		const char *v = getenv("INTRANODE_NCCL");
		e = !(v != NULL && (strcmp(v, "off") == 0 || strcmp(v, "0") == 0 || strcmp(v, "false") == 0));
		__atomic_store_n(&enabled, e, __ATOMIC_RELAXED);
	}
	return e;
}

// --- re-entry ---------------------------------------------------------------

// inside counts this thread's calls into Go. The real NCCL calls its own
// public functions (ncclCommCount calls ncclCommGetAsyncError, say), and
// with this library in front those calls land here: while a thread is
// inside Go, every function goes straight to the real library, so that
// nothing re-enters Go (and waits for a lock the same thread holds).
static __thread int inside;

// --- groups -----------------------------------------------------------------

// A group whose calls are all collectives on one communicator (up to
// MAX_HELD of them, as PyTorch's coalesced calls make) is held and, after
// the real group has ended, handed to Go, which runs every call on
// intranode or sends the whole group to NCCL in a group of its own. Any
// other call in the group, and any collective that goes to NCCL whatever
// its size (on a communicator ruled out, of a datatype or reduction
// intranode lacks), first sends the held ones to NCCL, in order, and
// joins the caller's group there, as without the library.
enum { MAX_HELD = 64 };
static __thread int depth;
static __thread int held_n, others;
// held is this thread's buffer of MAX_HELD calls, on the heap: a library
// loaded with dlopen has little static TLS to spare. The key frees it when
// the thread exits.
static __thread struct intranode_call *held;
static pthread_key_t held_key;
static pthread_once_t held_once = PTHREAD_ONCE_INIT;

static void held_key_make(void) { pthread_key_create(&held_key, free); }

static struct intranode_call *held_buf(void) {
	if (held == NULL) {
		pthread_once(&held_once, held_key_make);
		held = malloc(MAX_HELD * sizeof *held);
		if (held != NULL) pthread_setspecific(held_key, held);
	}
	return held;
}

#define ALLREDUCE_P (const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t)
#define ALLGATHER_P (const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t)
#define BROADCAST_P (const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t)

ncclResult_t intranode_forward(const struct intranode_call *c) {
	switch (c->op) {
	case IN_ALLREDUCE: {
		REAL(ncclAllReduce, ncclResult_t, ALLREDUCE_P)
		return f_ ? f_(c->send, c->recv, c->count, c->dtype, c->red, c->comm, c->stream) : intranode_missing("ncclAllReduce");
	}
	case IN_REDUCESCATTER: {
		REAL(ncclReduceScatter, ncclResult_t, ALLREDUCE_P)
		return f_ ? f_(c->send, c->recv, c->count, c->dtype, c->red, c->comm, c->stream) : intranode_missing("ncclReduceScatter");
	}
	case IN_ALLGATHER: {
		REAL(ncclAllGather, ncclResult_t, ALLGATHER_P)
		return f_ ? f_(c->send, c->recv, c->count, c->dtype, c->comm, c->stream) : intranode_missing("ncclAllGather");
	}
	case IN_BROADCAST: {
		REAL(ncclBroadcast, ncclResult_t, BROADCAST_P)
		return f_ ? f_(c->send, c->recv, c->count, c->dtype, c->root, c->comm, c->stream) : intranode_missing("ncclBroadcast");
	}
	case IN_ALLTOALL: {
		REAL(ncclAlltoAll, ncclResult_t, ALLGATHER_P)
		return f_ ? f_(c->send, c->recv, c->count, c->dtype, c->comm, c->stream) : intranode_missing("ncclAlltoAll");
	}
	}
	return ncclInternalError;
}

// intranode_group_flush sends the held collectives to NCCL, in order:
// another call joined the group.
ncclResult_t intranode_group_flush(void) {
	if (depth == 0) return ncclSuccess;
	others = 1;
	int n = held_n;
	held_n = 0;
	for (int i = 0; i < n; i++) {
		ncclResult_t r = intranode_forward(&held[i]);
		if (r != ncclSuccess) return r;
	}
	return ncclSuccess;
}

typedef ncclResult_t (*group_fn)(void);

// real_group_end is the real ncclGroupEnd, bound once.
static group_fn real_group_end(void) {
	REAL(ncclGroupEnd, ncclResult_t, (void))
	return f_;
}

// forward_group sends calls to NCCL as one group of their own.
static ncclResult_t forward_group(const struct intranode_call *calls, int n) {
	REAL(ncclGroupStart, ncclResult_t, (void))
	group_fn end = real_group_end();
	if (f_ == NULL || end == NULL) return intranode_missing("ncclGroupStart");
	ncclResult_t r = f_();
	for (int i = 0; r == ncclSuccess && i < n; i++) r = intranode_forward(&calls[i]);
	ncclResult_t e = end();
	return r != ncclSuccess ? r : e;
}

// --- calls that need not reach Go ----------------------------------------------

// eligible: the datatypes and reductions intranode has (the same sets as
// ncclapi.go's maps); any other call goes to NCCL without a call into Go.
static int eligible(const struct intranode_call *c) {
	int type = c->dtype == ncclFloat32 || c->dtype == ncclFloat16 || c->dtype == ncclBfloat16 ||
	           c->dtype == ncclFloat64 || c->dtype == ncclInt32;
	int reduces = c->op == IN_ALLREDUCE || c->op == IN_REDUCESCATTER;
	int op = !reduces || c->red == ncclSum || c->red == ncclMax || c->red == ncclMin || c->red == ncclAvg;
	return type && op;
}

// Three sets of communicator handles that C consults without calling into
// Go: those Go has ruled out for good (their calls go straight to NCCL),
// those it has formed a comm for (only their async-error polls, which
// watchdogs and nccl-tests make in tight loops, need Go), and those whose
// bootstrap lost the call sequence (every call fails in Go). Each is an
// open hashed table of handles, written by Go through intranode_set_state.
enum { SLOTS = 1024 };
#define TOMBSTONE ((ncclComm_t)(uintptr_t)1)
static ncclComm_t off[SLOTS], formed[SLOTS], lost[SLOTS];

static size_t slot(ncclComm_t comm) { return ((uintptr_t)comm >> 4) % SLOTS; }

static void put(ncclComm_t *table, ncclComm_t comm, int on) {
	for (size_t i = slot(comm), n = 0; n < SLOTS; i = (i + 1) % SLOTS, n++) {
		ncclComm_t cur = __atomic_load_n(&table[i], __ATOMIC_ACQUIRE);
		if (on && (cur == NULL || cur == TOMBSTONE) &&
		    __atomic_compare_exchange_n(&table[i], &cur, comm, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return;
		if (cur == comm) {
			if (!on) __atomic_store_n(&table[i], TOMBSTONE, __ATOMIC_RELEASE);
			return;
		}
	}
}

static int has(ncclComm_t *table, ncclComm_t comm) {
	for (size_t i = slot(comm), n = 0; n < SLOTS; i = (i + 1) % SLOTS, n++) {
		ncclComm_t cur = __atomic_load_n(&table[i], __ATOMIC_ACQUIRE);
		if (cur == comm) return 1;
		if (cur == NULL) return 0;
	}
	return 0;
}

// intranode_set_state records Go's verdict on a communicator: 1 ruled out,
// 2 formed, 3 lost (its bootstrap lost the call sequence: every call
// fails), 0 forgotten (destroyed).
void intranode_set_state(ncclComm_t comm, int state) {
	put(off, comm, state == 1);
	put(formed, comm, state == 2);
	put(lost, comm, state == 3);
}

// intranode_lost_check fails a call on a lost communicator (its
// bootstrap lost the call sequence) with the loss, before NCCL sees it;
// elsewhere it is ncclSuccess. forward.c calls it for every function that
// acts on a communicator's call sequence.
ncclResult_t intranode_lost_check(ncclComm_t comm) {
	if (inside || !has(lost, comm)) return ncclSuccess;
	inside++;
	int r = intranodeNcclAsyncError(comm);
	inside--;
	return (ncclResult_t)r;
}

// intranode_interrupt stops intranode's share of a communicator being
// revoked (ncclCommRevoke, ncclCommShrink with NCCL_SHRINK_ABORT): its
// kernels still waiting for a peer stop, and its later calls go to NCCL.
void intranode_interrupt(ncclComm_t comm) {
	if (inside) return;
	inside++;
	intranodeNcclCommInterrupt(comm);
	inside--;
}

// for_nccl: a call that goes to NCCL whatever its size, known without
// Go: its communicator is ruled out, or intranode lacks its datatype or
// reduction (unless the communicator is lost: Go fails every call on it).
static int for_nccl(const struct intranode_call *c) {
	return has(off, c->comm) || (!eligible(c) && !has(lost, c->comm));
}

// run gives a call to Go, which runs it or (-1) sends it to NCCL; a lost
// communicator's calls all go to Go, which fails them.
static ncclResult_t run(struct intranode_call *c) {
	if (for_nccl(c)) return intranode_forward(c);
	inside++;
	int r = intranodeNcclRun(c, 1);
	inside--;
	return r < 0 ? intranode_forward(c) : (ncclResult_t)r;
}

// run_group gives a group's collectives, all on one communicator, to Go,
// which runs them all or (-1) sends the group to NCCL.
static ncclResult_t run_group(struct intranode_call *calls, int n) {
	for (int i = 0; i < n; i++)
		if (for_nccl(&calls[i])) return forward_group(calls, n);
	inside++;
	int r = intranodeNcclRun(calls, n);
	inside--;
	return r < 0 ? forward_group(calls, n) : (ncclResult_t)r;
}

static ncclResult_t collective(struct intranode_call c) {
	if (inside || !intranode_enabled()) return intranode_forward(&c);
	if (depth > 0) {
		// A call that goes to NCCL anyway joins the caller's group there,
		// as without the library, and so do the calls held before it.
		if (!others && !for_nccl(&c) && held_n < MAX_HELD && held_buf() != NULL &&
		    (held_n == 0 || held[0].comm == c.comm)) {
			held[held_n++] = c;
			return ncclSuccess;
		}
		ncclResult_t r = intranode_group_flush();
		if (r != ncclSuccess) return r;
		return intranode_forward(&c);
	}
	return run(&c);
}

ncclResult_t ncclGroupStart(void) {
	REAL(ncclGroupStart, ncclResult_t, (void))
	if (f_ == NULL) return intranode_missing("ncclGroupStart");
	ncclResult_t r = f_();
	if (r == ncclSuccess && !inside && depth++ == 0) held_n = others = 0;
	return r;
}

// ncclGroupEnd closes the real group first, then runs the held
// collectives outside it: the first may bootstrap its communicator, whose
// all-gathers must not be deferred into the caller's group. The end of a
// group nested in another (PyTorch nests them in its coalesced calls)
// leaves the held calls to the outermost end, as NCCL does.
ncclResult_t ncclGroupEnd(void) {
	group_fn f_ = real_group_end();
	if (f_ == NULL) return intranode_missing("ncclGroupEnd");
	if (inside) return f_();
	if (depth > 1) {
		depth--;
		return f_();
	}
	int n = depth == 1 && !others ? held_n : 0;
	held_n = 0;
	if (depth > 0) depth--;
	ncclResult_t r = f_();
	if (r != ncclSuccess || n == 0) return r;
	return n == 1 ? run(&held[0]) : run_group(held, n);
}

// --- the collectives intranode may run -------------------------------------

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
	return collective((struct intranode_call){IN_ALLREDUCE, send, recv, count, dt, op, 0, comm, stream});
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
	return collective((struct intranode_call){IN_REDUCESCATTER, send, recv, count, dt, op, 0, comm, stream});
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclComm_t comm,
                           cudaStream_t stream) {
	return collective((struct intranode_call){IN_ALLGATHER, send, recv, count, dt, ncclSum, 0, comm, stream});
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                           cudaStream_t stream) {
	return collective((struct intranode_call){IN_BROADCAST, send, recv, count, dt, ncclSum, root, comm, stream});
}

// ncclAlltoAll (NCCL 2.28 and newer) sends block r of send (count elements)
// to rank r, which receives it as block rank of recv.
ncclResult_t ncclAlltoAll(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclComm_t comm,
                          cudaStream_t stream) {
	return collective((struct intranode_call){IN_ALLTOALL, send, recv, count, dt, ncclSum, 0, comm, stream});
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t dt, int root, ncclComm_t comm, cudaStream_t stream) {
	return ncclBroadcast(buff, buff, count, dt, root, comm, stream);
}

// --- communicators: intranode's share goes first ----------------------------

// gone releases intranode's share of a communicator about to be destroyed
// or (abort set) aborted.
static void gone(ncclComm_t comm, int abort) {
	if (inside) return;
	inside++;
	intranodeNcclCommGone(comm, abort);
	inside--;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
	REAL(ncclCommDestroy, ncclResult_t, (ncclComm_t))
	gone(comm, 0);
	return f_ ? f_(comm) : intranode_missing("ncclCommDestroy");
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
	REAL(ncclCommAbort, ncclResult_t, (ncclComm_t))
	gone(comm, 1);
	return f_ ? f_(comm) : intranode_missing("ncclCommAbort");
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
	REAL(ncclCommGetAsyncError, ncclResult_t, (ncclComm_t, ncclResult_t *))
	if (f_ == NULL) return intranode_missing("ncclCommGetAsyncError");
	ncclResult_t r = f_(comm, asyncError);
	// Go knows a formed communicator's failures, once NCCL reports none,
	// and a lost one's, whatever NCCL still has in progress.
	int ask = r == ncclSuccess && !inside && asyncError != NULL &&
	          ((*asyncError == ncclSuccess && has(formed, comm)) ||
	           ((*asyncError == ncclSuccess || *asyncError == ncclInProgress) && has(lost, comm)));
	if (ask) {
		inside++;
		int mine = intranodeNcclAsyncError(comm);
		inside--;
		if (mine != ncclSuccess) *asyncError = mine;
	}
	return r;
}

const char *ncclGetLastError(ncclComm_t comm) {
	if (last_error_ours) return last_error;
	REAL(ncclGetLastError, const char *, (ncclComm_t))
	return f_ ? f_(comm) : intranode_real_error();
}

const char *ncclGetErrorString(ncclResult_t result) {
	REAL(ncclGetErrorString, const char *, (ncclResult_t))
	return f_ ? f_(result) : "intranode: the real NCCL is not loaded";
}

ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
	int r = -1;
	if (!inside) {
		inside++;
		r = intranodeNcclMemAlloc(ptr, size);
		inside--;
	}
	if (r >= 0) return r;
	REAL(ncclMemAlloc, ncclResult_t, (void **, size_t))
	return f_ ? f_(ptr, size) : intranode_missing("ncclMemAlloc");
}

ncclResult_t ncclMemFree(void *ptr) {
	int r = -1;
	if (!inside) {
		inside++;
		r = intranodeNcclMemFree(ptr);
		inside--;
	}
	if (r >= 0) return r;
	REAL(ncclMemFree, ncclResult_t, (void *))
	return f_ ? f_(ptr) : intranode_missing("ncclMemFree");
}

// --- services to Go ---------------------------------------------------------

// intranode_stream_capturing reports whether a CUDA stream is being
// captured into a graph (cuStreamIsCapturing of the driver the process
// has loaded; 0 without one).
int intranode_stream_capturing(cudaStream_t stream) {
	static int (*is_capturing)(void *, int *);
	static int bound;
	if (!__atomic_load_n(&bound, __ATOMIC_ACQUIRE)) {
		void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
		if (cu != NULL) is_capturing = (int (*)(void *, int *))dlsym(cu, "cuStreamIsCapturing");
		__atomic_store_n(&bound, 1, __ATOMIC_RELEASE);
	}
	int status = 0;
	if (is_capturing == NULL || is_capturing(stream, &status) != 0) return 0;
	return status != 0; // CU_STREAM_CAPTURE_STATUS_NONE is 0
}
