// check.c is a program written against NCCL's interface, run with the
// NCCL-API library in front of a mock NCCL (mocknccl.c) on the fake
// backend, ranks as threads or as processes:
//
//	check accel WORLD    accelerated ops checked element by element and
//	                     against what reached NCCL; forwarding; groups;
//	                     splits; bad arguments; a stalled peer; abort
//	check off WORLD      with INTRANODE_NCCL=off: everything reaches NCCL
//	check nonblocking WORLD
//	                     with MOCKNCCL_NONBLOCKING=1: a nonblocking
//	                     communicator is accelerated, and its forwarded
//	                     calls return ncclInProgress
//	check lost WORLD     with MOCKNCCL_STUCK=1 too: the bootstrap's first
//	                     all-gather never completes, and every call on the
//	                     communicator then fails
//	check abort-boot WORLD
//	                     the same, with a long timeout: ncclCommAbort from
//	                     another thread ends the stuck bootstrap at once
//	check procs-accel WORLD, check procs-off WORLD
//	                     the same with ranks as processes (this one is
//	                     rank 0 and starts the others as
//	                     check child MODE RANK WORLD HEXID)
//
// It prints "ok" and exits 0, or names the first failure and exits 1.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include "../nccl_decl.h"


ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclGetVersion(int *version);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags);
ncclResult_t ncclCommShrink(ncclComm_t comm, int *exclude, int n, ncclComm_t *newcomm, ncclConfig_t *config, int flags);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err);
ncclResult_t ncclMemAlloc(void **ptr, size_t size);
ncclResult_t ncclMemFree(void *ptr);
ncclResult_t ncclAllReduce(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
ncclResult_t ncclReduceScatter(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
ncclResult_t ncclAllGather(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
ncclResult_t ncclBroadcast(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclBcast(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclAlltoAll(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
ncclResult_t pncclAllReduce(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
ncclResult_t ncclSend(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclRecv(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
const char *ncclGetLastError(ncclComm_t comm);

#define LAST_ERROR() ncclGetLastError(NULL)
#include "../../internal/ctest/check.h"

enum { COUNT = 999 };

static ncclUniqueId uid;
static int world, accel, procs;
static pthread_barrier_t sync_all;

// sync_point lines the ranks up where they are threads; ranks that are
// processes meet only in their collectives.
static void sync_point(void) {
	if (!procs) pthread_barrier_wait(&sync_all);
}
static int (*calls)(const char *);

static float value(int r, int i) { return (float)((i * 7 + r * 13) % 61 - 30); }

// reached checks, on rank 0 between barriers, how many calls of name
// reached NCCL since the last check (want < 0: only note the count); with
// ranks as processes each checks its own share, want / world.
static void reached(int rank, const char *name, int want) {
	static int last[16];
	static const char *names[16];
	if (procs) {
		rank = 0;
		want = want < 0 ? want : want / world;
	}
	sync_point();
	if (rank == 0) {
		int i = 0;
		while (names[i] != NULL && strcmp(names[i], name) != 0) i++;
		names[i] = name;
		int n = calls(name);
		CHECK(want < 0 || n - last[i] == want, "%d calls of %s reached NCCL, want %d", n - last[i], name, want);
		last[i] = n;
	}
	sync_point();
}

static void check_sum(const float *dst, int rank, int w) {
	for (int i = 0; i < COUNT; i++) {
		float want = 0;
		for (int r = 0; r < w; r++) want += value(r, i);
		CHECK(dst[i] == want, "sum rank %d [%d] = %g, want %g", rank, i, dst[i], want);
	}
}

// check_avg checks the average of block `block` of every rank's values:
// the rank-order float sum (as check_sum) divided by w in float.
static void check_avg(const float *dst, int rank, int w, int block) {
	for (int i = 0; i < COUNT; i++) {
		float sum = 0;
		for (int r = 0; r < w; r++) sum += value(r, block * COUNT + i);
		CHECK(dst[i] == sum / (float)w, "avg rank %d [%d] = %g, want %g", rank, i, dst[i], sum / (float)w);
	}
}

static void allreduce_sum(ncclComm_t comm, int rank, int w, float *in, float *out, int inplace) {
	for (int i = 0; i < COUNT; i++) in[i] = value(rank, i);
	float *dst = inplace ? in : out;
	OK(ncclAllReduce(in, dst, COUNT, ncclFloat32, ncclSum, comm, NULL));
	check_sum(dst, rank, w);
}

static void *rank_main(void *arg) {
	int rank = (int)(long)arg;
	ncclComm_t comm;
	OK(ncclCommInitRank(&comm, world, uid, rank));
	size_t big = (size_t)world * COUNT;
	float *in, *out;
	OK(ncclMemAlloc((void **)&in, big * sizeof(float)));
	OK(ncclMemAlloc((void **)&out, big * sizeof(float)));
	int fwd = accel ? 0 : world; // calls of each accelerated kind that reach NCCL

	// The first eligible call bootstraps (all-gathers on the communicator).
	allreduce_sum(comm, rank, world, in, out, 0);
	reached(rank, "ncclAllReduce", fwd);
	reached(rank, "ncclAllGather", -1); // the bootstrap's rounds
	for (int inplace = 0; inplace < 2; inplace++) {
		allreduce_sum(comm, rank, world, in, out, inplace);
		for (int i = 0; i < COUNT; i++) in[i] = value(rank, i);
		float *dst = inplace ? in : out;
		OK(pncclAllReduce(in, dst, COUNT, ncclFloat32, ncclMax, comm, NULL));
		for (int i = 0; i < COUNT; i++) {
			float want = value(0, i);
			for (int r = 1; r < world; r++) want = value(r, i) > want ? value(r, i) : want;
			CHECK(dst[i] == want, "max rank %d [%d] = %g", rank, i, dst[i]);
		}
		for (int i = 0; i < COUNT; i++) in[i] = value(rank, i);
		OK(ncclAllReduce(in, dst, COUNT, ncclFloat32, ncclAvg, comm, NULL));
		check_avg(dst, rank, world, 0);
		for (size_t i = 0; i < big; i++) in[i] = value(rank, (int)i);
		dst = inplace ? in + (size_t)rank * COUNT : out;
		OK(ncclReduceScatter(in, dst, COUNT, ncclFloat32, ncclSum, comm, NULL));
		for (int i = 0; i < COUNT; i++) {
			float want = 0;
			for (int r = 0; r < world; r++) want += value(r, rank * COUNT + i);
			CHECK(dst[i] == want, "reduce-scatter rank %d [%d] = %g, want %g", rank, i, dst[i], want);
		}
		for (size_t i = 0; i < big; i++) in[i] = value(rank, (int)i);
		OK(ncclReduceScatter(in, dst, COUNT, ncclFloat32, ncclAvg, comm, NULL));
		check_avg(dst, rank, world, rank);
		float *src = inplace ? out + (size_t)rank * COUNT : in;
		for (int i = 0; i < COUNT; i++) src[i] = value(rank, i);
		OK(ncclAllGather(src, out, COUNT, ncclFloat32, comm, NULL));
		for (size_t i = 0; i < big; i++)
			CHECK(out[i] == value((int)(i / COUNT), (int)(i % COUNT)), "all-gather rank %d [%zu] = %g", rank, i, out[i]);
		int root = world - 1;
		for (int i = 0; i < COUNT; i++) in[i] = value(rank, i);
		dst = inplace ? in : out;
		OK(ncclBroadcast(in, dst, COUNT, ncclFloat32, root, comm, NULL));
		for (int i = 0; i < COUNT; i++) CHECK(dst[i] == value(root, i), "broadcast rank %d [%d] = %g", rank, i, dst[i]);
		for (int i = 0; i < COUNT; i++) in[i] = value(rank, i);
		OK(ncclBcast(in, COUNT, ncclFloat32, 0, comm, NULL));
		for (int i = 0; i < COUNT; i++) CHECK(in[i] == value(0, i), "bcast rank %d [%d] = %g", rank, i, in[i]);
		// Block q of rank r's input becomes block r of rank q's output.
		for (size_t i = 0; i < big; i++) in[i] = value(rank, (int)i);
		dst = inplace ? in : out;
		OK(ncclAlltoAll(in, dst, COUNT, ncclFloat32, comm, NULL));
		for (size_t i = 0; i < big; i++) {
			int q = (int)(i / COUNT);
			float want = value(q, rank * COUNT + (int)(i % COUNT));
			CHECK(dst[i] == want, "all-to-all rank %d [%zu] = %g, want %g", rank, i, dst[i], want);
		}
	}
	reached(rank, "ncclAllReduce", 6 * fwd);
	reached(rank, "ncclReduceScatter", 4 * fwd);
	reached(rank, "ncclAllGather", 2 * fwd);
	reached(rank, "ncclBroadcast", 4 * fwd);
	reached(rank, "ncclAlltoAll", 2 * fwd);

	// Forwarded whatever the switch: int8, send/receive.
	signed char *b8 = (signed char *)in;
	for (int i = 0; i < COUNT; i++) b8[i] = (signed char)(i % 5);
	OK(ncclAllReduce(b8, b8, COUNT, ncclInt8, ncclSum, comm, NULL));
	for (int i = 0; i < COUNT; i++) CHECK(b8[i] == (i % 5) * world, "int8 all-reduce rank %d [%d] = %d", rank, i, b8[i]);
	reached(rank, "ncclAllReduce", world);
	for (int i = 0; i < COUNT; i++) in[i] = (float)rank;
	OK(ncclGroupStart());
	OK(ncclSend(in, COUNT, ncclFloat32, (rank + 1) % world, comm, NULL));
	OK(ncclRecv(out, COUNT, ncclFloat32, (rank + world - 1) % world, comm, NULL));
	OK(ncclGroupEnd());
	CHECK(out[COUNT - 1] == (float)((rank + world - 1) % world), "recv rank %d = %g", rank, out[0]);
	reached(rank, "ncclSend", world);

	// A group of one collective runs as that call; a group of several
	// collectives on the communicator (PyTorch's coalesced calls) runs them
	// all in order; a group with any call intranode would not run goes
	// to NCCL whole, as does a group with a call of another kind.
	OK(ncclGroupStart());
	for (int i = 0; i < COUNT; i++) in[i] = value(rank, i);
	OK(ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, NULL));
	OK(ncclGroupEnd());
	check_sum(out, rank, world);
	reached(rank, "ncclAllReduce", fwd);
	OK(ncclGroupStart());
	OK(ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, NULL));
	OK(ncclAllReduce(in, in, COUNT, ncclFloat32, ncclMax, comm, NULL));
	float *gx; // the group's other buffers: all-gather in, out; int8; receive
	OK(ncclMemAlloc((void **)&gx, 4 * COUNT * sizeof(float)));
	int per = COUNT / world;
	for (int i = 0; i < per; i++) gx[i] = value(rank, i);
	OK(ncclAllGather(gx, gx + COUNT, per, ncclFloat32, comm, NULL));
	OK(ncclGroupEnd());
	check_sum(out, rank, world);
	for (int i = 0; i < COUNT; i++) {
		float want = value(0, i);
		for (int r = 1; r < world; r++) want = value(r, i) > want ? value(r, i) : want;
		CHECK(in[i] == want, "grouped max rank %d [%d] = %g", rank, i, in[i]);
	}
	for (int i = 0; i < per * world; i++)
		CHECK(gx[COUNT + i] == value(i / per, i % per), "grouped all-gather rank %d [%d] = %g", rank, i, gx[COUNT + i]);
	reached(rank, "ncclAllReduce", 2 * fwd);
	reached(rank, "ncclAllGather", fwd);
	reached(rank, "ncclAllGather in a group", fwd);
	// Groups nested in a group (PyTorch's coalesced calls): the calls run
	// at the outermost end, and none is lost.
	for (int i = 0; i < COUNT; i++) {
		in[i] = value(rank, i);
		out[i] = gx[i] = -1000; // no sum: a call that never ran shows
	}
	OK(ncclGroupStart());
	OK(ncclGroupStart());
	OK(ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, NULL));
	OK(ncclGroupEnd());
	OK(ncclAllReduce(in, gx, COUNT, ncclFloat32, ncclSum, comm, NULL));
	OK(ncclGroupEnd());
	check_sum(out, rank, world);
	check_sum(gx, rank, world);
	reached(rank, "ncclAllReduce", 2 * fwd);
	reached(rank, "ncclAllReduce in a group", -1);
	signed char *g8 = (signed char *)(gx + 2 * COUNT);
	for (int i = 0; i < COUNT; i++) {
		in[i] = value(rank, i);
		g8[i] = 1;
	}
	OK(ncclGroupStart());
	OK(ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, NULL));
	OK(ncclAllReduce(g8, g8, COUNT, ncclInt8, ncclSum, comm, NULL));
	OK(ncclGroupEnd());
	check_sum(out, rank, world);
	CHECK(g8[COUNT - 1] == world, "grouped int8 all-reduce rank %d = %d", rank, g8[COUNT - 1]);
	reached(rank, "ncclAllReduce", 2 * world);
	reached(rank, "ncclAllReduce in a group", 2 * world);
	// A call that goes to NCCL whatever its size reaches it inside the
	// caller's group, as without the library.
	for (int i = 0; i < COUNT; i++) g8[i] = 1;
	OK(ncclGroupStart());
	OK(ncclAllReduce(g8, g8, COUNT, ncclInt8, ncclSum, comm, NULL));
	OK(ncclGroupEnd());
	CHECK(g8[0] == world, "lone grouped int8 all-reduce rank %d = %d", rank, g8[0]);
	reached(rank, "ncclAllReduce", world);
	reached(rank, "ncclAllReduce in a group", world);
	OK(ncclGroupStart());
	OK(ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, NULL));
	OK(ncclSend(in, COUNT, ncclFloat32, (rank + 1) % world, comm, NULL));
	OK(ncclRecv(gx + 3 * COUNT, COUNT, ncclFloat32, (rank + world - 1) % world, comm, NULL));
	OK(ncclGroupEnd());
	check_sum(out, rank, world);
	CHECK(gx[3 * COUNT] == value((rank + world - 1) % world, 0), "grouped recv rank %d = %g", rank, gx[3 * COUNT]);
	reached(rank, "ncclAllReduce", world);
	reached(rank, "ncclSend", world);
	OK(ncclMemFree(gx));

	if (accel) {
		// Bad arguments get NCCL's codes and a message naming them.
		CHECK(ncclAllReduce(in, NULL, COUNT, ncclFloat32, ncclSum, comm, NULL) == ncclInvalidArgument, "NULL recvbuff");
		CHECK(strstr(ncclGetLastError(comm), "recvbuff is NULL") != NULL, "message: %s", ncclGetLastError(comm));
		CHECK(ncclAllReduce(in, out, big + 4096, ncclFloat32, ncclSum, comm, NULL) == ncclInvalidArgument, "past the buffer");
		CHECK(strstr(ncclGetLastError(comm), "bytes at") != NULL, "message: %s", ncclGetLastError(comm));
		// An all-to-all reads and writes count elements for every rank.
		CHECK(ncclAlltoAll(in, out, COUNT + 1, ncclFloat32, comm, NULL) == ncclInvalidArgument, "all-to-all past the buffer");
		CHECK(strstr(ncclGetLastError(comm), "bytes at") != NULL, "message: %s", ncclGetLastError(comm));
		sync_point();

		// A split into two halves: each sub-communicator is bootstrapped
		// over itself at its first call.
		if (world % 2 == 0 && world >= 4) {
			ncclComm_t half;
			OK(ncclCommSplit(comm, rank % 2, rank, &half, NULL));
			// Its first call, which bootstraps it, inside a group.
			for (int i = 0; i < COUNT; i++) in[i] = value(rank / 2, i);
			OK(ncclGroupStart());
			OK(ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, half, NULL));
			OK(ncclGroupEnd());
			check_sum(out, rank / 2, world / 2);
			allreduce_sum(half, rank / 2, world / 2, in, out, 1);
			allreduce_sum(half, rank / 2, world / 2, in, out, 0);
			OK(ncclCommDestroy(half));
		}
		reached(rank, "ncclAllReduce", 0);
		reached(rank, "ncclAllGather in a group", 0);
	}
	sync_point();

	// A stalled peer: rank 0 all-reduces alone and fails within the
	// timeout; its communicator reports the failure as NCCL does.
	if (accel && rank == 0) {
		double t0 = now();
		ncclResult_t r = ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, NULL);
		CHECK(r == ncclRemoteError, "stalled all-reduce returned %d", r);
		CHECK(strstr(ncclGetLastError(comm), "rank ") != NULL, "message: %s", ncclGetLastError(comm));
		CHECK(now() - t0 < 3.5, "the stall took %.2f s", now() - t0);
		ncclResult_t async = ncclSuccess;
		OK(ncclCommGetAsyncError(comm, &async));
		CHECK(async == ncclRemoteError, "async error %d", async);
	}
	sync_point();

	// Revoked (ranks as threads), or shrunk with NCCL_SHRINK_ABORT (ranks
	// as processes), the communicator is NCCL's alone: an all-reduce
	// intranode would run reaches NCCL, and its async state is NCCL's
	// (rank 0's stall above no longer shows).
	if (accel) {
		const char *stop = procs ? "ncclCommShrink" : "ncclCommRevoke";
		if (procs) {
			ncclComm_t none;
			OK(ncclCommShrink(comm, NULL, 0, &none, NULL, 0x01 /* NCCL_SHRINK_ABORT */));
		} else {
			OK(ncclCommRevoke(comm, 0));
		}
		for (int i = 0; i < COUNT; i++) in[i] = value(rank, i);
		OK(ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, NULL));
		check_sum(out, rank, world);
		ncclResult_t async = ncclRemoteError;
		OK(ncclCommGetAsyncError(comm, &async));
		CHECK(async == ncclSuccess, "async error %d after the revoke", async);
		reached(rank, stop, world);
		reached(rank, "ncclAllReduce", world);
	}
	sync_point();
	double t0 = now();
	OK(ncclMemFree(in));
	OK(ncclMemFree(out));
	OK(rank == 0 ? ncclCommAbort(comm) : ncclCommDestroy(comm));
	CHECK(now() - t0 < 2, "abort took %.2f s", now() - t0);
	return NULL;
}

// settle polls comm after a call that returned ncclInProgress, as NCCL
// asks of a nonblocking communicator's user, and returns its final state.
static ncclResult_t settle(ncclComm_t comm, ncclResult_t r) {
	while (r == ncclInProgress) {
		OK(ncclCommGetAsyncError(comm, &r));
	}
	return r;
}

// open_rank makes rank's communicator and two buffers of COUNT floats;
// close_rank frees the buffers.
static void open_rank(int rank, ncclComm_t *comm, float **in, float **out) {
	OK(ncclCommInitRank(comm, world, uid, rank));
	OK(ncclMemAlloc((void **)in, COUNT * sizeof(float)));
	OK(ncclMemAlloc((void **)out, COUNT * sizeof(float)));
}

static void close_rank(float *in, float *out) {
	OK(ncclMemFree(in));
	OK(ncclMemFree(out));
}

// rank_nonblocking runs on a nonblocking communicator, whose every NCCL
// collective returns ncclInProgress and finishes only once polled (the
// bootstrap's all-gathers included): the first all-reduce is bootstrapped
// and accelerated, a forwarded one returns ncclInProgress and is right
// once polled, and the next accelerated call does not wait for a poll.
static void *rank_nonblocking(void *arg) {
	int rank = (int)(long)arg;
	ncclComm_t comm;
	float *in, *out;
	open_rank(rank, &comm, &in, &out);
	allreduce_sum(comm, rank, world, in, out, 0);
	reached(rank, "ncclAllReduce", 0);
	reached(rank, "ncclAllGather", -1);
	signed char *b8 = (signed char *)in;
	for (int i = 0; i < COUNT; i++) b8[i] = (signed char)(i % 5);
	ncclResult_t r = ncclAllReduce(b8, b8, COUNT, ncclInt8, ncclSum, comm, NULL);
	CHECK(r == ncclInProgress, "forwarded int8 all-reduce returned %d, want ncclInProgress", r);
	OK(settle(comm, r));
	for (int i = 0; i < COUNT; i++) CHECK(b8[i] == (i % 5) * world, "int8 all-reduce rank %d [%d] = %d", rank, i, b8[i]);
	reached(rank, "ncclAllReduce", world);
	allreduce_sum(comm, rank, world, in, out, 1);
	reached(rank, "ncclAllReduce", 0);
	reached(rank, "call in progress", 0);
	close_rank(in, out);
	OK(ncclCommDestroy(comm));
	return NULL;
}

// rank_lost runs on a communicator whose first all-gather never
// completes: the bootstrap gives up at the timeout with the call sequence
// lost, and from then on every call on it, eligible or not, a split and a
// send included, fails with ncclRemoteError without reaching NCCL, and
// ncclCommGetAsyncError reports it; no further all-gather is issued.
static void *rank_lost(void *arg) {
	int rank = (int)(long)arg;
	ncclComm_t comm;
	float *in, *out;
	open_rank(rank, &comm, &in, &out);
	for (int i = 0; i < COUNT; i++) in[i] = value(rank, i);
	double t0 = now();
	ncclResult_t r = ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, NULL);
	CHECK(r == ncclRemoteError, "all-reduce over a lost bootstrap returned %d", r);
	CHECK(strstr(ncclGetLastError(comm), "call sequence is lost") != NULL, "message: %s", ncclGetLastError(comm));
	CHECK(now() - t0 < 3.5, "the bootstrap took %.2f s", now() - t0);
	r = ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, comm, NULL);
	CHECK(r == ncclRemoteError, "second all-reduce returned %d", r);
	r = ncclAllReduce(in, in, COUNT, ncclInt8, ncclSum, comm, NULL);
	CHECK(r == ncclRemoteError, "int8 all-reduce returned %d", r);
	ncclResult_t async = ncclSuccess;
	OK(ncclCommGetAsyncError(comm, &async));
	CHECK(async == ncclRemoteError, "async error %d", async);
	ncclComm_t sub = NULL;
	r = ncclCommSplit(comm, 0, rank, &sub, NULL);
	CHECK(r == ncclRemoteError && sub == NULL, "split of a lost communicator returned %d", r);
	r = ncclSend(in, COUNT, ncclFloat32, (rank + 1) % world, comm, NULL);
	CHECK(r == ncclRemoteError, "send on a lost communicator returned %d", r);
	reached(rank, "ncclAllReduce", 0);
	reached(rank, "ncclAllGather", world);
	reached(rank, "ncclCommSplit", 0);
	reached(rank, "ncclSend", 0);
	close_rank(in, out);
	OK(ncclCommAbort(comm));
	return NULL;
}

