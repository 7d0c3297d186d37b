// shim_decl.h declares the shims of shim_impl.h under a backend's names. A
// backend's shim header includes it after defining GPU_FN, GPU_CTX_T and
// gpu_result_t (see shim_impl.h).

// The loader and the entry points each backend writes over its own library
// (shim.c, hip_shim.c), declared once. GPU_FN(load) returns 0 on success, 1
// when the library cannot be opened and 2 when a required entry point is
// missing; err then holds the reason.
int GPU_FN(load)(const char *path, char *err, size_t errlen);
const char *GPU_FN(error_name)(gpu_result_t r);
const char *GPU_FN(error_string)(gpu_result_t r);
gpu_result_t GPU_FN(init)(void);
gpu_result_t GPU_FN(driver_version)(int *version);
gpu_result_t GPU_FN(device_count)(int *count);
gpu_result_t GPU_FN(device_name)(int dev, char *buf, int len);
gpu_result_t GPU_FN(device_pci_bus_id)(int dev, char *buf, int len);
gpu_result_t GPU_FN(device_total_mem)(int dev, size_t *bytes);
gpu_result_t GPU_FN(device_uuid)(int dev, unsigned char *uuid);
gpu_result_t GPU_FN(device_attr)(int dev, int attr, int *value);
gpu_result_t GPU_FN(can_access_peer)(int dev, int peer, int *can);

gpu_result_t GPU_FN(host_alloc)(GPU_CTX_T c, size_t n, void **host, uint64_t *dptr, int *stage);
gpu_result_t GPU_FN(host_free)(GPU_CTX_T c, void *host);
gpu_result_t GPU_FN(copy_htod)(GPU_CTX_T c, uint64_t dst, const void *src, size_t n, int *stage);
gpu_result_t GPU_FN(copy_dtoh)(GPU_CTX_T c, void *dst, uint64_t src, size_t n, int *stage);
gpu_result_t GPU_FN(copy_dtod)(GPU_CTX_T c, uint64_t dst, uint64_t src, size_t n, int *stage);
gpu_result_t GPU_FN(memset)(GPU_CTX_T c, uint64_t dst, unsigned char v, size_t n, int *stage);
gpu_result_t GPU_FN(address_range)(GPU_CTX_T c, uint64_t p, uint64_t *base, size_t *size);

gpu_result_t GPU_FN(vmm_release)(GPU_CTX_T c, const gpu_vmm *m, int *stage);
gpu_result_t GPU_FN(vmm_export_fd)(GPU_CTX_T c, uint64_t handle, int *fd);

gpu_result_t GPU_FN(stream_create)(GPU_CTX_T c, uintptr_t *stream);
gpu_result_t GPU_FN(stream_destroy)(GPU_CTX_T c, uintptr_t stream);
gpu_result_t GPU_FN(stream_query)(GPU_CTX_T c, uintptr_t stream);
gpu_result_t GPU_FN(stream_sync)(GPU_CTX_T c, uintptr_t stream);
gpu_result_t GPU_FN(stream_wait_event)(GPU_CTX_T c, uintptr_t stream, uintptr_t event);
gpu_result_t GPU_FN(copy_dtod_async)(GPU_CTX_T c, uint64_t dst, uint64_t src, size_t n, uintptr_t stream);

gpu_result_t GPU_FN(event_create)(GPU_CTX_T c, unsigned int flags, uintptr_t *event);
gpu_result_t GPU_FN(event_record)(GPU_CTX_T c, uintptr_t event, uintptr_t stream);
gpu_result_t GPU_FN(event_query)(GPU_CTX_T c, uintptr_t event);
gpu_result_t GPU_FN(event_sync)(GPU_CTX_T c, uintptr_t event);
gpu_result_t GPU_FN(event_elapsed)(GPU_CTX_T c, uintptr_t start, uintptr_t end, float *ms);
gpu_result_t GPU_FN(event_destroy)(GPU_CTX_T c, uintptr_t event);

gpu_result_t GPU_FN(module_load)(GPU_CTX_T c, const void *image, uintptr_t *module);
gpu_result_t GPU_FN(module_function)(GPU_CTX_T c, uintptr_t module, const char *name, uintptr_t *fn);
gpu_result_t GPU_FN(module_unload)(GPU_CTX_T c, uintptr_t module);

gpu_result_t GPU_FN(begin_capture)(GPU_CTX_T c, uintptr_t stream);
gpu_result_t GPU_FN(end_capture)(GPU_CTX_T c, uintptr_t stream, uintptr_t *graph, uintptr_t *exec, int *stage);
gpu_result_t GPU_FN(graph_launch)(GPU_CTX_T c, uintptr_t exec, uintptr_t stream);
gpu_result_t GPU_FN(graph_destroy)(GPU_CTX_T c, uintptr_t graph, uintptr_t exec);
