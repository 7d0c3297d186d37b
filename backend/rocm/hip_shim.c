//go:build rocm

// hip_shim.c binds the HIP runtime at run time. libamdhip64.so is opened
// with dlopen and every entry point resolved by name, so the backend builds
// without ROCm headers and a binary starts on machines without ROCm. The
// types below follow hip_runtime_api.h; the constants and the ROCm 6
// virtual memory management structures are declared in hip_shim.h.

#include "hip_shim.h"

#include <stdlib.h>

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
	hipError_t (*Synchronize)(void); // hipDeviceSynchronize
	hipError_t (*Malloc)(void **, size_t);
	hipError_t (*ExtMallocWithFlags)(void **, size_t, unsigned int);
	hipError_t (*Free)(void *);
	hipError_t (*HostAlloc)(void **, size_t, unsigned int);
	hipError_t (*HostGetDevicePointer)(void **, void *, unsigned int);
	hipError_t (*HostFree)(void *);
	hipError_t (*MemcpyHtoD)(void *, void *, size_t);
	hipError_t (*MemcpyDtoH)(void *, void *, size_t);
	hipError_t (*MemcpyDtoD)(void *, void *, size_t);
	hipError_t (*MemcpyDtoDAsync)(void *, void *, size_t, hipStream_t);
	hipError_t (*MemsetD8)(void *, unsigned char, size_t);
	hipError_t (*MemGetAddressRange)(void **, size_t *, void *);
	hipError_t (*IpcGetMemHandle)(hipIpcMemHandle_t *, void *);
	hipError_t (*IpcOpenMemHandle)(void **, hipIpcMemHandle_t, unsigned int);
	hipError_t (*IpcCloseMemHandle)(void *);
	hipError_t (*StreamCreate)(hipStream_t *, unsigned int); // hipStreamCreateWithFlags
	hipError_t (*StreamDestroy)(hipStream_t);
	hipError_t (*StreamQuery)(hipStream_t);
	hipError_t (*StreamSynchronize)(hipStream_t);
	hipError_t (*StreamWaitEvent)(hipStream_t, hipEvent_t, unsigned int);
	hipError_t (*EventCreate)(hipEvent_t *, unsigned int); // hipEventCreateWithFlags
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

