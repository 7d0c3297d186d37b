//go:build rocm

// hip_shim.c binds the HIP runtime at run time. libamdhip64.so is opened
// with dlopen and every entry point resolved by name, so the backend builds
// without ROCm headers and a binary starts on machines without ROCm. The
// types below follow hip_runtime_api.h; the constants and the ROCm 6
// virtual memory management structures are declared in hip_shim.h.

#include "hip_shim.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef inh_result hipError_t;
typedef void *hipStream_t;
typedef void *hipEvent_t;
typedef void *hipModule_t;
typedef void *hipFunction_t;
typedef void *hipGraph_t;
typedef void *hipGraphExec_t;
typedef void *hipGraphNode_t;
typedef void *hipMemGenericAllocationHandle_t;
typedef inh_mem_prop hipMemAllocationProp;
typedef inh_mem_access hipMemAccessDesc;

typedef struct {
	char reserved[INH_IPC_HANDLE_SIZE];
} hipIpcMemHandle_t;

typedef struct {
	char bytes[16];
} hipUUID;

#define HIP_LAUNCH_PARAM_BUFFER_POINTER ((void *)INH_LAUNCH_PARAM_BUFFER_POINTER)
#define HIP_LAUNCH_PARAM_BUFFER_SIZE ((void *)INH_LAUNCH_PARAM_BUFFER_SIZE)
#define HIP_LAUNCH_PARAM_END ((void *)INH_LAUNCH_PARAM_END)

// The table of entry points, filled once by inh_load before any other shim
// runs (the Go side serialises loading behind a mutex).
static struct {
	hipError_t (*Init)(unsigned int);
	hipError_t (*RuntimeGetVersion)(int *);
	hipError_t (*DriverGetVersion)(int *);
	const char *(*GetErrorName)(hipError_t);
	const char *(*GetErrorString)(hipError_t);
	hipError_t (*GetDeviceCount)(int *);
	hipError_t (*SetDevice)(int);
	hipError_t (*DeviceGetName)(char *, int, int);
	hipError_t (*DeviceGetPCIBusId)(char *, int, int);
	hipError_t (*DeviceTotalMem)(size_t *, int);
	hipError_t (*DeviceGetAttribute)(int *, int, int);
	hipError_t (*DeviceCanAccessPeer)(int *, int, int);
	hipError_t (*DeviceEnablePeerAccess)(int, unsigned int);
	hipError_t (*DeviceSynchronize)(void);
	hipError_t (*Malloc)(void **, size_t);
	hipError_t (*ExtMallocWithFlags)(void **, size_t, unsigned int);
	hipError_t (*Free)(void *);
	hipError_t (*HostMalloc)(void **, size_t, unsigned int);
	hipError_t (*HostGetDevicePointer)(void **, void *, unsigned int);
	hipError_t (*HostFree)(void *);
	hipError_t (*MemcpyHtoD)(void *, void *, size_t);
	hipError_t (*MemcpyDtoH)(void *, void *, size_t);
	hipError_t (*MemcpyDtoD)(void *, void *, size_t);
	hipError_t (*MemcpyDtoDAsync)(void *, void *, size_t, hipStream_t);
	hipError_t (*MemsetD8)(void *, unsigned char, size_t);
	hipError_t (*IpcGetMemHandle)(hipIpcMemHandle_t *, void *);
	hipError_t (*IpcOpenMemHandle)(void **, hipIpcMemHandle_t, unsigned int);
	hipError_t (*IpcCloseMemHandle)(void *);
	hipError_t (*StreamCreateWithFlags)(hipStream_t *, unsigned int);
	hipError_t (*StreamDestroy)(hipStream_t);
	hipError_t (*StreamQuery)(hipStream_t);
	hipError_t (*StreamSynchronize)(hipStream_t);
	hipError_t (*StreamWaitEvent)(hipStream_t, hipEvent_t, unsigned int);
	hipError_t (*EventCreateWithFlags)(hipEvent_t *, unsigned int);
	hipError_t (*EventRecord)(hipEvent_t, hipStream_t);
	hipError_t (*EventQuery)(hipEvent_t);
	hipError_t (*EventSynchronize)(hipEvent_t);
	hipError_t (*EventElapsedTime)(float *, hipEvent_t, hipEvent_t);
	hipError_t (*EventDestroy)(hipEvent_t);
	hipError_t (*ModuleLoadData)(hipModule_t *, const void *);
	hipError_t (*ModuleGetFunction)(hipFunction_t *, hipModule_t, const char *);
	hipError_t (*ModuleUnload)(hipModule_t);
	hipError_t (*ModuleLaunchKernel)(hipFunction_t, unsigned int, unsigned int, unsigned int,
	                                 unsigned int, unsigned int, unsigned int, unsigned int,
	                                 hipStream_t, void **, void **);
	hipError_t (*StreamBeginCapture)(hipStream_t, int);
	hipError_t (*StreamEndCapture)(hipStream_t, hipGraph_t *);
	hipError_t (*GraphInstantiate)(hipGraphExec_t *, hipGraph_t, hipGraphNode_t *, char *, size_t);
	hipError_t (*GraphLaunch)(hipGraphExec_t, hipStream_t);
	hipError_t (*GraphExecDestroy)(hipGraphExec_t);
	hipError_t (*GraphDestroy)(hipGraph_t);
	// Optional.
	hipError_t (*DeviceGetUuid)(hipUUID *, int);
	hipError_t (*MemGetAllocationGranularity)(size_t *, const hipMemAllocationProp *, int);
	hipError_t (*MemCreate)(hipMemGenericAllocationHandle_t *, size_t, const hipMemAllocationProp *,
	                        unsigned long long);
	hipError_t (*MemRelease)(hipMemGenericAllocationHandle_t);
	hipError_t (*MemExportToShareableHandle)(void *, hipMemGenericAllocationHandle_t, int,
	                                         unsigned long long);
	hipError_t (*MemImportFromShareableHandle)(hipMemGenericAllocationHandle_t *, void *, int);
	hipError_t (*MemAddressReserve)(void **, size_t, size_t, void *, unsigned long long);
	hipError_t (*MemAddressFree)(void *, size_t);
	hipError_t (*MemMap)(void *, size_t, size_t, hipMemGenericAllocationHandle_t, unsigned long long);
	hipError_t (*MemUnmap)(void *, size_t);
	hipError_t (*MemSetAccess)(void *, size_t, const hipMemAccessDesc *, size_t);
} hip;

