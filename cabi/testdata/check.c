// check.c drives libintranode through include/intranode.h on the fake
// backend, whose device memory is host memory: every collective in place
// and out of place checked element by element against a reference, bad
// arguments, a peer that stops calling (asynchronous error, timeout),
// abort. Ranks are threads of this process or processes:
//
//	check threads WORLD
//	check procs WORLD          (rank 0; starts the others as below)
//	check child procs RANK WORLD HEXID
//	check nccl WORLD           threads, each communicator made over a
//	                           communicator of the NCCL that
//	                           INTRANODE_NCCL_LIBRARY names
//
// It prints "ok" and exits 0, or names the first failure and exits 1.
#define _GNU_SOURCE
#include <pthread.h>
#include <dlfcn.h>
#include <unistd.h>

#include "intranode.h"

#define LAST_ERROR() intranodeGetLastError()
#include "../../internal/ctest/check.h"

enum { COUNT = 1001 };

static intranodeUniqueId uid;
static int world;

// The NCCL of the nccl mode, loaded by hand: its id and communicators.
typedef struct { char internal[128]; } ncclUniqueId;
static ncclUniqueId ncclId;
static int (*ncclInit)(void **comm, int nranks, ncclUniqueId id, int rank);
static int (*ncclDestroy)(void *comm);

// value is rank r's input element i: small integers, exact in float.
static float value(int r, int i) { return (float)((i * 7 + r * 13) % 61 - 30); }

// collectives runs every collective in place and out of place.
static void collectives(intranodeComm_t comm, int rank, void *stream) {
	size_t big = (size_t)world * COUNT;
	float *in, *out;
	OK(intranodeMemAlloc(comm, (void **)&in, big * sizeof(float)));
	OK(intranodeMemAlloc(comm, (void **)&out, big * sizeof(float)));
	for (int inplace = 0; inplace < 2; inplace++) {
		// all-reduce
		for (int i = 0; i < COUNT; i++) in[i] = value(rank, i);
		float *dst = inplace ? in : out;
		OK(intranodeAllReduce(in, dst, COUNT, intranodeFloat32, intranodeSum, comm, stream));
		OK(intranodeStreamSynchronize(comm, stream));
		for (int i = 0; i < COUNT; i++) {
			float want = 0;
			for (int r = 0; r < world; r++) want += value(r, i);
			CHECK(dst[i] == want, "all-reduce inplace=%d rank %d [%d] = %g, want %g", inplace, rank, i, dst[i], want);
		}
		// max
		for (int i = 0; i < COUNT; i++) in[i] = value(rank, i);
		OK(intranodeAllReduce(in, dst, COUNT, intranodeFloat32, intranodeMax, comm, stream));
		OK(intranodeStreamSynchronize(comm, stream));
		for (int i = 0; i < COUNT; i++) {
			float want = value(0, i);
			for (int r = 1; r < world; r++) want = value(r, i) > want ? value(r, i) : want;
			CHECK(dst[i] == want, "all-reduce max rank %d [%d] = %g, want %g", rank, i, dst[i], want);
		}
		// avg: the float sum in rank order, divided by world in float
		for (int i = 0; i < COUNT; i++) in[i] = value(rank, i);
		OK(intranodeAllReduce(in, dst, COUNT, intranodeFloat32, intranodeAvg, comm, stream));
		OK(intranodeStreamSynchronize(comm, stream));
		for (int i = 0; i < COUNT; i++) {
			float want = 0;
			for (int r = 0; r < world; r++) want += value(r, i);
			want /= (float)world;
			CHECK(dst[i] == want, "all-reduce avg rank %d [%d] = %g, want %g", rank, i, dst[i], want);
		}
		// reduce-scatter: in holds world blocks; the output is block rank
		for (size_t i = 0; i < big; i++) in[i] = value(rank, (int)i);
		dst = inplace ? in + (size_t)rank * COUNT : out;
		OK(intranodeReduceScatter(in, dst, COUNT, intranodeFloat32, intranodeSum, comm, stream));
		OK(intranodeStreamSynchronize(comm, stream));
		for (int i = 0; i < COUNT; i++) {
			float want = 0;
			for (int r = 0; r < world; r++) want += value(r, rank * COUNT + i);
			CHECK(dst[i] == want, "reduce-scatter inplace=%d rank %d [%d] = %g, want %g", inplace, rank, i, dst[i], want);
		}
		// all-gather: block r of the output is rank r's input
		float *src = inplace ? out + (size_t)rank * COUNT : in;
		for (int i = 0; i < COUNT; i++) src[i] = value(rank, i);
		OK(intranodeAllGather(src, out, COUNT, intranodeFloat32, comm, stream));
		OK(intranodeStreamSynchronize(comm, stream));
		for (size_t i = 0; i < big; i++) {
			float want = value((int)(i / COUNT), (int)(i % COUNT));
			CHECK(out[i] == want, "all-gather inplace=%d rank %d [%zu] = %g, want %g", inplace, rank, i, out[i], want);
		}
		// broadcast from the last rank
		int root = world - 1;
		for (int i = 0; i < COUNT; i++) in[i] = value(rank, i);
		dst = inplace ? in : out;
		OK(intranodeBroadcast(rank == root ? in : NULL, dst, COUNT, intranodeFloat32, root, comm, stream));
		OK(intranodeStreamSynchronize(comm, stream));
		for (int i = 0; i < COUNT; i++)
			CHECK(dst[i] == value(root, i), "broadcast inplace=%d rank %d [%d] = %g", inplace, rank, i, dst[i]);
		// all-to-all: block r of the output is block rank of rank r's input
		for (size_t i = 0; i < big; i++) in[i] = value(rank, (int)i);
		dst = inplace ? in : out;
		OK(intranodeAllToAll(in, dst, COUNT, intranodeFloat32, comm, stream));
		OK(intranodeStreamSynchronize(comm, stream));
		for (size_t i = 0; i < big; i++) {
			int r = (int)(i / COUNT);
			float want = value(r, rank * COUNT + (int)(i % COUNT));
			CHECK(dst[i] == want, "all-to-all inplace=%d rank %d [%zu] = %g, want %g", inplace, rank, i, dst[i], want);
		}
	}
	OK(intranodeMemFree(comm, in));
	OK(intranodeMemFree(comm, out));
}

