// forward.c: every function of NCCL's interface (2.18 to 2.29) that the
// library does not run itself goes unchanged to the real NCCL, and every
// function has its pnccl twin, as in nccl.h, so that profilers can
// interpose. Calls that join a group (collectives, point-to-point,
// communicator creation) first hand a held collective to NCCL, in order.
#include <stddef.h>
#include <stdint.h>

#include "nccl_decl.h"

ncclResult_t intranode_group_flush(void);

// FWD forwards a function returning ncclResult_t; OP also flushes a held
// collective of the thread's group first; COMM_OP, for calls on a
// communicator's call sequence, first fails them on a communicator whose
// bootstrap lost that sequence (intranode_lost_check); COMM_FWD does that
// alone (ncclCommFinalize would wait for the lost all-gather for good).
#define FWD_(name, params, args, pre)                                                      \
	ncclResult_t name params {                                                            \
		typedef ncclResult_t(*fn_t) params;                                               \
		static fn_t fn;                                                                   \
		fn_t f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);                                  \
		if (f == NULL) {                                                                  \
			f = (fn_t)intranode_real_sym(#name);                                          \
			__atomic_store_n(&fn, f, __ATOMIC_RELEASE);                                   \
		}                                                                                 \
		if (f == NULL) return intranode_missing(#name);                                   \
		pre;                                                                              \
		return f args;                                                                    \
	}                                                                                     \
	ncclResult_t p##name params { return name args; }
#define FWD(name, params, args) FWD_(name, params, args, (void)0)
// RETURN_IF returns a failed result of call.
#define RETURN_IF(call)                                                                    \
	do {                                                                                  \
		ncclResult_t r_ = (call);                                                         \
		if (r_ != ncclSuccess) return r_;                                                 \
	} while (0)
#define OP(name, params, args) FWD_(name, params, args, RETURN_IF(intranode_group_flush()))
#define COMM_FWD(name, params, args) FWD_(name, params, args, RETURN_IF(intranode_lost_check(comm)))
#define COMM_OP(name, params, args)                                                        \
	FWD_(name, params, args, {                                                            \
		RETURN_IF(intranode_lost_check(comm));                                            \
		RETURN_IF(intranode_group_flush());                                               \
	})

ncclResult_t intranode_missing(const char *name);
ncclResult_t intranode_lost_check(ncclComm_t comm);
void intranode_interrupt(ncclComm_t comm);

// NCCL_SHRINK_ABORT (nccl.h 2.27+): the shrink first terminates the
// parent's operations in flight.
#define INTRANODE_SHRINK_ABORT 0x01

FWD(ncclGetVersion, (int *version), (version))
FWD(ncclGetUniqueId, (ncclUniqueId * id), (id))
OP(ncclCommInitRankConfig, (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config),
   (comm, nranks, id, rank, config))
OP(ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank), (comm, nranks, id, rank))
FWD(ncclCommInitAll, (ncclComm_t * comm, int ndev, const int *devlist), (comm, ndev, devlist))
OP(ncclCommInitRankScalable, (ncclComm_t * comm, int nranks, int rank, int nId, ncclUniqueId *ids, ncclConfig_t *config),
   (comm, nranks, rank, nId, ids, config))
COMM_FWD(ncclCommFinalize, (ncclComm_t comm), (comm))
// Revoking, and shrinking with NCCL_SHRINK_ABORT, stop the communicator's
// operations in flight: intranode's too (intranode_interrupt), and from
// then on NCCL has the communicator's every call, so a lost one is no
// longer failed here.
FWD_(ncclCommRevoke, (ncclComm_t comm, int flags), (comm, flags), intranode_interrupt(comm))
COMM_OP(ncclCommSplit, (ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config),
   (comm, color, key, newcomm, config))
FWD_(ncclCommShrink, (ncclComm_t comm, int *exclude, int n, ncclComm_t *newcomm, ncclConfig_t *config, int flags),
     (comm, exclude, n, newcomm, config, flags), {
	     if (flags & INTRANODE_SHRINK_ABORT) {
		     intranode_interrupt(comm);
	     } else {
		     RETURN_IF(intranode_lost_check(comm));
	     }
	     RETURN_IF(intranode_group_flush());
     })
FWD(ncclCommGetUniqueId, (ncclComm_t comm, ncclUniqueId *id), (comm, id))
COMM_OP(ncclCommGrow, (ncclComm_t comm, int nranks, const ncclUniqueId *id, int rank, ncclComm_t *newcomm, ncclConfig_t *config),
   (comm, nranks, id, rank, newcomm, config))
