//go:build rocm

// hip_shim.h declares the C side of the ROCm backend's HIP binding: the
// loader that dlopens libamdhip64.so and one shim per operation. The few HIP
// types the shims need are declared in hip_shim.c, so building needs no
// ROCm headers. Every shim that works on a device takes its ordinal first
// and makes it current (hipSetDevice) inside the same C call, so Go never
// relies on a goroutine staying on one OS thread.
//
// Handles cross into Go as uintptr_t and device addresses as uint64_t: Go
// only stores them and passes them back.

#ifndef INTRANODE_HIP_SHIM_H
#define INTRANODE_HIP_SHIM_H

#include "../internal/gpu/shim.h"

// inh_result is a hipError_t, an int-sized enum.
typedef int inh_result;

enum {
	INH_SUCCESS = 0,
	INH_ERROR_NOT_READY = 600,
	INH_ERROR_NOT_SUPPORTED = 801,
	INH_IPC_HANDLE_SIZE = 64,
	INH_MAX_ACCESS = 64,
};

// HIP constants the shims pass, as hip_runtime_api.h defines them (ROCm 5
// and 6 agree on all but hipMemAllocationTypeUncached, which is ROCm 7.2's,
// and hipIpcMemLazyEnablePeerAccess, 0 in ROCm 5 and 1 in ROCm 6). The
// tests check them against the headers where those are installed.
enum {
	INH_HOST_MALLOC_PORTABLE = 0x1,
	INH_HOST_MALLOC_MAPPED = 0x2,
	INH_STREAM_NON_BLOCKING = 0x1,
	INH_EVENT_DISABLE_TIMING = 0x2,
	INH_CAPTURE_MODE_RELAXED = 2,
	INH_DEVICE_MALLOC_FINEGRAINED = 0x1,
	INH_DEVICE_MALLOC_UNCACHED = 0x3,
	INH_IPC_LAZY_ENABLE_PEER_ACCESS = 0x1,
	INH_MEM_ALLOCATION_TYPE_PINNED = 0x1,
	INH_MEM_ALLOCATION_TYPE_UNCACHED = 0x40000000,
	INH_MEM_HANDLE_POSIX_FD = 0x1,
	INH_MEM_LOCATION_DEVICE = 1,
	INH_MEM_ACCESS_READWRITE = 3,
	INH_MEM_GRANULARITY_MINIMUM = 0,
	INH_LAUNCH_PARAM_BUFFER_POINTER = 0x1,
	INH_LAUNCH_PARAM_BUFFER_SIZE = 0x2,
	INH_LAUNCH_PARAM_END = 0x3,
};

// hipMemLocation, hipMemAllocationProp and hipMemAccessDesc as ROCm 6
// declares them (ROCm 5's allocation properties were laid out otherwise;
// Go uses these only on ROCm 6 runtimes).
typedef struct {
	int type;
	int id;
} inh_mem_location;

typedef struct {
	int type;
	int requestedHandleType;
	inh_mem_location location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
	} allocFlags;
} inh_mem_prop;

typedef struct {
	inh_mem_location location;
	int flags;
} inh_mem_access;

// Memory types (see memoryType in hip.go).
enum {
	INH_MEM_UNCACHED = 1,
	INH_MEM_FINE_GRAINED = 2,
	INH_MEM_COARSE = 3,
};

// The shims shared with the other GPU backend (shim_impl.h), under this
// backend's names.
typedef inh_result gpu_result_t;
#define GPU_FN(name) inh_##name
#include "../internal/gpu/shim_decl.h"
// RCCL, opened at run time from librccl.so.1 (rccl.go): the shims shared
// with the CUDA backend's NCCL, under this backend's names.
#include "../internal/gpu/ccl.h"

// The virtual memory management and hipDeviceGetUuid entry points are
// optional: inh_has_vmm and inh_has_uuid say whether inh_load found them.
int inh_has_vmm(void);
int inh_has_uuid(void);

inh_result inh_runtime_version(int *version);
inh_result inh_enable_peer(int dev, int peer);

inh_result inh_malloc(int dev, size_t n, unsigned int flags, int shareable, uint64_t *ptr, uintptr_t *at);

inh_result inh_ipc_get(int dev, uint64_t ptr, unsigned char *handle);
inh_result inh_ipc_open(int dev, const unsigned char *handle, unsigned int flags, uint64_t *ptr);
inh_result inh_ipc_close(int dev, uint64_t ptr);

inh_result inh_vmm_granularity(int dev, int mem_type, size_t *granularity);
inh_result inh_vmm_create(int dev, int mem_type, size_t size, const int *access, int naccess,
                          gpu_vmm *out, uintptr_t *at);
inh_result inh_vmm_import_fd(int dev, int fd, size_t size, const int *access, int naccess,
                             gpu_vmm *out, uintptr_t *at);

#endif
