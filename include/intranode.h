/*
 * intranode.h: the C interface of intranode, fast collectives between the
 * accelerators of one host.
 *
 * Link with -lintranode (libintranode.so, built from Go with
 * `make cabi`; see the README). Every function returns an
 * intranodeResult_t; intranodeGetLastError() returns, for the calling
 * thread, the message of the last call that failed.
 *
 * A group of nranks ranks (processes or threads, one device each, all on
 * one host) is formed as in NCCL: one rank calls intranodeGetUniqueId and
 * hands the id to every rank by any means (MPI, a file, an environment
 * variable); each rank then calls intranodeCommInitRank with it.
 *
 * Threads: every function is safe to call from any thread. Calls on one
 * communicator are serialised by the library; as with NCCL, every rank
 * must issue the same collectives in the same order.
 *
 * Memory: buffers passed to collectives are device memory of the
 * communicator's device (cudaMalloc, hipMalloc or intranodeMemAlloc), owned
 * by the caller, and must stay valid until the collective has completed on
 * its stream. The library keeps no pointer to caller memory after the call
 * returns, except what the enqueued work reads and writes. Strings the
 * library returns are owned by it: do not free them.
 *
 * Streams: a stream argument is the backend's runtime stream (a
 * cudaStream_t on CUDA, a hipStream_t on ROCm; NULL is the default
 * stream). On backends without runtime streams (the fake backend, used for
 * tests, and plugins) pass a stream made by intranodeStreamCreate, or NULL
 * for a stream of the communicator's own.
 * Collectives are enqueued on the stream and return at once; they work
 * eagerly and inside CUDA/HIP graph capture.
 *
 * Faults: a collective whose peer dies or stalls fails on the device
 * within the communicator's timeout; the failure is reported by
 * intranodeCommGetAsyncError (poll it, as NCCL's watchdogs poll
 * ncclCommGetAsyncError) and by intranodeStreamSynchronize. A communicator
 * that failed refuses further calls: destroy it and make a new one.
 */
#ifndef INTRANODE_H
#define INTRANODE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The interface version: major*10000 + minor*100 + patch. */
#define INTRANODE_VERSION_MAJOR 0
#define INTRANODE_VERSION_MINOR 2
#define INTRANODE_VERSION_PATCH 0
#define INTRANODE_VERSION_CODE                                                 \
	(INTRANODE_VERSION_MAJOR * 10000 + INTRANODE_VERSION_MINOR * 100 +         \
	 INTRANODE_VERSION_PATCH)

/* Result codes. */
typedef enum {
	intranodeSuccess = 0,
	intranodeInvalidArgument = 1, /* a bad argument, named by the last error */
	intranodeNotSupported = 2,    /* the group or call cannot be served here */
	intranodeUnavailable = 3,     /* no usable device, backend or store */
	intranodeTimeout = 4,         /* a peer did not arrive in time */
	intranodeOutOfMemory = 5,
	intranodeNotFound = 6,
	intranodeClosed = 7,          /* the communicator was destroyed or aborted */
	intranodePeerFailed = 8,      /* a peer failed or went away */
	intranodeInternal = 9,
	intranodeMismatch = 10        /* ranks made different calls */
} intranodeResult_t;

/* Element types; the values are intranode's own, not NCCL's. */
typedef enum {
	intranodeFloat32 = 0,
	intranodeFloat16 = 1,
	intranodeBFloat16 = 2,
	intranodeFloat64 = 3,
	intranodeInt32 = 4
} intranodeDataType_t;

/*
 * Reductions. intranodeAvg (since 0.2.0) is the sum divided by nranks:
 * floating types are summed as for intranodeSum, then divided and rounded
 * once more (exactly when nranks is a power of two, short of subnormal
 * results); int32
 * divides toward zero, as C does.
 */
typedef enum {
	intranodeSum = 0,
	intranodeMax = 1,
	intranodeMin = 2,
	intranodeAvg = 3
} intranodeRedOp_t;

