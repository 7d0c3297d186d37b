// overhead.c measures what the NCCL-API library adds to a call it hands
// to NCCL, on the CPU: the same calls made straight to the (mock) NCCL and
// through the library, on a one-rank communicator (which the library rules
// out at its first eligible call). It prints one line per kind of call:
// "NAME direct_ns library_ns added_ns".
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../nccl_decl.h"

ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclAllReduce(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

typedef ncclResult_t (*allreduce_t)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
typedef ncclResult_t (*async_t)(ncclComm_t, ncclResult_t *);
typedef ncclResult_t (*group_t)(void);

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

enum { N = 200000 };

int main(void) {
	void *mock = dlopen(getenv("INTRANODE_NCCL_LIBRARY"), RTLD_NOW | RTLD_LOCAL);
	if (mock == NULL) return 2;
	allreduce_t mAllReduce = (allreduce_t)dlsym(mock, "ncclAllReduce");
	async_t mAsync = (async_t)dlsym(mock, "ncclCommGetAsyncError");
	group_t mStart = (group_t)dlsym(mock, "ncclGroupStart"), mEnd = (group_t)dlsym(mock, "ncclGroupEnd");
	ncclUniqueId id;
	ncclComm_t comm;
	if (ncclGetUniqueId(&id) || ncclCommInitRank(&comm, 1, id, 0)) return 3;
	static float buf[16];
	ncclResult_t e;
	// The first float call is where the library rules the one-rank
	// communicator out.
	if (ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, NULL)) return 4;

#define TIME(expr) ({ double t0_ = now(); for (int i_ = 0; i_ < N; i_++) { if (expr) return 5; } (now() - t0_) / N; })
	for (int round = 0; round < 2; round++) { // the first round warms up
		double d1 = TIME(mAllReduce(buf, buf, 16, ncclInt8, ncclSum, comm, NULL));
		double l1 = TIME(ncclAllReduce(buf, buf, 16, ncclInt8, ncclSum, comm, NULL));
		double d2 = TIME(mAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, NULL));
		double l2 = TIME(ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, NULL));
		double d3 = TIME((mStart() || mAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, NULL) || mEnd()));
		double l3 = TIME((ncclGroupStart() || ncclAllReduce(buf, buf, 16, ncclFloat32, ncclSum, comm, NULL) || ncclGroupEnd()));
		double d4 = TIME(mAsync(comm, &e));
		double l4 = TIME(ncclCommGetAsyncError(comm, &e));
		if (round == 1) {
			printf("allreduce-int8 %.1f %.1f %.1f\n", d1, l1, l1 - d1);
			printf("allreduce-float-ruled-out %.1f %.1f %.1f\n", d2, l2, l2 - d2);
			printf("group-of-one %.1f %.1f %.1f\n", d3, l3, l3 - d3);
			printf("async-error %.1f %.1f %.1f\n", d4, l4, l4 - d4);
		}
	}
	return 0;
}