static void *hip_lib;
static int hip_vmm;

struct entry {
	void **slot;
	const char *name;
};

static int resolve(void *lib, const struct entry *entries, size_t n, char *err, size_t errlen) {
	for (size_t i = 0; i < n; i++) {
		dlerror();
		void *sym = dlsym(lib, entries[i].name);
		if (sym == NULL) {
			if (err != NULL) {
				const char *e = dlerror();
				snprintf(err, errlen, "entry point %s missing (%s)", entries[i].name,
				         e != NULL ? e : "no symbol");
			}
			return 0;
		}
		*entries[i].slot = sym;
	}
	return 1;
}

int inh_load(const char *path, char *err, size_t errlen) {
	if (hip_lib != NULL) {
		return 0;
	}
	// RTLD_NODELETE: the runtime keeps threads (and the HSA runtime's
	// signal handlers) inside the library once hipInit has run, so it
	// must never be unmapped.
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (lib == NULL) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e != NULL ? e : "dlopen failed");
		return 1;
	}
	const struct entry required[] = {
		{(void **)&hip.Init, "hipInit"},
		{(void **)&hip.RuntimeGetVersion, "hipRuntimeGetVersion"},
		{(void **)&hip.DriverGetVersion, "hipDriverGetVersion"},
		{(void **)&hip.GetErrorName, "hipGetErrorName"},
		{(void **)&hip.GetErrorString, "hipGetErrorString"},
		{(void **)&hip.GetDeviceCount, "hipGetDeviceCount"},
		{(void **)&hip.SetDevice, "hipSetDevice"},
		{(void **)&hip.DeviceGetName, "hipDeviceGetName"},
		{(void **)&hip.DeviceGetPCIBusId, "hipDeviceGetPCIBusId"},
		{(void **)&hip.DeviceTotalMem, "hipDeviceTotalMem"},
		{(void **)&hip.DeviceGetAttribute, "hipDeviceGetAttribute"},
		{(void **)&hip.DeviceCanAccessPeer, "hipDeviceCanAccessPeer"},
		{(void **)&hip.DeviceEnablePeerAccess, "hipDeviceEnablePeerAccess"},
		{(void **)&hip.DeviceSynchronize, "hipDeviceSynchronize"},
		{(void **)&hip.Malloc, "hipMalloc"},
		{(void **)&hip.ExtMallocWithFlags, "hipExtMallocWithFlags"},
		{(void **)&hip.Free, "hipFree"},
		{(void **)&hip.HostMalloc, "hipHostMalloc"},
		{(void **)&hip.HostGetDevicePointer, "hipHostGetDevicePointer"},
		{(void **)&hip.HostFree, "hipHostFree"},
		{(void **)&hip.MemcpyHtoD, "hipMemcpyHtoD"},
		{(void **)&hip.MemcpyDtoH, "hipMemcpyDtoH"},
		{(void **)&hip.MemcpyDtoD, "hipMemcpyDtoD"},
		{(void **)&hip.MemcpyDtoDAsync, "hipMemcpyDtoDAsync"},
		{(void **)&hip.MemsetD8, "hipMemsetD8"},
		{(void **)&hip.IpcGetMemHandle, "hipIpcGetMemHandle"},
		{(void **)&hip.IpcOpenMemHandle, "hipIpcOpenMemHandle"},
		{(void **)&hip.IpcCloseMemHandle, "hipIpcCloseMemHandle"},
		{(void **)&hip.StreamCreateWithFlags, "hipStreamCreateWithFlags"},
		{(void **)&hip.StreamDestroy, "hipStreamDestroy"},
		{(void **)&hip.StreamQuery, "hipStreamQuery"},
		{(void **)&hip.StreamSynchronize, "hipStreamSynchronize"},
		{(void **)&hip.StreamWaitEvent, "hipStreamWaitEvent"},
		{(void **)&hip.EventCreateWithFlags, "hipEventCreateWithFlags"},
		{(void **)&hip.EventRecord, "hipEventRecord"},
		{(void **)&hip.EventQuery, "hipEventQuery"},
		{(void **)&hip.EventSynchronize, "hipEventSynchronize"},
		{(void **)&hip.EventElapsedTime, "hipEventElapsedTime"},
		{(void **)&hip.EventDestroy, "hipEventDestroy"},
		{(void **)&hip.ModuleLoadData, "hipModuleLoadData"},
		{(void **)&hip.ModuleGetFunction, "hipModuleGetFunction"},
		{(void **)&hip.ModuleUnload, "hipModuleUnload"},
		{(void **)&hip.ModuleLaunchKernel, "hipModuleLaunchKernel"},
		{(void **)&hip.StreamBeginCapture, "hipStreamBeginCapture"},
		{(void **)&hip.StreamEndCapture, "hipStreamEndCapture"},
		{(void **)&hip.GraphInstantiate, "hipGraphInstantiate"},
		{(void **)&hip.GraphLaunch, "hipGraphLaunch"},
		{(void **)&hip.GraphExecDestroy, "hipGraphExecDestroy"},
		{(void **)&hip.GraphDestroy, "hipGraphDestroy"},
	};
	if (!resolve(lib, required, sizeof(required) / sizeof(required[0]), err, errlen)) {
		memset(&hip, 0, sizeof(hip));
		dlclose(lib);
		return 2;
	}
	const struct entry uuid[] = {
		{(void **)&hip.DeviceGetUuid, "hipDeviceGetUuid"},
	};
	if (!resolve(lib, uuid, 1, NULL, 0)) {
		hip.DeviceGetUuid = NULL;
	}
	const struct entry vmm[] = {
		{(void **)&hip.MemGetAllocationGranularity, "hipMemGetAllocationGranularity"},
		{(void **)&hip.MemCreate, "hipMemCreate"},
		{(void **)&hip.MemRelease, "hipMemRelease"},
		{(void **)&hip.MemExportToShareableHandle, "hipMemExportToShareableHandle"},
		{(void **)&hip.MemImportFromShareableHandle, "hipMemImportFromShareableHandle"},
		{(void **)&hip.MemAddressReserve, "hipMemAddressReserve"},
		{(void **)&hip.MemAddressFree, "hipMemAddressFree"},
		{(void **)&hip.MemMap, "hipMemMap"},
		{(void **)&hip.MemUnmap, "hipMemUnmap"},
		{(void **)&hip.MemSetAccess, "hipMemSetAccess"},
	};
	hip_vmm = resolve(lib, vmm, sizeof(vmm) / sizeof(vmm[0]), NULL, 0);
	hip_lib = lib;
	return 0;
}

