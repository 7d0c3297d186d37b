//go:build cuda

// shim.h declares the C side of the CUDA backend: the few CUDA driver types
// it needs (declared here so that building needs no cuda.h), the loader that
// dlopens libcuda.so.1, and one shim per operation. Every shim that touches a
// context takes it as its first argument and makes it current inside the same
// C call, so Go never relies on a goroutine staying on one OS thread.
//
// Handles cross into Go as uintptr_t: they are driver-owned pointers that Go
// only stores and passes back.

#ifndef INTRANODE_CUDA_SHIM_H
#define INTRANODE_CUDA_SHIM_H

#include "../internal/gpu/shim.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;

enum {
	INU_SUCCESS = 0,
	INU_ERROR_NOT_READY = 600,
	INU_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
};

// Memory handle types (CUmemAllocationHandleType), usable as a bit mask.
enum {
	INU_HANDLE_POSIX_FD = 1,
	INU_HANDLE_FABRIC = 8,
};

// The shims shared with the other GPU backend (shim_impl.h), under this
// backend's names.
typedef CUresult gpu_result_t;
#define GPU_FN(name) inu_##name
#define GPU_CTX_T uintptr_t
#include "../internal/gpu/shim_decl.h"

// Loader. inu_load returns 0 on success, 1 when the library cannot be opened
// and 2 when an entry point is missing; err then holds the reason.
int inu_load(const char *path, char *err, size_t errlen);

const char *inu_error_name(CUresult r);
const char *inu_error_string(CUresult r);

CUresult inu_init(void);
CUresult inu_driver_version(int *version);
CUresult inu_device_count(int *count);
CUresult inu_device_get(int ordinal, int *dev);
CUresult inu_device_name(int dev, char *buf, int len);
CUresult inu_device_attr(int dev, int attr, int *value);
CUresult inu_device_total_mem(int dev, size_t *bytes);
CUresult inu_device_uuid(int dev, unsigned char *uuid);
CUresult inu_device_pci_bus_id(int dev, char *buf, int len);
CUresult inu_can_access_peer(int dev, int peer, int *can);

CUresult inu_ctx_retain(int dev, uintptr_t *ctx);
CUresult inu_ctx_release(int dev);
CUresult inu_enable_peer(uintptr_t ctx, uintptr_t peer);

CUresult inu_mem_alloc(uintptr_t ctx, size_t n, uint64_t *ptr, int *stage);
CUresult inu_mem_free(uintptr_t ctx, uint64_t ptr);

CUresult inu_vmm_granularity(int dev, int handle_types, size_t *granularity);
CUresult inu_vmm_create(uintptr_t ctx, int dev, int handle_types, size_t size,
                        const int *access, int naccess, gpu_vmm *out, int *stage);
CUresult inu_vmm_import(uintptr_t ctx, int handle_type, int fd, const void *fabric,
                        size_t size, const int *access, int naccess, gpu_vmm *out, int *stage);
CUresult inu_vmm_export_fabric(uintptr_t ctx, uint64_t h, unsigned char *out);
CUresult inu_fabric_roundtrip(uintptr_t ctx, int dev, int *stage);

CUresult inu_launch(uintptr_t ctx, uintptr_t fn, unsigned int gx, unsigned int gy, unsigned int gz,
                    unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                    uintptr_t stream, void *params, size_t size, int early);
// inu_has_launch_ex tells whether the driver has cuLaunchKernelEx, which
// early launches (programmatic stream serialization) need.
int inu_has_launch_ex(void);

// NCCL, opened at run time from libnccl.so.2 (see nccl.go). The few types
// the shims need are declared in shim.c, so building needs no nccl.h. The
// shims return an ncclResult_t; one that makes a context current first and
// fails there returns INU_NCCL_CUDA_FAILED or'ed with the CUresult, and
// inu_nccl_collective returns INU_NCCL_ASYNC or'ed with the communicator's
// asynchronous error when the call itself succeeded but the communicator
// has failed.
enum {
	INU_NCCL_SUCCESS = 0,
	INU_NCCL_IN_PROGRESS = 7,
	INU_NCCL_UNIQUE_ID_BYTES = 128,
	INU_NCCL_CUDA_FAILED = 0x10000,
	INU_NCCL_ASYNC = 0x20000,
};

// The collectives inu_nccl_collective enqueues (collective.Op's order).
enum {
	INU_NCCL_ALL_REDUCE = 0,
	INU_NCCL_REDUCE_SCATTER = 1,
	INU_NCCL_ALL_GATHER = 2,
	INU_NCCL_BROADCAST = 3,
	INU_NCCL_ALL_TO_ALL = 4,
};

// inu_nccl_load returns 0 on success, 1 when the library cannot be opened
// and 2 when an entry point is missing; err then holds the reason.
int inu_nccl_load(const char *path, char *err, size_t errlen);

const char *inu_nccl_error_string(int r);
const char *inu_nccl_last_error(void);
int inu_nccl_version(int *version);
int inu_nccl_unique_id(unsigned char *id);
int inu_nccl_init(uintptr_t ctx, int nranks, const unsigned char *id, int rank, uintptr_t *comm);
// inu_nccl_collective enqueues one collective of kind INU_NCCL_*: count is
// per rank as NCCL takes it (recvcount, sendcount, the block per peer of
// the all-to-all, grouped sends and receives of elem_size-byte elements);
// op serves all-reduce and reduce-scatter, root the broadcast.
int inu_nccl_collective(uintptr_t ctx, uintptr_t comm, int kind, uint64_t in, uint64_t out, size_t count,
                        size_t elem_size, int dtype, int op, int root, int nranks, uintptr_t stream);
int inu_nccl_abort(uintptr_t ctx, uintptr_t comm);

#endif