// bad checks arguments every call refuses, with the code and a message
// naming the argument.
static void bad(intranodeComm_t comm, void *stream) {
	float *buf;
	OK(intranodeMemAlloc(comm, (void **)&buf, 64 * sizeof(float)));
	struct {
		intranodeResult_t got;
		const char *want;
	} cases[] = {
		{intranodeAllReduce(buf, buf, 8, intranodeFloat32, intranodeSum, NULL, stream), "comm is NULL"},
		{intranodeAllReduce(buf, buf, 8, (intranodeDataType_t)42, intranodeSum, comm, stream), "datatype 42"},
		{intranodeAllReduce(buf, buf, 8, intranodeFloat32, (intranodeRedOp_t)7, comm, stream), "reduction op 7"},
		{intranodeAllReduce(buf, NULL, 8, intranodeFloat32, intranodeSum, comm, stream), "recvbuff is NULL"},
		{intranodeAllReduce(buf, buf, (size_t)1 << 62, intranodeFloat32, intranodeSum, comm, stream), "too large"},
		{intranodeAllReduce(buf, buf, 4096, intranodeFloat32, intranodeSum, comm, stream), "in-place buffer of 16384 bytes"},
		{intranodeBroadcast(buf, buf, 8, intranodeFloat32, 99, comm, stream), "root 99"},
		{intranodeAllGather(buf, buf, 8, intranodeFloat32, comm, (void *)0x5), "intranodeStreamCreate"},
		{intranodeMemFree(comm, buf + 1), "was not allocated"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		CHECK(cases[i].got == intranodeInvalidArgument, "case %zu returned %d, want invalid argument", i, (int)cases[i].got);
	}
	// The last error is the last failure's.
	CHECK(strstr(intranodeGetLastError(), "was not allocated") != NULL, "last error");
	CHECK(intranodeAllReduce(buf, buf, 8, (intranodeDataType_t)42, intranodeSum, comm, stream) == intranodeInvalidArgument &&
	          strstr(intranodeGetLastError(), "datatype 42") != NULL,
	      "the last error names the datatype");
	OK(intranodeAllReduce(buf, buf, 0, intranodeFloat32, intranodeSum, comm, stream)); // count 0: nothing
	OK(intranodeMemFree(comm, buf));
	int v = 0;
	OK(intranodeGetVersion(&v));
	CHECK(v == INTRANODE_VERSION_CODE, "version %d", v);
	CHECK(intranodeGetVersion(NULL) == intranodeInvalidArgument, "version NULL");
	CHECK(strcmp(intranodeGetErrorString(intranodeTimeout), "timeout") == 0, "error string");
}

// stall: rank 0 all-reduces alone (the others do not call) and must fail
// within the timeout, through the stream sync and the async error, naming
// a missing rank. Then the comm refuses calls; abort returns at once.
static void stall(intranodeComm_t comm, int rank, void *stream, int timeoutMs) {
	if (rank == 0) {
		float *buf;
		OK(intranodeMemAlloc(comm, (void **)&buf, 64 * sizeof(float)));
		intranodeResult_t async;
		OK(intranodeCommGetAsyncError(comm, &async));
		CHECK(async == intranodeSuccess, "async error before the stall: %d", (int)async);
		double t0 = now();
		OK(intranodeAllReduce(buf, buf, 64, intranodeFloat32, intranodeSum, comm, stream));
		intranodeResult_t r = intranodeStreamSynchronize(comm, stream);
		double took = now() - t0;
		CHECK(r == intranodeTimeout, "stalled all-reduce returned %d, want timeout", (int)r);
		CHECK(strstr(intranodeGetLastError(), "rank ") != NULL, "the error names no rank");
		CHECK(took < timeoutMs / 1000.0 + 1.5, "the stall took %.2f s", took);
		OK(intranodeCommGetAsyncError(comm, &async));
		CHECK(async == intranodeTimeout, "async error %d, want timeout", (int)async);
		CHECK(intranodeAllReduce(buf, buf, 64, intranodeFloat32, intranodeSum, comm, stream) != intranodeSuccess,
		      "a failed comm accepted a call");
	}
	double t0 = now();
	OK(intranodeCommAbort(comm));
	CHECK(now() - t0 < 2.0, "abort took %.2f s", now() - t0);
	CHECK(intranodeCommAbort(comm) == intranodeInvalidArgument, "a second abort of the same handle");
}

static void *rank_main(void *arg) {
	int rank = (int)(long)arg;
	intranodeConfig_t cfg = INTRANODE_CONFIG_INITIALIZER;
	cfg.backend = "fake";
	cfg.timeoutMs = 1000;
	intranodeComm_t comm;
	void *nc = NULL;
	if (ncclInit != NULL) {
		CHECK(ncclInit(&nc, world, ncclId, rank) == 0, "ncclCommInitRank");
		OK(intranodeCommInitFromNccl(&comm, nc, &cfg));
	} else {
		OK(intranodeCommInitRank(&comm, world, uid, rank, &cfg));
	}
	int n = 0, r = -1, dev = -1;
	OK(intranodeCommCount(comm, &n));
	OK(intranodeCommUserRank(comm, &r));
	OK(intranodeCommDevice(comm, &dev));
	CHECK(n == world && r == rank && dev == rank, "count %d rank %d device %d", n, r, dev);
	void *stream;
	OK(intranodeStreamCreate(comm, &stream));
	collectives(comm, rank, stream);
	bad(comm, stream);
	stall(comm, rank, stream, cfg.timeoutMs);
	if (nc != NULL) CHECK(ncclDestroy(nc) == 0, "ncclCommDestroy"); // the caller's, still
	return NULL;
}

static void rank0(void) { rank_main((void *)0L); }

int main(int argc, char **argv) {
	if (argc < 3) {
		fprintf(stderr, "usage: check threads|procs|nccl WORLD | check child procs RANK WORLD HEXID\n");
		return 2;
	}
	if (argc == 6 && strcmp(argv[1], "child") == 0) {
		world = atoi(argv[4]);
		unhex(argv[5], (unsigned char *)uid.internal, sizeof uid.internal);
		rank_main((void *)(long)atoi(argv[3]));
		return 0;
	}
	world = atoi(argv[2]);
	CHECK(world >= 2 && world <= MAXW, "world %d", world);
	{
		// Refusals before any group exists.
		intranodeComm_t comm = (intranodeComm_t)0x1;
		intranodeUniqueId junk;
		memset(&junk, 0, sizeof junk);
		CHECK(intranodeCommInitRank(&comm, 2, junk, 0, NULL) == intranodeInvalidArgument && comm == NULL,
		      "a zero unique id was accepted");
		CHECK(strstr(intranodeGetLastError(), "not a unique id") != NULL, "message for a bad id");
		intranodeConfig_t cfg = INTRANODE_CONFIG_INITIALIZER;
		cfg.size = 8;
		OK(intranodeGetUniqueId(&junk));
		CHECK(intranodeCommInitRank(&comm, 2, junk, 0, &cfg) == intranodeInvalidArgument, "a config of the wrong size");
		CHECK(intranodeCommInitRank(&comm, 2, junk, 5, NULL) == intranodeInvalidArgument, "rank 5 of 2");
	}
	OK(intranodeGetUniqueId(&uid));
	if (strcmp(argv[1], "nccl") == 0) {
		void *lib = dlopen(getenv("INTRANODE_NCCL_LIBRARY"), RTLD_NOW | RTLD_LOCAL);
		CHECK(lib != NULL, "dlopen %s: %s", getenv("INTRANODE_NCCL_LIBRARY"), dlerror());
		int (*getId)(ncclUniqueId *) = (int (*)(ncclUniqueId *))dlsym(lib, "ncclGetUniqueId");
		ncclInit = (int (*)(void **, int, ncclUniqueId, int))dlsym(lib, "ncclCommInitRank");
		ncclDestroy = (int (*)(void *))dlsym(lib, "ncclCommDestroy");
		CHECK(getId != NULL && ncclInit != NULL && ncclDestroy != NULL && getId(&ncclId) == 0, "the NCCL's id");
		CHECK(intranodeCommInitFromNccl(NULL, NULL, NULL) == intranodeInvalidArgument, "NULL comm");
	}
	if (strcmp(argv[1], "threads") == 0 || strcmp(argv[1], "nccl") == 0) {
		pthread_t t[MAXW];
		for (int r = 0; r < world; r++) CHECK(pthread_create(&t[r], NULL, rank_main, (void *)(long)r) == 0, "thread");
		for (int r = 0; r < world; r++) pthread_join(t[r], NULL);
	} else {
		run_procs(argv[0], "procs", world, uid.internal, sizeof uid.internal, rank0);
	}
	printf("ok\n");
	return 0;
}