int inh_has_vmm(void) { return hip_vmm; }

int inh_has_uuid(void) { return hip.DeviceGetUuid != NULL; }

const char *inh_error_name(hipError_t r) {
	return hip.GetErrorName != NULL ? hip.GetErrorName(r) : NULL;
}

const char *inh_error_string(hipError_t r) {
	return hip.GetErrorString != NULL ? hip.GetErrorString(r) : NULL;
}

// SET_DEV makes dev current on the calling thread; every shim that works on
// a device starts with it.
#define SET_DEV(dev)                                                     \
	do {                                                                 \
		hipError_t set_dev_r = hip.SetDevice(dev);                       \
		if (set_dev_r != INH_SUCCESS) return set_dev_r;                  \
	} while (0)

// SET_DEV_STAGED is SET_DEV for the multi-call shims.
#define SET_DEV_STAGED(dev)                                              \
	do {                                                                 \
		*stage = INH_STAGE_SET_DEVICE;                                   \
		SET_DEV(dev);                                                    \
	} while (0)

// STEP runs one runtime call of a multi-call shim, recording its stage.
#define STEP(s, call)                                                    \
	do {                                                                 \
		*stage = (s);                                                    \
		r = (call);                                                      \
	} while (0)

#define PTR(p) ((void *)(uintptr_t)(p))