FWD(ncclCommCount, (const ncclComm_t comm, int *count), (comm, count))
FWD(ncclCommCuDevice, (const ncclComm_t comm, int *device), (comm, device))
FWD(ncclCommUserRank, (const ncclComm_t comm, int *rank), (comm, rank))
FWD(ncclCommRegister, (const ncclComm_t comm, void *buff, size_t size, void **handle), (comm, buff, size, handle))
FWD(ncclCommDeregister, (const ncclComm_t comm, void *handle), (comm, handle))
FWD(ncclCommSuspend, (ncclComm_t comm, int flags), (comm, flags))
FWD(ncclCommResume, (ncclComm_t comm), (comm))
FWD(ncclCommMemStats, (ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value), (comm, stat, value))
COMM_FWD(ncclCommWindowRegister, (ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int flags),
    (comm, buff, size, win, flags))
FWD(ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win), (comm, win))
FWD(ncclWinGetUserPtr, (ncclComm_t comm, ncclWindow_t win, void **ptr), (comm, win, ptr))
FWD(ncclRedOpCreatePreMulSum,
    (ncclRedOp_t * op, void *scalar, ncclDataType_t dt, ncclScalarResidence_t residence, ncclComm_t comm),
    (op, scalar, dt, residence, comm))
FWD(ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm), (op, comm))
COMM_OP(ncclReduce, (const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t s),
   (send, recv, count, dt, op, root, comm, s))
COMM_OP(ncclGather, (const void *send, void *recv, size_t count, ncclDataType_t dt, int root, ncclComm_t comm, cudaStream_t s),
   (send, recv, count, dt, root, comm, s))
COMM_OP(ncclScatter, (const void *send, void *recv, size_t count, ncclDataType_t dt, int root, ncclComm_t comm, cudaStream_t s),
   (send, recv, count, dt, root, comm, s))
COMM_OP(ncclAllReduceConfig,
   (const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op, ncclComm_t comm, cudaStream_t s, const ncclCollConfig_t *cfg),
   (send, recv, count, dt, op, comm, s, cfg))
COMM_OP(ncclBroadcastConfig,
   (const void *send, void *recv, size_t count, ncclDataType_t dt, int root, ncclComm_t comm, cudaStream_t s, const ncclCollConfig_t *cfg),
   (send, recv, count, dt, root, comm, s, cfg))
COMM_OP(ncclReduceConfig,
   (const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t s, const ncclCollConfig_t *cfg),
   (send, recv, count, dt, op, root, comm, s, cfg))
COMM_OP(ncclAllGatherConfig,
   (const void *send, void *recv, size_t count, ncclDataType_t dt, ncclComm_t comm, cudaStream_t s, const ncclCollConfig_t *cfg),
   (send, recv, count, dt, comm, s, cfg))
COMM_OP(ncclReduceScatterConfig,
   (const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op, ncclComm_t comm, cudaStream_t s, const ncclCollConfig_t *cfg),
   (send, recv, count, dt, op, comm, s, cfg))
COMM_OP(ncclAlltoAllConfig,
   (const void *send, void *recv, size_t count, ncclDataType_t dt, ncclComm_t comm, cudaStream_t s, const ncclCollConfig_t *cfg),
   (send, recv, count, dt, comm, s, cfg))
COMM_OP(ncclGatherConfig,
   (const void *send, void *recv, size_t count, ncclDataType_t dt, int root, ncclComm_t comm, cudaStream_t s, const ncclCollConfig_t *cfg),
   (send, recv, count, dt, root, comm, s, cfg))
COMM_OP(ncclScatterConfig,
   (const void *send, void *recv, size_t count, ncclDataType_t dt, int root, ncclComm_t comm, cudaStream_t s, const ncclCollConfig_t *cfg),
   (send, recv, count, dt, root, comm, s, cfg))
COMM_OP(ncclSend, (const void *send, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t s),
   (send, count, dt, peer, comm, s))
COMM_OP(ncclRecv, (void *recv, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm, cudaStream_t s),
   (recv, count, dt, peer, comm, s))
COMM_OP(ncclPutSignal,
   (const void *local, size_t count, ncclDataType_t dt, int peer, ncclWindow_t win, size_t off, int sig, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t s),
   (local, count, dt, peer, win, off, sig, ctx, flags, comm, s))
