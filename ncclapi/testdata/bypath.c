// bypath.c opens an NCCL library by path at run time and looks every
// function up in its handle, as Python's ctypes does (vLLM's and SGLang's
// pynccl: ctypes.CDLL(path)); it links neither NCCL nor intranode:
//
//	bypath LIBRARY WORLD WANT
//
// WORLD threads make a communicator and all-reduce a float sum and a float
// average, each checked element by element; then the mock NCCL (the
// library INTRANODE_NCCL_LIBRARY names, loaded by then) must have received
// WANT of the 2*WORLD all-reduces: 0 when LIBRARY is intranode's, all of
// them when LIBRARY is the mock itself, whatever LD_PRELOAD holds (a
// preloaded library is not searched for a symbol looked up in a handle).
//
// It prints "ok" and exits 0, or names the first failure and exits 1.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>

#include "../nccl_decl.h"

static const char *(*get_last_error)(ncclComm_t);
#define LAST_ERROR() (get_last_error ? get_last_error(NULL) : "none")
#include "../../internal/ctest/check.h"

enum { COUNT = 999 };

static ncclResult_t (*get_unique_id)(ncclUniqueId *);
static ncclResult_t (*comm_init_rank)(ncclComm_t *, int, ncclUniqueId, int);
static ncclResult_t (*comm_destroy)(ncclComm_t);
static ncclResult_t (*mem_alloc)(void **, size_t);
static ncclResult_t (*mem_free)(void *);
static ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);

static ncclUniqueId uid;
static int world;

static float value(int r, int i) { return (float)((i * 7 + r * 13) % 61 - 30); }

static void *bind(void *lib, const char *name) {
	void *f = dlsym(lib, name);
	CHECK(f != NULL, "%s not in the library: %s", name, dlerror());
	return f;
}

static void *rank_main(void *arg) {
	int rank = (int)(long)arg;
	ncclComm_t comm;
	OK(comm_init_rank(&comm, world, uid, rank));
	float *in, *out;
	OK(mem_alloc((void **)&in, COUNT * sizeof(float)));
	OK(mem_alloc((void **)&out, COUNT * sizeof(float)));
	for (int op = 0; op < 2; op++) {
		for (int i = 0; i < COUNT; i++) in[i] = value(rank, i);
		OK(all_reduce(in, out, COUNT, ncclFloat32, op == 0 ? ncclSum : ncclAvg, comm, NULL));
		for (int i = 0; i < COUNT; i++) {
			float want = 0;
			for (int r = 0; r < world; r++) want += value(r, i);
			if (op == 1) want /= (float)world;
			CHECK(out[i] == want, "%s rank %d [%d] = %g, want %g", op == 0 ? "sum" : "avg", rank, i, out[i], want);
		}
	}
	OK(mem_free(in));
	OK(mem_free(out));
	OK(comm_destroy(comm));
	return NULL;
}

int main(int argc, char **argv) {
	CHECK(argc == 4, "usage: bypath LIBRARY WORLD WANT");
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	CHECK(lib != NULL, "dlopen %s: %s", argv[1], dlerror());
	world = atoi(argv[2]);
	CHECK(world >= 1 && world <= MAXW, "world %d", world);
	get_last_error = (const char *(*)(ncclComm_t))bind(lib, "ncclGetLastError");
	get_unique_id = (ncclResult_t(*)(ncclUniqueId *))bind(lib, "ncclGetUniqueId");
	comm_init_rank = (ncclResult_t(*)(ncclComm_t *, int, ncclUniqueId, int))bind(lib, "ncclCommInitRank");
	comm_destroy = (ncclResult_t(*)(ncclComm_t))bind(lib, "ncclCommDestroy");
	mem_alloc = (ncclResult_t(*)(void **, size_t))bind(lib, "ncclMemAlloc");
	mem_free = (ncclResult_t(*)(void *))bind(lib, "ncclMemFree");
	all_reduce = (ncclResult_t(*)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
	                              cudaStream_t))bind(lib, "ncclAllReduce");
	OK(get_unique_id(&uid));
	pthread_t th[MAXW];
	for (int r = 0; r < world; r++) CHECK(pthread_create(&th[r], NULL, rank_main, (void *)(long)r) == 0, "thread");
	for (int r = 0; r < world; r++) pthread_join(th[r], NULL);
	void *mock = dlopen(getenv("INTRANODE_NCCL_LIBRARY"), RTLD_NOW | RTLD_NOLOAD);
	CHECK(mock != NULL, "the mock NCCL is not loaded");
	int (*calls)(const char *) = (int (*)(const char *))dlsym(mock, "mockNcclCalls");
	CHECK(calls != NULL, "mockNcclCalls");
	CHECK(calls("ncclAllReduce") == atoi(argv[3]), "%d all-reduces reached NCCL, want %s", calls("ncclAllReduce"), argv[3]);
	printf("ok\n");
	return 0;
}