hipError_t inh_init(void) { return hip.Init(0); }

hipError_t inh_runtime_version(int *version) { return hip.RuntimeGetVersion(version); }

hipError_t inh_driver_version(int *version) { return hip.DriverGetVersion(version); }

hipError_t inh_device_count(int *count) { return hip.GetDeviceCount(count); }

hipError_t inh_device_name(int dev, char *buf, int len) { return hip.DeviceGetName(buf, len, dev); }

hipError_t inh_device_pci_bus_id(int dev, char *buf, int len) {
	return hip.DeviceGetPCIBusId(buf, len, dev);
}

hipError_t inh_device_total_mem(int dev, size_t *bytes) { return hip.DeviceTotalMem(bytes, dev); }

hipError_t inh_device_uuid(int dev, unsigned char *uuid) {
	hipUUID u;
	if (hip.DeviceGetUuid == NULL) return INH_ERROR_NOT_SUPPORTED;
	hipError_t r = hip.DeviceGetUuid(&u, dev);
	if (r == INH_SUCCESS) memcpy(uuid, u.bytes, sizeof(u.bytes));
	return r;
}

hipError_t inh_device_attr(int dev, int attr, int *value) {
	return hip.DeviceGetAttribute(value, attr, dev);
}

hipError_t inh_can_access_peer(int dev, int peer, int *can) {
	return hip.DeviceCanAccessPeer(can, dev, peer);
}

hipError_t inh_enable_peer(int dev, int peer) {
	SET_DEV(dev);
	return hip.DeviceEnablePeerAccess(peer, 0);
}

// Synchronous copies and memsets run on the null stream and may return
// before the device has finished (device-to-device copies, memsets). The
// backend's streams are non-blocking and do not wait for the null stream,
// so these shims synchronise it before returning: the contract says
// "synchronously".

hipError_t inh_malloc(int dev, size_t n, unsigned int flags, int shareable, uint64_t *ptr, int *stage) {
	hipError_t r;
	void *p = NULL;
	SET_DEV_STAGED(dev);
	STEP(INH_STAGE_ALLOC, shareable ? hip.ExtMallocWithFlags(&p, n, flags) : hip.Malloc(&p, n));
	if (r != INH_SUCCESS) return r;
	STEP(INH_STAGE_MEMSET, hip.MemsetD8(p, 0, n));
	if (r == INH_SUCCESS) STEP(INH_STAGE_SYNC, hip.StreamSynchronize(NULL));
	if (r != INH_SUCCESS) {
		hip.Free(p);
		return r;
	}
	*ptr = (uint64_t)(uintptr_t)p;
	return INH_SUCCESS;
}