COMM_OP(ncclSignal, (int peer, int sig, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t s), (peer, sig, ctx, flags, comm, s))
COMM_OP(ncclWaitSignal, (int n, ncclWaitSignalDesc_t *descs, ncclComm_t comm, cudaStream_t s), (n, descs, comm, s))
FWD(ncclGroupSimulateEnd, (ncclSimInfo_t * info), (info))
FWD(ncclParamBind, (ncclParamHandle_t * out, const char *key), (out, key))
FWD(ncclParamGetI8, (ncclParamHandle_t h, int8_t *out), (h, out))
FWD(ncclParamGetI16, (ncclParamHandle_t h, int16_t *out), (h, out))
FWD(ncclParamGetI32, (ncclParamHandle_t h, int32_t *out), (h, out))
FWD(ncclParamGetI64, (ncclParamHandle_t h, int64_t *out), (h, out))
FWD(ncclParamGetU8, (ncclParamHandle_t h, uint8_t *out), (h, out))
FWD(ncclParamGetU16, (ncclParamHandle_t h, uint16_t *out), (h, out))
FWD(ncclParamGetU32, (ncclParamHandle_t h, uint32_t *out), (h, out))
FWD(ncclParamGetU64, (ncclParamHandle_t h, uint64_t *out), (h, out))
FWD(ncclParamGetStr, (ncclParamHandle_t h, const char **out), (h, out))
FWD(ncclParamGet, (ncclParamHandle_t h, void *out, int maxLen, int *len), (h, out, maxLen, len))
FWD(ncclParamGetParameter, (const char *key, const char **value, int *len), (key, value, len))
FWD(ncclParamGetAllParameterKeys, (const char ***table, int *len), (table, len))

// Functions without a result code.
#define VOID_FWD(name)                                                                     \
	void name(void) {                                                                     \
		void (*f)(void) = (void (*)(void))intranode_real_sym(#name);                      \
		if (f != NULL) f();                                                               \
	}                                                                                     \
	void p##name(void) { name(); }
VOID_FWD(ncclResetDebugInit)
VOID_FWD(ncclParamDumpAll)

// The pnccl twins of the functions the library handles itself.
ncclResult_t ncclAllReduce(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
ncclResult_t ncclReduceScatter(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
ncclResult_t ncclAllGather(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
ncclResult_t ncclBroadcast(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclBcast(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
ncclResult_t ncclAlltoAll(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclCommDestroy(ncclComm_t);
ncclResult_t ncclCommAbort(ncclComm_t);
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t *);
const char *ncclGetLastError(ncclComm_t);
const char *ncclGetErrorString(ncclResult_t);
ncclResult_t ncclMemAlloc(void **, size_t);
ncclResult_t ncclMemFree(void *);

ncclResult_t pncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t d, ncclRedOp_t o, ncclComm_t c, cudaStream_t st) {
	return ncclAllReduce(s, r, n, d, o, c, st);
}
ncclResult_t pncclReduceScatter(const void *s, void *r, size_t n, ncclDataType_t d, ncclRedOp_t o, ncclComm_t c, cudaStream_t st) {
	return ncclReduceScatter(s, r, n, d, o, c, st);
}
ncclResult_t pncclAllGather(const void *s, void *r, size_t n, ncclDataType_t d, ncclComm_t c, cudaStream_t st) {
	return ncclAllGather(s, r, n, d, c, st);
}
ncclResult_t pncclBroadcast(const void *s, void *r, size_t n, ncclDataType_t d, int root, ncclComm_t c, cudaStream_t st) {
	return ncclBroadcast(s, r, n, d, root, c, st);
}
ncclResult_t pncclAlltoAll(const void *s, void *r, size_t n, ncclDataType_t d, ncclComm_t c, cudaStream_t st) {
	return ncclAlltoAll(s, r, n, d, c, st);
}
ncclResult_t pncclBcast(void *b, size_t n, ncclDataType_t d, int root, ncclComm_t c, cudaStream_t st) {
	return ncclBcast(b, n, d, root, c, st);
}
ncclResult_t pncclGroupStart(void) { return ncclGroupStart(); }
ncclResult_t pncclGroupEnd(void) { return ncclGroupEnd(); }
ncclResult_t pncclCommDestroy(ncclComm_t c) { return ncclCommDestroy(c); }
ncclResult_t pncclCommAbort(ncclComm_t c) { return ncclCommAbort(c); }
ncclResult_t pncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e) { return ncclCommGetAsyncError(c, e); }
const char *pncclGetLastError(ncclComm_t c) { return ncclGetLastError(c); }
const char *pncclGetErrorString(ncclResult_t r) { return ncclGetErrorString(r); }
ncclResult_t pncclMemAlloc(void **p, size_t n) { return ncclMemAlloc(p, n); }
ncclResult_t pncclMemFree(void *p) { return ncclMemFree(p); }
