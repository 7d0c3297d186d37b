// ccl_impl.h: the shims of a vendor's collective library, NCCL on CUDA
// (libnccl.so.2) and RCCL on ROCm (librccl.so.1), which share one API. A
// backend's shim .c includes it once, after shim_impl.h (whose macros and
// types it uses: GPU_FN, GPU_API, GPU_BIND_ENTRY, GPU_BIND_ARG, gpu_stream_t, gpu_load). Its
// one exported function, GPU_FN(ccl_table), returns the shims as a table
// (ccl.h), which the GPU core's Go code calls through (ccl_cgo.go), so that
// one binding serves both backends.
//
// The library is opened like the driver, with dlopen, and only the entry
// points below are resolved (ncclGetLastError, NCCL 2.13 and newer,
// ncclCommInitRankConfig, 2.14 and newer, and ncclCommSplit, 2.18 and
// newer, are optional). The declarations
// follow nccl.h: ncclResult_t, ncclDataType_t and ncclRedOp_t are int-sized
// enums; ncclUniqueId is passed by value.

#include <limits.h>
#include <stdlib.h>

typedef struct ncclComm *ncclComm_t;

typedef struct {
	char internal[GPU_CCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

// ccl_config is ncclConfig_t as NCCL 2.18 (and RCCL) declared it, the
// first version with splitShare. A library reads a config's size and
// version and gives the fields a config of that version lacks their
// defaults, so this prefix serves every later version; ccl_config_of
// fills it for an older library, which reads only the fields of 2.14.
typedef struct {
	size_t size;
	unsigned int magic;
	unsigned int version;
	int blocking;
	int cgaClusterSize;
	int minCTAs;
	int maxCTAs;
	const char *netName;
	int splitShare;
} ccl_config;

static ccl_config ccl_config_of(int blocking, int split_share) {
	ccl_config c = {sizeof(ccl_config), 0xcafebeef, 21800, blocking, INT_MIN, INT_MIN, INT_MIN, NULL, split_share};
	return c;
}

static struct {
	int (*GetVersion)(int *);
	int (*GetUniqueId)(ncclUniqueId *);
	int (*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
	int (*CommInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int, ccl_config *);
	int (*CommSplit)(ncclComm_t, int, int, ncclComm_t *, ccl_config *);
	int (*AllReduce)(const void *, void *, size_t, int, int, ncclComm_t, gpu_stream_t);
	int (*ReduceScatter)(const void *, void *, size_t, int, int, ncclComm_t, gpu_stream_t);
	int (*AllGather)(const void *, void *, size_t, int, ncclComm_t, gpu_stream_t);
	int (*Broadcast)(const void *, void *, size_t, int, int, ncclComm_t, gpu_stream_t);
	int (*Send)(const void *, size_t, int, int, ncclComm_t, gpu_stream_t);
	int (*Recv)(void *, size_t, int, int, ncclComm_t, gpu_stream_t);
	int (*GroupStart)(void);
	int (*GroupEnd)(void);
	int (*CommAbort)(ncclComm_t);
	int (*CommGetAsyncError)(ncclComm_t, int *);
	const char *(*GetErrorString)(int);
	const char *(*GetLastError)(ncclComm_t);
} nccl;

static void *ccl_lib;

static int ccl_load(const char *path, char *err, size_t errlen) {
	if (ccl_lib != NULL) {
		return 0;
	}
	// NCCL keeps proxy and bootstrap threads running inside the library,
	// so it is never unmapped either (gpu_load).
	static const struct gpu_entry entries[] = {
		{(void **)&nccl.GetVersion, "ncclGetVersion"},
		{(void **)&nccl.GetUniqueId, "ncclGetUniqueId"},
		{(void **)&nccl.CommInitRank, "ncclCommInitRank"},
		{(void **)&nccl.AllReduce, "ncclAllReduce"},
		{(void **)&nccl.ReduceScatter, "ncclReduceScatter"},
		{(void **)&nccl.AllGather, "ncclAllGather"},
		{(void **)&nccl.Broadcast, "ncclBroadcast"},
		{(void **)&nccl.Send, "ncclSend"},
		{(void **)&nccl.Recv, "ncclRecv"},
		{(void **)&nccl.GroupStart, "ncclGroupStart"},
		{(void **)&nccl.GroupEnd, "ncclGroupEnd"},
		{(void **)&nccl.CommAbort, "ncclCommAbort"},
		{(void **)&nccl.CommGetAsyncError, "ncclCommGetAsyncError"},
		{(void **)&nccl.GetErrorString, "ncclGetErrorString"},
	};
	int r = gpu_load(&ccl_lib, path, entries, GPU_LEN(entries), &nccl, sizeof(nccl), err, errlen);
	if (r != 0) return r;
	dlerror();
	nccl.GetLastError = (const char *(*)(ncclComm_t))dlsym(ccl_lib, "ncclGetLastError");
	dlerror();
	nccl.CommInitRankConfig =
	    (int (*)(ncclComm_t *, int, ncclUniqueId, int, ccl_config *))dlsym(ccl_lib, "ncclCommInitRankConfig");
	dlerror();
	nccl.CommSplit = (int (*)(ncclComm_t, int, int, ncclComm_t *, ccl_config *))dlsym(ccl_lib, "ncclCommSplit");
	return 0;
}

// ccl_features says which optional entry points the library has
// (GPU_CCL_HAS_*).
static int ccl_features(void) {
	return (nccl.CommInitRankConfig != NULL ? GPU_CCL_HAS_CONFIG : 0) | (nccl.CommSplit != NULL ? GPU_CCL_HAS_SPLIT : 0);
}

static const char *ccl_error_string(int r) {
	return nccl.GetErrorString != NULL ? nccl.GetErrorString(r) : NULL;
}

static const char *ccl_last_error(void) {
	return nccl.GetLastError != NULL ? nccl.GetLastError(NULL) : NULL;
}

static int ccl_version(int *version) { return nccl.GetVersion(version); }

static int ccl_unique_id(unsigned char *id) {
	ncclUniqueId uid;
	memset(&uid, 0, sizeof(uid));
	int r = nccl.GetUniqueId(&uid);
	if (r == GPU_CCL_SUCCESS) memcpy(id, uid.internal, sizeof(uid.internal));
	return r;
}

// BIND_CCL is BIND for the library's shims, which report a failed switch
// of device in their own result space.
#define BIND_CCL(c)                                                      \
	do {                                                                 \
		gpu_result_t bind_ccl_r = GPU_API.GPU_BIND_ENTRY(GPU_BIND_ARG(c));  \
		if (bind_ccl_r != GPU_SUCCESS) return GPU_CCL_DRIVER_FAILED | (int)bind_ccl_r; \
	} while (0)

// ccl_init creates a communicator with ctx current, so the library (whose
// runtime adopts the current context or device) binds it to ctx's device.
// With nonblocking set, where the library has ncclCommInitRankConfig, the
// communicator is a non-blocking one: the call returns GPU_CCL_IN_PROGRESS
// at once with *comm set, the creation goes on on the library's own
// thread, ccl_async_error reports when it has ended, and ncclCommAbort
// ends a creation still waiting for a peer. Otherwise ncclCommInitRank
// returns when every rank has joined or NCCL gives up. A communicator NCCL
// allocated before failing is aborted here.
static int ccl_init(uintptr_t ctx, int nranks, const unsigned char *id, int rank, int nonblocking, uintptr_t *comm) {
	ncclUniqueId uid;
	ncclComm_t c = NULL;
	*comm = 0;
	BIND_CCL(ctx);
	memcpy(uid.internal, id, sizeof(uid.internal));
	int r;
	if (nonblocking && nccl.CommInitRankConfig != NULL) {
		// splitShare: a child made by ccl_split shares this
		// communicator's connections, so it connects nothing itself.
		ccl_config config = ccl_config_of(0, 1);
		r = nccl.CommInitRankConfig(&c, nranks, uid, rank, &config);
	} else {
		r = nccl.CommInitRank(&c, nranks, uid, rank);
	}
	if (r != GPU_CCL_SUCCESS && r != GPU_CCL_IN_PROGRESS) {
		if (c != NULL) nccl.CommAbort(c);
		return r;
	}
	*comm = (uintptr_t)c;
	return r;
}

// ccl_split starts making a blocking duplicate of parent, a non-blocking
// communicator (ncclCommSplit, one color, ranks kept in order): it shares
// parent's resources and connections (splitShare), so it makes none of its
// own, and its calls are blocking ones. The split runs on the library's
// thread: the call returns at once (NCCL 2.28 returns GPU_CCL_SUCCESS
// even so), ccl_async_error on parent says when the split has ended, and aborting parent ends a split still waiting
// for a peer. The library writes the child into *slot, memory allocated
// here that must outlive the split: read it with ccl_child once the split
// has ended or parent has been aborted.
static int ccl_split(uintptr_t ctx, uintptr_t parent, int rank, uintptr_t *slot) {
	*slot = 0;
	if (nccl.CommSplit == NULL) return 5; // ncclInvalidUsage
	BIND_CCL(ctx);
	ncclComm_t *out = calloc(1, sizeof(*out));
	if (out == NULL) return 1; // ncclSystemError
	ccl_config config = ccl_config_of(1, 1);
	int r = nccl.CommSplit((ncclComm_t)parent, 0, rank, out, &config);
	*slot = (uintptr_t)out;
	return r;
}

// ccl_child returns the communicator ccl_split wrote into slot (0 when the
// split did not make one) and frees slot.
static uintptr_t ccl_child(uintptr_t slot) {
	ncclComm_t *out = (ncclComm_t *)slot;
	if (out == NULL) return 0;
	uintptr_t c = (uintptr_t)__atomic_load_n(out, __ATOMIC_ACQUIRE);
	free(out);
	return c;
}

// ccl_async_error reads the communicator's state: GPU_CCL_SUCCESS, an
// error, or GPU_CCL_IN_PROGRESS while a non-blocking operation (its
// creation, a first group of sends and receives) is still running.
static int ccl_async_error(uintptr_t comm, int *state) {
	*state = GPU_CCL_SUCCESS;
	return nccl.CommGetAsyncError((ncclComm_t)comm, state);
}

// all_to_all is the all-to-all as NCCL's documentation writes it: one
// group of a send and a receive per peer.
static int all_to_all(ncclComm_t comm, uint64_t in, uint64_t out, size_t count, size_t elem_size, int dtype,
                      int nranks, gpu_stream_t stream) {
	int r = nccl.GroupStart();
	if (r != GPU_CCL_SUCCESS) return r;
	const size_t block = count * elem_size;
	for (int p = 0; p < nranks && r == GPU_CCL_SUCCESS; p++) {
		r = nccl.Send((const void *)(uintptr_t)(in + p * block), count, dtype, p, comm, stream);
		if (r == GPU_CCL_SUCCESS) r = nccl.Recv((void *)(uintptr_t)(out + p * block), count, dtype, p, comm, stream);
	}
	int end = nccl.GroupEnd();
	return r != GPU_CCL_SUCCESS ? r : end;
}

// ccl_collective enqueues the collective on stream (graph capture
// included) and then reads the communicator's asynchronous error, so a
// communicator that has failed is reported at the next call. On a
// non-blocking communicator a call that has to connect first (a first
// group of sends and receives) returns GPU_CCL_IN_PROGRESS and goes on on
// the library's thread; so does one the library is still running.
static int ccl_collective(uintptr_t ctx, uintptr_t comm, int kind, uint64_t in, uint64_t out, size_t count,
                          size_t elem_size, int dtype, int op, int root, int nranks, uintptr_t stream) {
	BIND_CCL(ctx);
	const void *send = (const void *)(uintptr_t)in;
	void *recv = (void *)(uintptr_t)out;
	ncclComm_t c = (ncclComm_t)comm;
	gpu_stream_t s = (gpu_stream_t)stream;
	int r;
	switch (kind) {
	case GPU_CCL_ALL_REDUCE:
		r = nccl.AllReduce(send, recv, count, dtype, op, c, s);
		break;
	case GPU_CCL_REDUCE_SCATTER:
		r = nccl.ReduceScatter(send, recv, count, dtype, op, c, s);
		break;
	case GPU_CCL_ALL_GATHER:
		r = nccl.AllGather(send, recv, count, dtype, c, s);
		break;
	case GPU_CCL_BROADCAST:
		r = nccl.Broadcast(send, recv, count, dtype, root, c, s);
		break;
	case GPU_CCL_ALL_TO_ALL:
		r = all_to_all(c, in, out, count, elem_size, dtype, nranks, s);
		break;
	default:
		return 4; // ncclInvalidArgument
	}
	if (r != GPU_CCL_SUCCESS) return r;
	int state = GPU_CCL_SUCCESS;
	r = nccl.CommGetAsyncError(c, &state);
	if (r != GPU_CCL_SUCCESS) return r;
	if (state == GPU_CCL_SUCCESS || state == GPU_CCL_IN_PROGRESS) return state;
	return GPU_CCL_ASYNC | state;
}

// ccl_abort frees a communicator without waiting for its peers: work
// of it still running is told to stop.
static int ccl_abort(uintptr_t ctx, uintptr_t comm) {
	BIND_CCL(ctx);
	return nccl.CommAbort((ncclComm_t)comm);
}

static const struct gpu_ccl_table ccl_table = {
	ccl_load,        ccl_error_string, ccl_last_error, ccl_version, ccl_unique_id, ccl_init,
	ccl_async_error, ccl_collective,   ccl_abort,      ccl_features, ccl_split,    ccl_child,
};

const struct gpu_ccl_table *GPU_FN(ccl_table)(void) { return &ccl_table; }
