// shim_decl.h declares the shims of shim_impl.h under a backend's names. A
// backend's shim header includes it after defining GPU_FN, GPU_CTX_T and
// gpu_result_t (see shim_impl.h).

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