/* An opaque communicator: one rank's member of a group. */
typedef struct intranodeComm *intranodeComm_t;

/* The name of one group's rendezvous, copied by value between ranks. */
#define INTRANODE_UNIQUE_ID_BYTES 128
typedef struct {
	char internal[INTRANODE_UNIQUE_ID_BYTES];
} intranodeUniqueId;

/*
 * How a communicator is made. Start from INTRANODE_CONFIG_INITIALIZER and
 * set what you need; size must stay sizeof(intranodeConfig_t).
 */
typedef struct {
	size_t size;          /* sizeof(intranodeConfig_t) */
	const char *backend;  /* NULL or "auto": the best usable backend;
	                         "cuda", "rocm", "fake", "plugin:PATH". Copied. */
	int device;           /* this rank's device index; -1: the rank's index */
	int timeoutMs;        /* bound on setup and on every wait of a call;
	                         0: 60000 */
	size_t bufferBytes;   /* symmetric buffer per rank; 0: the default */
} intranodeConfig_t;

#define INTRANODE_CONFIG_INITIALIZER                                            \
	{ sizeof(intranodeConfig_t), NULL, -1, 0, 0 }

/* The library's own sources define the functions below with cgo's types
   (void * for const void *); they set INTRANODE_BUILDING_LIBRARY. */
#ifndef INTRANODE_BUILDING_LIBRARY

/* Writes INTRANODE_VERSION_CODE of the library into *version. */
intranodeResult_t intranodeGetVersion(int *version);

/* A static English description of a result code. Never NULL. */
const char *intranodeGetErrorString(intranodeResult_t result);

/*
 * The message of the last call on this thread that did not return
 * intranodeSuccess ("" if none). Valid until this thread's next call.
 */
const char *intranodeGetLastError(void);

/*
 * Makes a new unique id. The calling process serves the group's rendezvous
 * (a store on the loopback interface, protected by a secret carried in the
 * id) until the last communicator it made from this id is destroyed, or
 * until it exits if it makes none.
 */
intranodeResult_t intranodeGetUniqueId(intranodeUniqueId *uniqueId);

/*
 * Makes rank's communicator of a group of nranks (2 to 8) and waits for
 * every rank to join (within config->timeoutMs). config may be NULL for
 * the defaults. On success *comm is the new communicator; on failure it is
 * set to NULL and nothing is held. A group the library cannot serve
 * (ranks on different hosts, devices without peer access, a device used
 * twice) is refused on every rank with intranodeNotSupported.
 */
intranodeResult_t intranodeCommInitRank(intranodeComm_t *comm, int nranks,
                                        intranodeUniqueId uniqueId, int rank,
                                        const intranodeConfig_t *config);

/*
 * Makes this rank's communicator over an existing NCCL communicator
 * (ncclComm, an ncclComm_t of the NCCL the process has loaded,
 * libnccl.so.2, or the file INTRANODE_NCCL_LIBRARY names): the same ranks,
 * in the same order, on the device NCCL uses. Every rank of ncclComm must
 * call it at the same point, as it would a collective: the ranks meet
 * through all-gathers on ncclComm, on a stream of the library's own (no
 * store, server or port). Either every rank gets its communicator or every
 * rank fails (a group the library cannot serve: intranodeNotSupported).
 * If one of those all-gathers does not complete within config->timeoutMs
 * (a rank that calls later, or never), the call fails with
 * intranodeTimeout and a last error that says ncclComm's call sequence is
 * lost: the unfinished all-gather may still be matched with its peers'
 * next NCCL call, so ncclComm must then be aborted, not used.
 * ncclComm stays the caller's; it must outlive this call only.
 */
intranodeResult_t intranodeCommInitFromNccl(intranodeComm_t *comm,
                                            void *ncclComm,
                                            const intranodeConfig_t *config);