// aborter aborts a communicator after 300 ms and records how long the
// abort took.
struct aborter {
	ncclComm_t comm;
	double took;
};

static void *abort_later(void *arg) {
	struct aborter *a = arg;
	usleep(300 * 1000);
	double t0 = now();
	OK(ncclCommAbort(a->comm));
	a->took = now() - t0;
	return NULL;
}

// rank_abort_boot: while a rank's first call waits in a bootstrap that
// cannot finish (its timeout far away), another thread aborts the
// communicator; the abort returns at once and so does the call, with an
// error.
static void *rank_abort_boot(void *arg) {
	int rank = (int)(long)arg;
	struct aborter a = {0};
	float *in, *out;
	open_rank(rank, &a.comm, &in, &out);
	pthread_t t;
	pthread_create(&t, NULL, abort_later, &a);
	double t0 = now();
	ncclResult_t r = ncclAllReduce(in, out, COUNT, ncclFloat32, ncclSum, a.comm, NULL);
	double took = now() - t0;
	pthread_join(t, NULL);
	CHECK(r != ncclSuccess, "the all-reduce of an aborted bootstrap succeeded");
	CHECK(took < 3, "the all-reduce returned %.2f s after it began (abort after 0.3 s)", took);
	CHECK(a.took < 2, "the abort took %.2f s", a.took);
	close_rank(in, out);
	return NULL;
}