// The entry points: the required ones, then the optional ones (the UUID,
// and the virtual memory management that ROCm 6 brought).
static const struct gpu_entry required[] = {
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
	{(void **)&hip.Synchronize, "hipDeviceSynchronize"},
	{(void **)&hip.Malloc, "hipMalloc"},
	{(void **)&hip.ExtMallocWithFlags, "hipExtMallocWithFlags"},
	{(void **)&hip.Free, "hipFree"},
	{(void **)&hip.HostAlloc, "hipHostMalloc"},
	{(void **)&hip.HostGetDevicePointer, "hipHostGetDevicePointer"},
	{(void **)&hip.HostFree, "hipHostFree"},
	{(void **)&hip.MemcpyHtoD, "hipMemcpyHtoD"},
	{(void **)&hip.MemcpyDtoH, "hipMemcpyDtoH"},
	{(void **)&hip.MemcpyDtoD, "hipMemcpyDtoD"},
	{(void **)&hip.MemcpyDtoDAsync, "hipMemcpyDtoDAsync"},
	{(void **)&hip.MemsetD8, "hipMemsetD8"},
	{(void **)&hip.MemGetAddressRange, "hipMemGetAddressRange"},
	{(void **)&hip.IpcGetMemHandle, "hipIpcGetMemHandle"},
	{(void **)&hip.IpcOpenMemHandle, "hipIpcOpenMemHandle"},
	{(void **)&hip.IpcCloseMemHandle, "hipIpcCloseMemHandle"},
	{(void **)&hip.StreamCreate, "hipStreamCreateWithFlags"},
	{(void **)&hip.StreamDestroy, "hipStreamDestroy"},
	{(void **)&hip.StreamQuery, "hipStreamQuery"},
	{(void **)&hip.StreamSynchronize, "hipStreamSynchronize"},
	{(void **)&hip.StreamWaitEvent, "hipStreamWaitEvent"},
	{(void **)&hip.EventCreate, "hipEventCreateWithFlags"},
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

static const struct gpu_entry uuid[] = {
	{(void **)&hip.DeviceGetUuid, "hipDeviceGetUuid"},
};

static const struct gpu_entry vmm[] = {
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

int inh_load(const char *path, char *err, size_t errlen) {
	if (hip_lib != NULL) {
		return 0;
	}
	// The runtime keeps threads (and the HSA runtime's signal handlers)
	// inside the library once hipInit has run: gpu_load never unmaps it.
	int r = gpu_load(&hip_lib, path, required, GPU_LEN(required), &hip, sizeof(hip), err, errlen);
	if (r != 0) return r;
	if (!gpu_resolve(hip_lib, uuid, 1, NULL, 0)) {
		hip.DeviceGetUuid = NULL;
	}
	hip_vmm = gpu_resolve(hip_lib, vmm, GPU_LEN(vmm), NULL, 0);
	return 0;
}

const char *inh_entry_name(uintptr_t slot) {
	const char *n = gpu_entry_name(required, GPU_LEN(required), slot);
	if (n == NULL) n = gpu_entry_name(uuid, GPU_LEN(uuid), slot);
	return n != NULL ? n : gpu_entry_name(vmm, GPU_LEN(vmm), slot);
}

int inh_has_vmm(void) { return hip_vmm; }

int inh_has_uuid(void) { return hip.DeviceGetUuid != NULL; }

const char *inh_error_name(hipError_t r) {
	return hip.GetErrorName != NULL ? hip.GetErrorName(r) : NULL;
}

const char *inh_error_string(hipError_t r) {
	return hip.GetErrorString != NULL ? hip.GetErrorString(r) : NULL;
}

#define PTR(p) ((void *)(uintptr_t)(p))

typedef void *gpu_dptr_t;
typedef hipStream_t gpu_stream_t;
typedef hipEvent_t gpu_event_t;
typedef hipModule_t gpu_module_t;
typedef hipFunction_t gpu_function_t;
typedef hipGraph_t gpu_graph_t;
typedef hipGraphExec_t gpu_graph_exec_t;
typedef hipMemGenericAllocationHandle_t gpu_mem_handle_t;
typedef hipMemAllocationProp gpu_mem_prop_t;
typedef hipMemAccessDesc gpu_mem_access_t;
#define GPU_API hip
#define GPU_BIND_ENTRY SetDevice
#define GPU_BIND_ARG(c) ((int)(c))
#define GPU_INSTANTIATE(e, g) CALL(GraphInstantiate, (e), (g), NULL, NULL, 0)
#define GPU_HOST_ALLOC_FLAGS (INH_HOST_MALLOC_PORTABLE | INH_HOST_MALLOC_MAPPED)
#define GPU_LAUNCH_PARAM_END INH_LAUNCH_PARAM_END
#include "../internal/gpu/shim_impl.h"
#include "../internal/gpu/ccl_impl.h"

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
	BIND(dev);
	return hip.DeviceEnablePeerAccess(peer, 0);
}

hipError_t inh_malloc(int dev, size_t n, unsigned int flags, int shareable, uint64_t *ptr, uintptr_t *at) {
	hipError_t r;
	void *p = NULL;
	BIND_AT(dev);
	r = shareable ? CALL(ExtMallocWithFlags, &p, n, flags) : CALL(Malloc, &p, n);
	if (r != INH_SUCCESS) return r;
	SYNCED(CALL(MemsetD8, p, 0, n));
	if (r != INH_SUCCESS) {
		hip.Free(p);
		return r;
	}
	*ptr = (uint64_t)(uintptr_t)p;
	return INH_SUCCESS;
}

static hipError_t vendor_malloc(uintptr_t c, size_t n, uint64_t *ptr, uintptr_t *at) {
	return inh_malloc((int)c, n, 0, 0, ptr, at);
}

static hipError_t vendor_free(uintptr_t c, uint64_t ptr, uintptr_t *at) {
	BIND_AT(c);
	return CALL(Free, PTR(ptr));
}

hipError_t inh_ipc_get(int dev, uint64_t ptr, unsigned char *handle) {
	hipIpcMemHandle_t h;
	BIND(dev);
	memset(&h, 0, sizeof(h));
	hipError_t r = hip.IpcGetMemHandle(&h, PTR(ptr));
	if (r == INH_SUCCESS) memcpy(handle, h.reserved, sizeof(h.reserved));
	return r;
}

hipError_t inh_ipc_open(int dev, const unsigned char *handle, unsigned int flags, uint64_t *ptr) {
	hipIpcMemHandle_t h;
	void *p = NULL;
	BIND(dev);
	memcpy(h.reserved, handle, sizeof(h.reserved));
	hipError_t r = hip.IpcOpenMemHandle(&p, h, flags);
	if (r == INH_SUCCESS) *ptr = (uint64_t)(uintptr_t)p;
	return r;
}

hipError_t inh_ipc_close(int dev, uint64_t ptr) {
	BIND(dev);
	// Work still queued against the mapping must finish before it goes.
	hipError_t r = hip.Synchronize();
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
	BIND(dev);
	vmm_prop(&prop, dev, mem_type);
	return hip.MemGetAllocationGranularity(granularity, &prop, INH_MEM_GRANULARITY_MINIMUM);
}

hipError_t inh_vmm_create(int dev, int mem_type, size_t size, const int *access, int naccess,
                          gpu_vmm *out, uintptr_t *at) {
	hipMemAllocationProp prop;
	if (!hip_vmm) return INH_ERROR_NOT_SUPPORTED;
	BIND_AT(dev);
	vmm_prop(&prop, dev, mem_type);
	return vmm_create(&prop, size, access, naccess, out, at);
}

hipError_t inh_vmm_import_fd(int dev, int fd, size_t size, const int *access, int naccess,
                             gpu_vmm *out, uintptr_t *at) {
	if (!hip_vmm) return INH_ERROR_NOT_SUPPORTED;
	BIND_AT(dev);
	// The descriptor travels by value in the pointer, as in CUDA.
	return vmm_import((void *)(uintptr_t)fd, INH_MEM_HANDLE_POSIX_FD, size, access, naccess, out, at);
}

// vendor_launch ignores early: HIP has no programmatic stream
// serialization.
static hipError_t vendor_launch(uintptr_t c, uintptr_t fn, unsigned int gx, unsigned int gy, unsigned int gz,
                                unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                uintptr_t stream, void *params, size_t size, int early, uintptr_t *at) {
	void *extra[5];
	size_t sz = size;
	(void)early;
	BIND_AT(c);
	return CALL(ModuleLaunchKernel, (hipFunction_t)fn, gx, gy, gz, bx, by, bz, shared, (hipStream_t)stream, NULL,
	            launch_extra(extra, params, &sz));
}
