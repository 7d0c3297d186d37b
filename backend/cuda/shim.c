//go:build cuda

// shim.c binds the CUDA driver API at run time. libcuda.so.1 is opened with
// dlopen and every entry point is resolved by its versioned name (the _v2
// symbols where the driver has them), so the backend builds without cuda.h
// and a binary starts on machines without a driver.

#include "shim.h"


typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef int CUdevice;

typedef struct {
	int type;
	int id;
} CUmemLocation;

// cuLaunchKernelEx's configuration (CUDA 11.8+): one attribute, programmatic
// stream serialization (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION).
enum { INU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6 };

typedef struct {
	int id;
	char pad[4];
	union {
		char pad[64];
		int programmaticStreamSerializationAllowed;
	} value;
} CUlaunchAttribute;

typedef struct {
	unsigned int gridDimX, gridDimY, gridDimZ;
	unsigned int blockDimX, blockDimY, blockDimZ;
	unsigned int sharedMemBytes;
	CUstream hStream;
	CUlaunchAttribute *attrs;
	unsigned int numAttrs;
} CUlaunchConfig;

typedef struct {
	int type;
	int requestedHandleTypes;
	CUmemLocation location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} CUmemAllocationProp;

typedef struct {
	CUmemLocation location;
	int flags;
} CUmemAccessDesc;

typedef struct {
	unsigned char data[64];
} CUmemFabricHandle;

enum {
	CU_MEM_ALLOCATION_TYPE_PINNED = 1,
	CU_MEM_LOCATION_TYPE_DEVICE = 1,
	CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3,
	CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
	CU_MEMHOSTALLOC_PORTABLE = 1,
	CU_MEMHOSTALLOC_DEVICEMAP = 2,
	CU_STREAM_NON_BLOCKING = 1,
	CU_STREAM_CAPTURE_MODE_RELAXED = 2,
	MAX_ACCESS = 64,
};

#define CU_LAUNCH_PARAM_END ((void *)0x00)
#define CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