/* The communicator's rank, number of ranks and device index. */
intranodeResult_t intranodeCommUserRank(intranodeComm_t comm, int *rank);
intranodeResult_t intranodeCommCount(intranodeComm_t comm, int *nranks);
intranodeResult_t intranodeCommDevice(intranodeComm_t comm, int *device);

/*
 * The first asynchronous failure of the communicator (a collective whose
 * peer did not arrive, ranks that made different calls) in *asyncError,
 * intranodeSuccess while there is none. Does not wait. The message is
 * intranodeGetLastError()'s after a call that reported a failure.
 */
intranodeResult_t intranodeCommGetAsyncError(intranodeComm_t comm,
                                             intranodeResult_t *asyncError);

/*
 * Release everything the communicator holds, without waiting for peers;
 * comm is invalid after they return. As NCCL's: intranodeCommDestroy lets
 * the communicator's collectives still running on the device finish first
 * (one waiting for a peer that never comes runs until the timeout);
 * intranodeCommAbort first stops those still waiting for a peer (the
 * buffers they were to write then hold undefined data), so it returns
 * without waiting out the timeout and the caller's streams drain.
 */
intranodeResult_t intranodeCommDestroy(intranodeComm_t comm);
intranodeResult_t intranodeCommAbort(intranodeComm_t comm);

/*
 * The collectives, as NCCL defines them. count is in elements:
 * all-reduce and broadcast the whole buffer; reduce-scatter the output of
 * each rank (the input holds nranks*count); all-gather the input of each
 * rank (the output holds nranks*count); all-to-all the block sent to each
 * peer (input and output hold nranks*count). A call is in place when
 * sendbuff == recvbuff, or, for reduce-scatter and all-gather, when the
 * smaller buffer is the rank's block of the larger one. A count of 0 does
 * nothing. Broadcast's sendbuff is read on root only (may be NULL
 * elsewhere).
 */
intranodeResult_t intranodeAllReduce(const void *sendbuff, void *recvbuff,
                                     size_t count, intranodeDataType_t datatype,
                                     intranodeRedOp_t op, intranodeComm_t comm,
                                     void *stream);
intranodeResult_t intranodeReduceScatter(const void *sendbuff, void *recvbuff,
                                         size_t recvcount,
                                         intranodeDataType_t datatype,
                                         intranodeRedOp_t op,
                                         intranodeComm_t comm, void *stream);
intranodeResult_t intranodeAllGather(const void *sendbuff, void *recvbuff,
                                     size_t sendcount,
                                     intranodeDataType_t datatype,
                                     intranodeComm_t comm, void *stream);
intranodeResult_t intranodeBroadcast(const void *sendbuff, void *recvbuff,
                                     size_t count, intranodeDataType_t datatype,
                                     int root, intranodeComm_t comm,
                                     void *stream);
intranodeResult_t intranodeAllToAll(const void *sendbuff, void *recvbuff,
                                    size_t count, intranodeDataType_t datatype,
                                    intranodeComm_t comm, void *stream);

/*
 * Streams and memory of the communicator's device, for programs that have
 * no runtime of their own (and the fake backend, whose device memory is
 * host memory the caller may read and write directly). The stream made is
 * the runtime's stream where the backend has one. Both belong to the
 * communicator: destroying it releases them.
 */
intranodeResult_t intranodeStreamCreate(intranodeComm_t comm, void **stream);
intranodeResult_t intranodeStreamDestroy(intranodeComm_t comm, void *stream);
/* Waits for the stream's work (at most the comm's timeout and a second);
   reports the communicator's asynchronous failure if there is one. */
intranodeResult_t intranodeStreamSynchronize(intranodeComm_t comm,
                                             void *stream);
intranodeResult_t intranodeMemAlloc(intranodeComm_t comm, void **ptr,
                                    size_t size);
intranodeResult_t intranodeMemFree(intranodeComm_t comm, void *ptr);

#endif /* INTRANODE_BUILDING_LIBRARY */

#ifdef __cplusplus
}
#endif

#endif /* INTRANODE_H */
