// ccl.h declares the shims of ccl_impl.h, a vendor's collective library
// opened at run time (NCCL on CUDA, RCCL on ROCm: one API), as a table of
// functions. A backend's shim header includes it after defining GPU_FN
// (see shim_impl.h), which names the function returning its table; the GPU
// core's cgo binding (ccl_cgo.go) includes it without. The few library
// types the shims need are declared in ccl_impl.h, so building needs no
// nccl.h or rccl.h.
//
// The shims return an ncclResult_t; one that makes its device current
// first and fails there returns GPU_CCL_DRIVER_FAILED or'ed with the
// driver's result, and the collective returns GPU_CCL_ASYNC or'ed
// with the communicator's asynchronous error when the call itself
// succeeded but the communicator has failed. On a non-blocking
// communicator (init with nonblocking set), GPU_CCL_IN_PROGRESS from init
// or a collective means the operation goes on on the library's thread:
// async_error says when it has ended.

#ifndef INTRANODE_GPU_CCL_H
#define INTRANODE_GPU_CCL_H

#include <stddef.h>
#include <stdint.h>

enum {
	GPU_CCL_SUCCESS = 0,
	GPU_CCL_IN_PROGRESS = 7,
	GPU_CCL_UNIQUE_ID_BYTES = 128,
	GPU_CCL_DRIVER_FAILED = 0x10000,
	GPU_CCL_ASYNC = 0x20000,
};

// What features returns: the optional entry points the library has.
enum {
	GPU_CCL_HAS_CONFIG = 1, // ncclCommInitRankConfig (non-blocking communicators)
	GPU_CCL_HAS_SPLIT = 2,  // ncclCommSplit with a config (splitShare)
};

// The collectives GPU_FN(ccl_collective) enqueues (collective.Op's order).
enum {
	GPU_CCL_ALL_REDUCE = 0,
	GPU_CCL_REDUCE_SCATTER = 1,
	GPU_CCL_ALL_GATHER = 2,
	GPU_CCL_BROADCAST = 3,
	GPU_CCL_ALL_TO_ALL = 4,
};

// gpu_ccl_table is a backend's shims of the library (ccl_impl.h); a call's
// device context (a CUDA context, a HIP ordinal) travels as a uintptr_t.
// ccl_load returns 0 on success, 1 when the library cannot be opened and 2
// when an entry point is missing; err then holds the reason.
// ccl_collective enqueues one collective of kind GPU_CCL_*: count is per
// rank as the library takes it (recvcount, sendcount, the block per peer of
// the all-to-all, grouped sends and receives of elem_size-byte elements);
// op serves all-reduce and reduce-scatter, root the broadcast. split
// starts a blocking duplicate of a non-blocking communicator, written into
// *slot, which child reads and frees (ccl_impl.h).
struct gpu_ccl_table {
	int (*load)(const char *path, char *err, size_t errlen);
	const char *(*error_string)(int r);
	const char *(*last_error)(void);
	int (*version)(int *version);
	int (*unique_id)(unsigned char *id);
	int (*init)(uintptr_t ctx, int nranks, const unsigned char *id, int rank, int nonblocking, uintptr_t *comm);
	int (*async_error)(uintptr_t comm, int *state);
	int (*collective)(uintptr_t ctx, uintptr_t comm, int kind, uint64_t in, uint64_t out, size_t count, size_t elem_size,
	                  int dtype, int op, int root, int nranks, uintptr_t stream);
	int (*abort)(uintptr_t ctx, uintptr_t comm);
	int (*features)(void);
	int (*split)(uintptr_t ctx, uintptr_t parent, int rank, uintptr_t *slot);
	uintptr_t (*child)(uintptr_t slot);
};

#endif

#ifdef GPU_FN
// GPU_FN(ccl_table) returns the backend's table.
const struct gpu_ccl_table *GPU_FN(ccl_table)(void);
#endif