// The table of entry points, filled once by inu_load before any other shim
// runs (the Go side serialises loading behind a mutex).
static struct {
	CUresult (*Init)(unsigned int);
	CUresult (*DriverGetVersion)(int *);
	CUresult (*GetErrorName)(CUresult, const char **);
	CUresult (*GetErrorString)(CUresult, const char **);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*DeviceGetCount)(int *);
	CUresult (*DeviceGetName)(char *, int, CUdevice);
	CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
	CUresult (*DeviceTotalMem)(size_t *, CUdevice);
	CUresult (*DeviceGetUuid)(unsigned char *, CUdevice);
	CUresult (*DeviceGetPCIBusId)(char *, int, CUdevice);
	CUresult (*DeviceCanAccessPeer)(int *, CUdevice, CUdevice);
	CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*DevicePrimaryCtxRelease)(CUdevice);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*Synchronize)(void); // cuCtxSynchronize
	CUresult (*CtxEnablePeerAccess)(CUcontext, unsigned int);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*HostAlloc)(void **, size_t, unsigned int);
	CUresult (*HostGetDevicePointer)(CUdeviceptr *, void *, unsigned int);
	CUresult (*HostFree)(void *);
	CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult (*MemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
	CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
	CUresult (*MemGetAddressRange)(CUdeviceptr *, size_t *, CUdeviceptr);
	CUresult (*MemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *, int);
	CUresult (*MemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
	CUresult (*MemRelease)(CUmemGenericAllocationHandle);
	CUresult (*MemExportToShareableHandle)(void *, CUmemGenericAllocationHandle, int, unsigned long long);
	CUresult (*MemImportFromShareableHandle)(CUmemGenericAllocationHandle *, void *, int);
	CUresult (*MemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*MemAddressFree)(CUdeviceptr, size_t);
	CUresult (*MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*MemUnmap)(CUdeviceptr, size_t);
	CUresult (*MemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
	CUresult (*StreamCreate)(CUstream *, unsigned int);
	CUresult (*StreamDestroy)(CUstream);
	CUresult (*StreamQuery)(CUstream);
	CUresult (*StreamSynchronize)(CUstream);
	CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned int);
	CUresult (*EventCreate)(CUevent *, unsigned int);
	CUresult (*EventRecord)(CUevent, CUstream);
	CUresult (*EventQuery)(CUevent);
	CUresult (*EventSynchronize)(CUevent);
	CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
	CUresult (*EventDestroy)(CUevent);
	CUresult (*ModuleLoadData)(CUmodule *, const void *);
	CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*ModuleUnload)(CUmodule);
	CUresult (*LaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
	                         unsigned int, unsigned int, unsigned int, CUstream, void **, void **);
	// Optional (nil on drivers before CUDA 11.8): launches that may overlap
	// the previous kernel on the stream.
	CUresult (*LaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
	CUresult (*StreamBeginCapture)(CUstream, int);
	CUresult (*StreamEndCapture)(CUstream, CUgraph *);
	CUresult (*GraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
	CUresult (*GraphLaunch)(CUgraphExec, CUstream);
	CUresult (*GraphExecDestroy)(CUgraphExec);
	CUresult (*GraphDestroy)(CUgraph);
} cu;

static void *cu_lib;

// The entry points: the required ones, then the optional ones.
static const struct gpu_entry entries[] = {
	{(void **)&cu.Init, "cuInit"},
	{(void **)&cu.DriverGetVersion, "cuDriverGetVersion"},
	{(void **)&cu.GetErrorName, "cuGetErrorName"},
	{(void **)&cu.GetErrorString, "cuGetErrorString"},
	{(void **)&cu.DeviceGet, "cuDeviceGet"},
	{(void **)&cu.DeviceGetCount, "cuDeviceGetCount"},
	{(void **)&cu.DeviceGetName, "cuDeviceGetName"},
	{(void **)&cu.DeviceGetAttribute, "cuDeviceGetAttribute"},
	{(void **)&cu.DeviceTotalMem, "cuDeviceTotalMem_v2"},
	{(void **)&cu.DeviceGetUuid, "cuDeviceGetUuid_v2"},
	{(void **)&cu.DeviceGetPCIBusId, "cuDeviceGetPCIBusId"},
	{(void **)&cu.DeviceCanAccessPeer, "cuDeviceCanAccessPeer"},
	{(void **)&cu.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
	{(void **)&cu.DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
	{(void **)&cu.CtxSetCurrent, "cuCtxSetCurrent"},
	{(void **)&cu.Synchronize, "cuCtxSynchronize"},
	{(void **)&cu.CtxEnablePeerAccess, "cuCtxEnablePeerAccess"},
	{(void **)&cu.MemAlloc, "cuMemAlloc_v2"},
	{(void **)&cu.MemFree, "cuMemFree_v2"},
	{(void **)&cu.HostAlloc, "cuMemHostAlloc"},
	{(void **)&cu.HostGetDevicePointer, "cuMemHostGetDevicePointer_v2"},
	{(void **)&cu.HostFree, "cuMemFreeHost"},
	{(void **)&cu.MemcpyHtoD, "cuMemcpyHtoD_v2"},
	{(void **)&cu.MemcpyDtoH, "cuMemcpyDtoH_v2"},
	{(void **)&cu.MemcpyDtoD, "cuMemcpyDtoD_v2"},
	{(void **)&cu.MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"},
	{(void **)&cu.MemsetD8, "cuMemsetD8_v2"},
	{(void **)&cu.MemGetAddressRange, "cuMemGetAddressRange_v2"},
	{(void **)&cu.MemGetAllocationGranularity, "cuMemGetAllocationGranularity"},
	{(void **)&cu.MemCreate, "cuMemCreate"},
	{(void **)&cu.MemRelease, "cuMemRelease"},
	{(void **)&cu.MemExportToShareableHandle, "cuMemExportToShareableHandle"},
	{(void **)&cu.MemImportFromShareableHandle, "cuMemImportFromShareableHandle"},
	{(void **)&cu.MemAddressReserve, "cuMemAddressReserve"},
	{(void **)&cu.MemAddressFree, "cuMemAddressFree"},
	{(void **)&cu.MemMap, "cuMemMap"},
	{(void **)&cu.MemUnmap, "cuMemUnmap"},
	{(void **)&cu.MemSetAccess, "cuMemSetAccess"},
	{(void **)&cu.StreamCreate, "cuStreamCreate"},
	{(void **)&cu.StreamDestroy, "cuStreamDestroy_v2"},
	{(void **)&cu.StreamQuery, "cuStreamQuery"},
	{(void **)&cu.StreamSynchronize, "cuStreamSynchronize"},
	{(void **)&cu.StreamWaitEvent, "cuStreamWaitEvent"},
	{(void **)&cu.EventCreate, "cuEventCreate"},
	{(void **)&cu.EventRecord, "cuEventRecord"},
	{(void **)&cu.EventQuery, "cuEventQuery"},
	{(void **)&cu.EventSynchronize, "cuEventSynchronize"},
	{(void **)&cu.EventElapsedTime, "cuEventElapsedTime"},
	{(void **)&cu.EventDestroy, "cuEventDestroy_v2"},
	{(void **)&cu.ModuleLoadData, "cuModuleLoadData"},
	{(void **)&cu.ModuleGetFunction, "cuModuleGetFunction"},
	{(void **)&cu.ModuleUnload, "cuModuleUnload"},
	{(void **)&cu.LaunchKernel, "cuLaunchKernel"},
	{(void **)&cu.StreamBeginCapture, "cuStreamBeginCapture_v2"},
	{(void **)&cu.StreamEndCapture, "cuStreamEndCapture"},
	{(void **)&cu.GraphInstantiateWithFlags, "cuGraphInstantiateWithFlags"},
	{(void **)&cu.GraphLaunch, "cuGraphLaunch"},
	{(void **)&cu.GraphExecDestroy, "cuGraphExecDestroy"},
	{(void **)&cu.GraphDestroy, "cuGraphDestroy"},
};

static const struct gpu_entry optional[] = {
	{(void **)&cu.LaunchKernelEx, "cuLaunchKernelEx"},
};

int inu_load(const char *path, char *err, size_t errlen) {
	if (cu_lib != NULL) {
		return 0;
	}
	int r = gpu_load(&cu_lib, path, entries, GPU_LEN(entries), &cu, sizeof(cu), err, errlen);
	if (r != 0) return r;
	// Optional entry points: their absence only turns a feature off.
	if (!gpu_resolve(cu_lib, optional, GPU_LEN(optional), NULL, 0)) cu.LaunchKernelEx = NULL;
	return 0;
}

const char *inu_entry_name(uintptr_t slot) {
	const char *n = gpu_entry_name(entries, GPU_LEN(entries), slot);
	return n != NULL ? n : gpu_entry_name(optional, GPU_LEN(optional), slot);
}

int inu_has_launch_ex(void) { return cu.LaunchKernelEx != NULL; }

const char *inu_error_name(CUresult r) {
	const char *s = NULL;
	if (cu.GetErrorName == NULL || cu.GetErrorName(r, &s) != INU_SUCCESS) {
		return NULL;
	}
	return s;
}

const char *inu_error_string(CUresult r) {
	const char *s = NULL;
	if (cu.GetErrorString == NULL || cu.GetErrorString(r, &s) != INU_SUCCESS) {
		return NULL;
	}
	return s;
}

typedef CUdeviceptr gpu_dptr_t;
typedef CUstream gpu_stream_t;
typedef CUevent gpu_event_t;
typedef CUmodule gpu_module_t;
typedef CUfunction gpu_function_t;
typedef CUgraph gpu_graph_t;
typedef CUgraphExec gpu_graph_exec_t;
typedef CUmemGenericAllocationHandle gpu_mem_handle_t;
typedef CUmemAllocationProp gpu_mem_prop_t;
typedef CUmemAccessDesc gpu_mem_access_t;
#define GPU_API cu
#define GPU_BIND_ENTRY CtxSetCurrent
#define GPU_BIND_ARG(c) ((CUcontext)(c))
#define GPU_INSTANTIATE(e, g) CALL(GraphInstantiateWithFlags, (e), (g), 0)
#define GPU_HOST_ALLOC_FLAGS (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP)
#define GPU_LAUNCH_PARAM_END 0x0
#include "../internal/gpu/shim_impl.h"

CUresult inu_init(void) { return cu.Init(0); }

CUresult inu_driver_version(int *version) { return cu.DriverGetVersion(version); }

CUresult inu_device_count(int *count) { return cu.DeviceGetCount(count); }

CUresult inu_device_get(int ordinal, int *dev) { return cu.DeviceGet(dev, ordinal); }

CUresult inu_device_name(int dev, char *buf, int len) { return cu.DeviceGetName(buf, len, dev); }

CUresult inu_device_attr(int dev, int attr, int *value) {
	return cu.DeviceGetAttribute(value, attr, dev);
}

CUresult inu_device_total_mem(int dev, size_t *bytes) { return cu.DeviceTotalMem(bytes, dev); }

CUresult inu_device_uuid(int dev, unsigned char *uuid) { return cu.DeviceGetUuid(uuid, dev); }

CUresult inu_device_pci_bus_id(int dev, char *buf, int len) {
	return cu.DeviceGetPCIBusId(buf, len, dev);
}

CUresult inu_can_access_peer(int dev, int peer, int *can) {
	return cu.DeviceCanAccessPeer(can, dev, peer);
}

CUresult inu_ctx_retain(int dev, uintptr_t *ctx) {
	CUcontext c = NULL;
	CUresult r = cu.DevicePrimaryCtxRetain(&c, dev);
	*ctx = (uintptr_t)c;
	return r;
}

CUresult inu_ctx_release(int dev) { return cu.DevicePrimaryCtxRelease(dev); }

CUresult inu_enable_peer(uintptr_t ctx, uintptr_t peer) {
	BIND(ctx);
	CUresult r = cu.CtxEnablePeerAccess((CUcontext)peer, 0);
	return r == INU_ERROR_PEER_ACCESS_ALREADY_ENABLED ? INU_SUCCESS : r;
}

static CUresult vendor_malloc(uintptr_t ctx, size_t n, uint64_t *ptr, uintptr_t *at) {
	CUresult r;
	CUdeviceptr p = 0;
	BIND_AT(ctx);
	r = CALL(MemAlloc, &p, n);
	if (r != INU_SUCCESS) return r;
	SYNCED(CALL(MemsetD8, p, 0, n));
	if (r != INU_SUCCESS) {
		cu.MemFree(p);
		return r;
	}
	*ptr = p;
	return r;
}

static CUresult vendor_free(uintptr_t ctx, uint64_t ptr, uintptr_t *at) {
	BIND_AT(ctx);
	return CALL(MemFree, ptr);
}

static void device_prop(CUmemAllocationProp *prop, int dev, int handle_types) {
	memset(prop, 0, sizeof(*prop));
	prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop->requestedHandleTypes = handle_types;
	prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop->location.id = dev;
}

CUresult inu_vmm_granularity(int dev, int handle_types, size_t *granularity) {
	CUmemAllocationProp prop;
	device_prop(&prop, dev, handle_types);
	return cu.MemGetAllocationGranularity(granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
}

CUresult inu_vmm_create(uintptr_t ctx, int dev, int handle_types, size_t size,
                        const int *access, int naccess, gpu_vmm *out, uintptr_t *at) {
	CUmemAllocationProp prop;
	BIND_AT(ctx);
	device_prop(&prop, dev, handle_types);
	return vmm_create(&prop, size, access, naccess, out, at);
}

CUresult inu_vmm_import(uintptr_t ctx, int handle_type, int fd, const void *fabric,
                        size_t size, const int *access, int naccess, gpu_vmm *out, uintptr_t *at) {
	CUmemFabricHandle fh;
	void *os_handle = (void *)(uintptr_t)fd;
	BIND_AT(ctx);
	if (handle_type == INU_HANDLE_FABRIC) {
		memcpy(fh.data, fabric, sizeof(fh.data));
		os_handle = &fh;
	}
	return vmm_import(os_handle, handle_type, size, access, naccess, out, at);
}

CUresult inu_vmm_export_fabric(uintptr_t ctx, uint64_t h, unsigned char *out) {
	CUmemFabricHandle fh;
	BIND(ctx);
	CUresult r = cu.MemExportToShareableHandle(&fh, h, INU_HANDLE_FABRIC, 0);
	if (r == INU_SUCCESS) memcpy(out, fh.data, sizeof(fh.data));
	return r;
}

CUresult inu_fabric_roundtrip(uintptr_t ctx, int dev, uintptr_t *at) {
	CUresult r;
	CUmemAllocationProp prop;
	size_t gran = 0;
	CUmemGenericAllocationHandle h = 0, imported = 0;
	CUmemFabricHandle fh;
	BIND_AT(ctx);
	device_prop(&prop, dev, INU_HANDLE_FABRIC);
	r = CALL(MemGetAllocationGranularity, &gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (r != INU_SUCCESS) return r;
	r = CALL(MemCreate, &h, gran, &prop, 0);
	if (r != INU_SUCCESS) return r;
	r = CALL(MemExportToShareableHandle, &fh, h, INU_HANDLE_FABRIC, 0);
	if (r == INU_SUCCESS) {
		r = CALL(MemImportFromShareableHandle, &imported, &fh, INU_HANDLE_FABRIC);
		if (r == INU_SUCCESS) cu.MemRelease(imported);
	}
	cu.MemRelease(h);
	return r;
}

static CUresult vendor_launch(uintptr_t ctx, uintptr_t fn, unsigned int gx, unsigned int gy, unsigned int gz,
                              unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                              uintptr_t stream, void *params, size_t size, int early, uintptr_t *at) {
	void *extra[5];
	size_t sz = size;
	BIND_AT(ctx);
	void **ex = launch_extra(extra, params, &sz);
	if (early && cu.LaunchKernelEx != NULL) {
		CUlaunchAttribute attr;
		memset(&attr, 0, sizeof(attr));
		attr.id = INU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
		attr.value.programmaticStreamSerializationAllowed = 1;
		CUlaunchConfig cfg = {gx, gy, gz, bx, by, bz, shared, (CUstream)stream, &attr, 1};
		return CALL(LaunchKernelEx, &cfg, (CUfunction)fn, NULL, ex);
	}
	return CALL(LaunchKernel, (CUfunction)fn, gx, gy, gz, bx, by, bz, shared, (CUstream)stream, NULL, ex);
}

#include "../internal/gpu/ccl_impl.h"
