// nccl_decl.h: the parts of NCCL's public interface (nccl.h, 2.18 to
// 2.29) that the NCCL-API library needs to declare its exports and call
// the real library: opaque handles, enums as ints, configuration structs
// passed by pointer only. It is written from NCCL's documented ABI, so the
// library builds without NCCL or CUDA headers.
#ifndef INTRANODE_NCCL_DECL_H
#define INTRANODE_NCCL_DECL_H

#include <stddef.h>
#include <stdint.h>

typedef int ncclResult_t;
enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7
};

typedef struct ncclComm *ncclComm_t;
typedef struct ncclWindow_vidmem *ncclWindow_t;
typedef struct ncclParamHandle *ncclParamHandle_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef struct ncclConfig_opaque ncclConfig_t;         // by pointer only
typedef struct ncclCollConfig_opaque ncclCollConfig_t; // by pointer only
typedef struct ncclSimInfo_opaque ncclSimInfo_t;       // by pointer only
typedef struct ncclWaitSignalDesc_opaque ncclWaitSignalDesc_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
typedef int ncclScalarResidence_t;
typedef int ncclCommMemStat_t;
typedef void *cudaStream_t;

// NCCL's data types and reductions that intranode may run.
enum { ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32 = 3, ncclInt64 = 4, ncclUint64 = 5,
       ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9 };
enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 };

// The collectives the library may run itself (intranode_call.op).
enum { IN_ALLREDUCE = 0, IN_REDUCESCATTER = 1, IN_ALLGATHER = 2, IN_BROADCAST = 3, IN_ALLTOALL = 4 };

// One collective call as NCCL received it.
struct intranode_call {
	int op;
	const void *send;
	void *recv;
	size_t count;
	ncclDataType_t dtype;
	ncclRedOp_t red;
	int root;
	ncclComm_t comm;
	cudaStream_t stream;
};

// The C side's services to Go (ncclapi.c).
void *intranode_real_sym(const char *name);
const char *intranode_real_error(void);
ncclResult_t intranode_forward(const struct intranode_call *c);
int intranode_stream_capturing(cudaStream_t stream);
void intranode_set_error(const char *msg, size_t n);
int intranode_enabled(void);
void intranode_set_state(ncclComm_t comm, int state); // 1 ruled out, 2 formed, 3 lost, 0 forgotten

// intranode_ptr turns an address kept in Go as an integer into a pointer.
static inline void *intranode_ptr(uintptr_t v) { return (void *)v; }

#endif