static void rank0(void) { rank_main((void *)0L); }

// findMock binds mockNcclCalls once the library has loaded the mock.
static void findMock(void) {
	void *mock = dlopen(getenv("INTRANODE_NCCL_LIBRARY"), RTLD_NOW | RTLD_NOLOAD);
	CHECK(mock != NULL, "the mock NCCL is not loaded");
	calls = (int (*)(const char *))dlsym(mock, "mockNcclCalls");
	CHECK(calls != NULL, "mockNcclCalls");
}

int main(int argc, char **argv) {
	if (argc == 6 && strcmp(argv[1], "child") == 0) {
		procs = 1;
		accel = strcmp(argv[2], "procs-accel") == 0;
		world = atoi(argv[4]);
		unhex(argv[5], (unsigned char *)uid.internal, sizeof uid.internal);
		int v;
		OK(ncclGetVersion(&v)); // loads the real (mock) library
		findMock();
		rank_main((void *)(long)atoi(argv[3]));
		return 0;
	}
	if (argc != 3) return 2;
	procs = strncmp(argv[1], "procs-", 6) == 0;
	accel = strcmp(argv[1], procs ? "procs-accel" : "accel") == 0;
	void *(*run)(void *) = strcmp(argv[1], "nonblocking") == 0 ? rank_nonblocking
	                       : strcmp(argv[1], "lost") == 0      ? rank_lost
	                       : strcmp(argv[1], "abort-boot") == 0 ? rank_abort_boot
	                                                           : rank_main;
	world = atoi(argv[2]);
	CHECK(world >= 1 && world <= MAXW, "world %d", world);
	OK(ncclGetUniqueId(&uid)); // loads the real (mock) library
	findMock();
	if (procs) {
		run_procs(argv[0], argv[1], world, uid.internal, sizeof uid.internal, rank0);
	} else {
		pthread_barrier_init(&sync_all, NULL, world);
		pthread_t t[MAXW];
		for (int r = 0; r < world; r++) pthread_create(&t[r], NULL, run, (void *)(long)r);
		for (int r = 0; r < world; r++) pthread_join(t[r], NULL);
	}
	printf("ok\n");
	return 0;
}
