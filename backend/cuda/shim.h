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
#include "../internal/gpu/shim_decl.h"

CUresult inu_device_get(int ordinal, int *dev);

CUresult inu_ctx_retain(int dev, uintptr_t *ctx);
CUresult inu_ctx_release(int dev);
CUresult inu_enable_peer(uintptr_t ctx, uintptr_t peer);

CUresult inu_vmm_granularity(int dev, int handle_types, size_t *granularity);
CUresult inu_vmm_create(uintptr_t ctx, int dev, int handle_types, size_t size,
                        const int *access, int naccess, gpu_vmm *out, uintptr_t *at);
CUresult inu_vmm_import(uintptr_t ctx, int handle_type, int fd, const void *fabric,
                        size_t size, const int *access, int naccess, gpu_vmm *out, uintptr_t *at);
CUresult inu_vmm_export_fabric(uintptr_t ctx, uint64_t h, unsigned char *out);
CUresult inu_fabric_roundtrip(uintptr_t ctx, int dev, uintptr_t *at);

// inu_has_launch_ex tells whether the driver has cuLaunchKernelEx, which
// early launches (programmatic stream serialization) need.
int inu_has_launch_ex(void);

// NCCL, opened at run time from libnccl.so.2 (nccl.go): the shims shared
// with the ROCm backend's RCCL, under this backend's names.
#include "../internal/gpu/ccl.h"

#endif