hipError_t inh_free(int dev, uint64_t ptr) {
	SET_DEV(dev);
	return hip.Free(PTR(ptr));
}

hipError_t inh_host_malloc(int dev, size_t n, void **host, uint64_t *dptr, int *stage) {
	hipError_t r;
	void *d = NULL;
	SET_DEV_STAGED(dev);
	STEP(INH_STAGE_ALLOC, hip.HostMalloc(host, n, INH_HOST_MALLOC_PORTABLE | INH_HOST_MALLOC_MAPPED));
	if (r != INH_SUCCESS) return r;
	STEP(INH_STAGE_DEVPTR, hip.HostGetDevicePointer(&d, *host, 0));
	if (r != INH_SUCCESS) {
		hip.HostFree(*host);
		*host = NULL;
		return r;
	}
	memset(*host, 0, n);
	*dptr = (uint64_t)(uintptr_t)d;
	return INH_SUCCESS;
}

hipError_t inh_host_free(int dev, void *host) {
	SET_DEV(dev);
	return hip.HostFree(host);
}

hipError_t inh_copy_htod(int dev, uint64_t dst, const void *src, size_t n, int *stage) {
	hipError_t r;
	SET_DEV_STAGED(dev);
	STEP(INH_STAGE_COPY, hip.MemcpyHtoD(PTR(dst), (void *)src, n));
	if (r != INH_SUCCESS) return r;
	STEP(INH_STAGE_SYNC, hip.StreamSynchronize(NULL));
	return r;
}

hipError_t inh_copy_dtoh(int dev, void *dst, uint64_t src, size_t n, int *stage) {
	hipError_t r;
	SET_DEV_STAGED(dev);
	STEP(INH_STAGE_COPY, hip.MemcpyDtoH(dst, PTR(src), n));
	if (r != INH_SUCCESS) return r;
	STEP(INH_STAGE_SYNC, hip.StreamSynchronize(NULL));
	return r;
}

hipError_t inh_copy_dtod(int dev, uint64_t dst, uint64_t src, size_t n, int *stage) {
	hipError_t r;
	SET_DEV_STAGED(dev);
	STEP(INH_STAGE_COPY, hip.MemcpyDtoD(PTR(dst), PTR(src), n));
	if (r != INH_SUCCESS) return r;
	STEP(INH_STAGE_SYNC, hip.StreamSynchronize(NULL));
	return r;
}

hipError_t inh_memset(int dev, uint64_t dst, unsigned char v, size_t n, int *stage) {
	hipError_t r;
	SET_DEV_STAGED(dev);
	STEP(INH_STAGE_MEMSET, hip.MemsetD8(PTR(dst), v, n));
	if (r != INH_SUCCESS) return r;
	STEP(INH_STAGE_SYNC, hip.StreamSynchronize(NULL));
	return r;
}

hipError_t inh_ipc_get(int dev, uint64_t ptr, unsigned char *handle) {
	hipIpcMemHandle_t h;
	SET_DEV(dev);
	memset(&h, 0, sizeof(h));
	hipError_t r = hip.IpcGetMemHandle(&h, PTR(ptr));
	if (r == INH_SUCCESS) memcpy(handle, h.reserved, sizeof(h.reserved));
	return r;
}

hipError_t inh_ipc_open(int dev, const unsigned char *handle, unsigned int flags, uint64_t *ptr) {
	hipIpcMemHandle_t h;
	void *p = NULL;
	SET_DEV(dev);
	memcpy(h.reserved, handle, sizeof(h.reserved));
	hipError_t r = hip.IpcOpenMemHandle(&p, h, flags);
	if (r == INH_SUCCESS) *ptr = (uint64_t)(uintptr_t)p;
	return r;
}

hipError_t inh_ipc_close(int dev, uint64_t ptr) {
	SET_DEV(dev);
	// Work still queued against the mapping must finish before it goes.
	hipError_t r = hip.DeviceSynchronize();
	hipError_t r2 = hip.IpcCloseMemHandle(PTR(ptr));
	return r != INH_SUCCESS ? r : r2;
}

