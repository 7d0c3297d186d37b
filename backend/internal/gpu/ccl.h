// ccl.h declares the shims of ccl_impl.h, a vendor's collective library
// opened at run time (NCCL on CUDA, RCCL on ROCm: one API), under a
// backend's names. A backend's shim header includes it after defining
// GPU_FN and GPU_CTX_T (see shim_impl.h). The few library types the shims
// need are declared in ccl_impl.h, so building needs no nccl.h or rccl.h.
//
// The shims return an ncclResult_t; one that makes its device current
// first and fails there returns GPU_CCL_DRIVER_FAILED or'ed with the
// driver's result, and GPU_FN(ccl_collective) returns GPU_CCL_ASYNC or'ed
// with the communicator's asynchronous error when the call itself
// succeeded but the communicator has failed.

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

// The collectives GPU_FN(ccl_collective) enqueues (collective.Op's order).
enum {
	GPU_CCL_ALL_REDUCE = 0,
	GPU_CCL_REDUCE_SCATTER = 1,
	GPU_CCL_ALL_GATHER = 2,
	GPU_CCL_BROADCAST = 3,
	GPU_CCL_ALL_TO_ALL = 4,
};

#endif

// ccl_load returns 0 on success, 1 when the library cannot be opened and 2
// when an entry point is missing; err then holds the reason.
int GPU_FN(ccl_load)(const char *path, char *err, size_t errlen);
const char *GPU_FN(ccl_error_string)(int r);
const char *GPU_FN(ccl_last_error)(void);
int GPU_FN(ccl_version)(int *version);
int GPU_FN(ccl_unique_id)(unsigned char *id);
int GPU_FN(ccl_init)(GPU_CTX_T c, int nranks, const unsigned char *id, int rank, uintptr_t *comm);
// ccl_collective enqueues one collective of kind GPU_CCL_*: count is per
// rank as the library takes it (recvcount, sendcount, the block per peer of
// the all-to-all, grouped sends and receives of elem_size-byte elements);
// op serves all-reduce and reduce-scatter, root the broadcast.
int GPU_FN(ccl_collective)(GPU_CTX_T c, uintptr_t comm, int kind, uint64_t in, uint64_t out, size_t count,
                           size_t elem_size, int dtype, int op, int root, int nranks, uintptr_t stream);
int GPU_FN(ccl_abort)(GPU_CTX_T c, uintptr_t comm);
