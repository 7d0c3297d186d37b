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

#include <stddef.h>
#include <stdint.h>

// hipError_t is an int-sized enum.
typedef int hipError_t;

enum {
	INH_SUCCESS = 0,
	INH_ERROR_NOT_READY = 600,
	INH_ERROR_NOT_SUPPORTED = 801,
	INH_IPC_HANDLE_SIZE = 64,
	INH_MAX_ACCESS = 64,
};

// Memory types (see memoryType in hip.go).
enum {
	INH_MEM_UNCACHED = 1,
	INH_MEM_FINE_GRAINED = 2,
	INH_MEM_COARSE = 3,
};

// Memory mapped by the virtual memory management API.
typedef struct {
	uint64_t ptr;
	size_t size;
	uint64_t handle;
} inh_vmm;

// Steps of the multi-call shims, reported through their stage argument so
// Go can name the entry point that failed.
enum {
	INH_STAGE_SET_DEVICE = 1,
	INH_STAGE_ALLOC,
	INH_STAGE_MEMSET,
	INH_STAGE_SYNC,
	INH_STAGE_DEVPTR,
	INH_STAGE_COPY,
	INH_STAGE_GRANULARITY,
	INH_STAGE_CREATE,
	INH_STAGE_IMPORT,
	INH_STAGE_RESERVE,
	INH_STAGE_MAP,
	INH_STAGE_ACCESS,
	INH_STAGE_DEVICE_SYNC,
	INH_STAGE_UNMAP,
	INH_STAGE_ADDRESS_FREE,
	INH_STAGE_RELEASE,
	INH_STAGE_END_CAPTURE,
	INH_STAGE_INSTANTIATE,
	INH_STAGE_LOAD,
};

// Loader. inh_load returns 0 on success, 1 when the library cannot be opened
// and 2 when a required entry point is missing; err then holds the reason.
// The virtual memory management and hipDeviceGetUuid entry points are
// optional: inh_has_vmm and inh_has_uuid say whether they were found.
int inh_load(const char *path, char *err, size_t errlen);
int inh_has_vmm(void);
int inh_has_uuid(void);

const char *inh_error_name(hipError_t r);
const char *inh_error_string(hipError_t r);

hipError_t inh_init(void);
hipError_t inh_runtime_version(int *version);
hipError_t inh_driver_version(int *version);
hipError_t inh_device_count(int *count);
hipError_t inh_device_name(int dev, char *buf, int len);
hipError_t inh_device_pci_bus_id(int dev, char *buf, int len);
hipError_t inh_device_total_mem(int dev, size_t *bytes);
hipError_t inh_device_uuid(int dev, unsigned char *uuid);
hipError_t inh_device_attr(int dev, int attr, int *value);
hipError_t inh_can_access_peer(int dev, int peer, int *can);
hipError_t inh_enable_peer(int dev, int peer);

hipError_t inh_malloc(int dev, size_t n, unsigned int flags, int shareable, uint64_t *ptr, int *stage);
hipError_t inh_free(int dev, uint64_t ptr);
hipError_t inh_host_malloc(int dev, size_t n, void **host, uint64_t *dptr, int *stage);
hipError_t inh_host_free(int dev, void *host);
hipError_t inh_copy_htod(int dev, uint64_t dst, const void *src, size_t n, int *stage);
hipError_t inh_copy_dtoh(int dev, void *dst, uint64_t src, size_t n, int *stage);
hipError_t inh_copy_dtod(int dev, uint64_t dst, uint64_t src, size_t n, int *stage);
hipError_t inh_memset(int dev, uint64_t dst, unsigned char v, size_t n, int *stage);

hipError_t inh_ipc_get(int dev, uint64_t ptr, unsigned char *handle);
hipError_t inh_ipc_open(int dev, const unsigned char *handle, unsigned int flags, uint64_t *ptr);
hipError_t inh_ipc_close(int dev, uint64_t ptr);

hipError_t inh_vmm_granularity(int dev, int mem_type, size_t *granularity);
hipError_t inh_vmm_create(int dev, int mem_type, size_t size, const int *access, int naccess,
                          inh_vmm *out, int *stage);
hipError_t inh_vmm_import_fd(int dev, int fd, size_t size, const int *access, int naccess,
                             inh_vmm *out, int *stage);
hipError_t inh_vmm_export_fd(int dev, uint64_t handle, int *fd);
hipError_t inh_vmm_release(int dev, const inh_vmm *m, int *stage);

hipError_t inh_stream_create(int dev, uintptr_t *stream);
hipError_t inh_stream_destroy(int dev, uintptr_t stream);
hipError_t inh_stream_query(int dev, uintptr_t stream);
hipError_t inh_stream_sync(int dev, uintptr_t stream);
hipError_t inh_stream_wait_event(int dev, uintptr_t stream, uintptr_t event);
hipError_t inh_copy_dtod_async(int dev, uint64_t dst, uint64_t src, size_t n, uintptr_t stream);

hipError_t inh_event_create(int dev, unsigned int flags, uintptr_t *event);
hipError_t inh_event_record(int dev, uintptr_t event, uintptr_t stream);
hipError_t inh_event_query(int dev, uintptr_t event);
hipError_t inh_event_sync(int dev, uintptr_t event);
hipError_t inh_event_elapsed(int dev, uintptr_t start, uintptr_t end, float *ms);
hipError_t inh_event_destroy(int dev, uintptr_t event);

hipError_t inh_module_load(int dev, const void *image, uintptr_t *module);
hipError_t inh_module_function(int dev, uintptr_t module, const char *name, uintptr_t *fn);
hipError_t inh_module_unload(int dev, uintptr_t module);
hipError_t inh_launch(int dev, uintptr_t fn, unsigned int gx, unsigned int gy, unsigned int gz,
                      unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                      uintptr_t stream, void *params, size_t size);

hipError_t inh_begin_capture(int dev, uintptr_t stream);
hipError_t inh_end_capture(int dev, uintptr_t stream, uintptr_t *graph, uintptr_t *exec, int *stage);
hipError_t inh_graph_launch(int dev, uintptr_t exec, uintptr_t stream);
hipError_t inh_graph_destroy(int dev, uintptr_t graph, uintptr_t exec);

#endif