static void vmm_prop(hipMemAllocationProp *prop, int dev, int mem_type) {
	memset(prop, 0, sizeof(*prop));
	prop->type = mem_type == INH_MEM_UNCACHED ? INH_MEM_ALLOCATION_TYPE_UNCACHED : INH_MEM_ALLOCATION_TYPE_PINNED;
	prop->requestedHandleType = INH_MEM_HANDLE_POSIX_FD;
	prop->location.type = INH_MEM_LOCATION_DEVICE;
	prop->location.id = dev;
}

hipError_t inh_vmm_granularity(int dev, int mem_type, size_t *granularity) {
	hipMemAllocationProp prop;
	if (!hip_vmm) return INH_ERROR_NOT_SUPPORTED;
	SET_DEV(dev);
	vmm_prop(&prop, dev, mem_type);
	return hip.MemGetAllocationGranularity(granularity, &prop, INH_MEM_GRANULARITY_MINIMUM);
}

// map_and_grant reserves an address range for handle h, maps it and grants
// read/write access to the listed devices. On failure it undoes its own
// steps (not the handle).
static hipError_t map_and_grant(hipMemGenericAllocationHandle_t h, size_t size, const int *access,
                                int naccess, inh_vmm *out, int *stage) {
	hipError_t r;
	void *ptr = NULL;
	hipMemAccessDesc desc[INH_MAX_ACCESS];
	if (naccess < 1 || naccess > INH_MAX_ACCESS) {
		*stage = INH_STAGE_ACCESS;
		return 1; // hipErrorInvalidValue
	}
	STEP(INH_STAGE_RESERVE, hip.MemAddressReserve(&ptr, size, 0, NULL, 0));
	if (r != INH_SUCCESS) return r;
	STEP(INH_STAGE_MAP, hip.MemMap(ptr, size, 0, h, 0));
	if (r != INH_SUCCESS) {
		hip.MemAddressFree(ptr, size);
		return r;
	}
	for (int i = 0; i < naccess; i++) {
		desc[i].location.type = INH_MEM_LOCATION_DEVICE;
		desc[i].location.id = access[i];
		desc[i].flags = INH_MEM_ACCESS_READWRITE;
	}
	STEP(INH_STAGE_ACCESS, hip.MemSetAccess(ptr, size, desc, (size_t)naccess));
	if (r != INH_SUCCESS) {
		hip.MemUnmap(ptr, size);
		hip.MemAddressFree(ptr, size);
		return r;
	}
	out->ptr = (uint64_t)(uintptr_t)ptr;
	out->size = size;
	out->handle = (uint64_t)(uintptr_t)h;
	return INH_SUCCESS;
}

hipError_t inh_vmm_create(int dev, int mem_type, size_t size, const int *access, int naccess,
                          inh_vmm *out, int *stage) {
	hipError_t r;
	hipMemAllocationProp prop;
	size_t gran = 0;
	hipMemGenericAllocationHandle_t h = NULL;
	if (!hip_vmm) return INH_ERROR_NOT_SUPPORTED;
	SET_DEV_STAGED(dev);
	vmm_prop(&prop, dev, mem_type);
	STEP(INH_STAGE_GRANULARITY,
	     hip.MemGetAllocationGranularity(&gran, &prop, INH_MEM_GRANULARITY_MINIMUM));
	if (r != INH_SUCCESS) return r;
	if (gran > 0) size = (size + gran - 1) / gran * gran;
	STEP(INH_STAGE_CREATE, hip.MemCreate(&h, size, &prop, 0));
	if (r != INH_SUCCESS) return r;
	r = map_and_grant(h, size, access, naccess, out, stage);
	if (r != INH_SUCCESS) {
		hip.MemRelease(h);
		return r;
	}
	STEP(INH_STAGE_MEMSET, hip.MemsetD8(PTR(out->ptr), 0, size));
	if (r == INH_SUCCESS) STEP(INH_STAGE_SYNC, hip.StreamSynchronize(NULL));
	if (r != INH_SUCCESS) {
		hip.MemUnmap(PTR(out->ptr), size);
		hip.MemAddressFree(PTR(out->ptr), size);
		hip.MemRelease(h);
		memset(out, 0, sizeof(*out));
	}
	return r;
}

hipError_t inh_vmm_import_fd(int dev, int fd, size_t size, const int *access, int naccess,
                             inh_vmm *out, int *stage) {
	hipError_t r;
	hipMemGenericAllocationHandle_t h = NULL;
	if (!hip_vmm) return INH_ERROR_NOT_SUPPORTED;
	SET_DEV_STAGED(dev);
	// The descriptor travels by value in the pointer, as in CUDA.
	STEP(INH_STAGE_IMPORT,
	     hip.MemImportFromShareableHandle(&h, (void *)(uintptr_t)fd, INH_MEM_HANDLE_POSIX_FD));
	if (r != INH_SUCCESS) return r;
	r = map_and_grant(h, size, access, naccess, out, stage);
	if (r != INH_SUCCESS) hip.MemRelease(h);
	return r;
}

hipError_t inh_vmm_export_fd(int dev, uint64_t handle, int *fd) {
	if (!hip_vmm) return INH_ERROR_NOT_SUPPORTED;
	SET_DEV(dev);
	return hip.MemExportToShareableHandle(fd, (hipMemGenericAllocationHandle_t)(uintptr_t)handle,
	                                      INH_MEM_HANDLE_POSIX_FD, 0);
}

hipError_t inh_vmm_release(int dev, const inh_vmm *m, int *stage) {
	hipError_t r, first = INH_SUCCESS;
	if (!hip_vmm) return INH_ERROR_NOT_SUPPORTED;
	SET_DEV_STAGED(dev);
	// Work still queued against the range must finish before it is
	// unmapped. Every step runs; the first failure is reported.
#define KEEP_FIRST(s, call)                                              \
	do {                                                                 \
		r = (call);                                                      \
		if (r != INH_SUCCESS && first == INH_SUCCESS) {                  \
			first = r;                                                   \
			*stage = (s);                                                \
		}                                                                \
	} while (0)
	KEEP_FIRST(INH_STAGE_DEVICE_SYNC, hip.DeviceSynchronize());
	KEEP_FIRST(INH_STAGE_UNMAP, hip.MemUnmap(PTR(m->ptr), m->size));
	KEEP_FIRST(INH_STAGE_ADDRESS_FREE, hip.MemAddressFree(PTR(m->ptr), m->size));
	KEEP_FIRST(INH_STAGE_RELEASE, hip.MemRelease((hipMemGenericAllocationHandle_t)(uintptr_t)m->handle));
#undef KEEP_FIRST
	return first;
}

hipError_t inh_stream_create(int dev, uintptr_t *stream) {
	hipStream_t s = NULL;
	SET_DEV(dev);
	hipError_t r = hip.StreamCreateWithFlags(&s, INH_STREAM_NON_BLOCKING);
	*stream = (uintptr_t)s;
	return r;
}

hipError_t inh_stream_destroy(int dev, uintptr_t stream) {
	SET_DEV(dev);
	return hip.StreamDestroy((hipStream_t)stream);
}

hipError_t inh_stream_query(int dev, uintptr_t stream) {
	SET_DEV(dev);
	return hip.StreamQuery((hipStream_t)stream);
}

hipError_t inh_stream_sync(int dev, uintptr_t stream) {
	SET_DEV(dev);
	return hip.StreamSynchronize((hipStream_t)stream);
}

hipError_t inh_stream_wait_event(int dev, uintptr_t stream, uintptr_t event) {
	SET_DEV(dev);
	return hip.StreamWaitEvent((hipStream_t)stream, (hipEvent_t)event, 0);
}

hipError_t inh_copy_dtod_async(int dev, uint64_t dst, uint64_t src, size_t n, uintptr_t stream) {
	SET_DEV(dev);
	return hip.MemcpyDtoDAsync(PTR(dst), PTR(src), n, (hipStream_t)stream);
}

hipError_t inh_event_create(int dev, unsigned int flags, uintptr_t *event) {
	hipEvent_t e = NULL;
	SET_DEV(dev);
	hipError_t r = hip.EventCreateWithFlags(&e, flags);
	*event = (uintptr_t)e;
	return r;
}

hipError_t inh_event_record(int dev, uintptr_t event, uintptr_t stream) {
	SET_DEV(dev);
	return hip.EventRecord((hipEvent_t)event, (hipStream_t)stream);
}

hipError_t inh_event_query(int dev, uintptr_t event) {
	SET_DEV(dev);
	return hip.EventQuery((hipEvent_t)event);
}

hipError_t inh_event_sync(int dev, uintptr_t event) {
	SET_DEV(dev);
	return hip.EventSynchronize((hipEvent_t)event);
}

hipError_t inh_event_elapsed(int dev, uintptr_t start, uintptr_t end, float *ms) {
	SET_DEV(dev);
	return hip.EventElapsedTime(ms, (hipEvent_t)start, (hipEvent_t)end);
}

hipError_t inh_event_destroy(int dev, uintptr_t event) {
	SET_DEV(dev);
	return hip.EventDestroy((hipEvent_t)event);
}

hipError_t inh_module_load(int dev, const void *image, uintptr_t *module) {
	hipModule_t m = NULL;
	SET_DEV(dev);
	hipError_t r = hip.ModuleLoadData(&m, image);
	*module = (uintptr_t)m;
	return r;
}

hipError_t inh_module_function(int dev, uintptr_t module, const char *name, uintptr_t *fn) {
	hipFunction_t f = NULL;
	SET_DEV(dev);
	hipError_t r = hip.ModuleGetFunction(&f, (hipModule_t)module, name);
	*fn = (uintptr_t)f;
	return r;
}

hipError_t inh_module_unload(int dev, uintptr_t module) {
	SET_DEV(dev);
	return hip.ModuleUnload((hipModule_t)module);
}

hipError_t inh_launch(int dev, uintptr_t fn, unsigned int gx, unsigned int gy, unsigned int gz,
                      unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                      uintptr_t stream, void *params, size_t size) {
	SET_DEV(dev);
	if (size == 0) {
		return hip.ModuleLaunchKernel((hipFunction_t)fn, gx, gy, gz, bx, by, bz, shared,
		                              (hipStream_t)stream, NULL, NULL);
	}
	// The runtime copies the parameter buffer into the dispatch's kernel
	// arguments before hipModuleLaunchKernel returns, so params may live
	// on the caller's stack.
	size_t sz = size;
	void *extra[] = {
		HIP_LAUNCH_PARAM_BUFFER_POINTER, params,
		HIP_LAUNCH_PARAM_BUFFER_SIZE, &sz,
		HIP_LAUNCH_PARAM_END,
	};
	return hip.ModuleLaunchKernel((hipFunction_t)fn, gx, gy, gz, bx, by, bz, shared,
	                              (hipStream_t)stream, NULL, extra);
}

hipError_t inh_begin_capture(int dev, uintptr_t stream) {
	SET_DEV(dev);
	return hip.StreamBeginCapture((hipStream_t)stream, INH_CAPTURE_MODE_RELAXED);
}

hipError_t inh_end_capture(int dev, uintptr_t stream, uintptr_t *graph, uintptr_t *exec, int *stage) {
	hipError_t r;
	hipGraph_t g = NULL;
	hipGraphExec_t e = NULL;
	SET_DEV_STAGED(dev);
	STEP(INH_STAGE_END_CAPTURE, hip.StreamEndCapture((hipStream_t)stream, &g));
	if (r != INH_SUCCESS) {
		if (g != NULL) hip.GraphDestroy(g);
		return r;
	}
	STEP(INH_STAGE_INSTANTIATE, hip.GraphInstantiate(&e, g, NULL, NULL, 0));
	if (r != INH_SUCCESS) {
		hip.GraphDestroy(g);
		return r;
	}
	*graph = (uintptr_t)g;
	*exec = (uintptr_t)e;
	return INH_SUCCESS;
}

hipError_t inh_graph_launch(int dev, uintptr_t exec, uintptr_t stream) {
	SET_DEV(dev);
	return hip.GraphLaunch((hipGraphExec_t)exec, (hipStream_t)stream);
}

hipError_t inh_graph_destroy(int dev, uintptr_t graph, uintptr_t exec) {
	SET_DEV(dev);
	hipError_t r = hip.GraphExecDestroy((hipGraphExec_t)exec);
	hipError_t r2 = hip.GraphDestroy((hipGraph_t)graph);
	return r != INH_SUCCESS ? r : r2;
}
