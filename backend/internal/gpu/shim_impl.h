// shim_impl.h: the shims the CUDA and ROCm backends share, written once
// over a vendor's entry-point table. A backend's shim .c includes it once,
// after declaring:
//
//	GPU_FN(name)      the exported name of a shim (inu_##name, inh_##name)
//	GPU_CTX_T         what names the device in a call (a context, an ordinal)
//	GPU_BIND(c)       makes c current on the calling thread; a result
//	GPU_API           the entry-point table, whose members are named as used
//	                  below (StreamCreate is cuStreamCreate or
//	                  hipStreamCreateWithFlags, Synchronize is cuCtxSynchronize
//	                  or hipDeviceSynchronize, ...)
//	GPU_INSTANTIATE(e, g)  instantiates captured graph g into *e
//	GPU_HOST_ALLOC_FLAGS   portable, device-mapped host memory
//	GPU_LAUNCH_PARAM_END   the end marker of a launch's extra list
//	gpu_result_t, gpu_dptr_t, gpu_stream_t, gpu_event_t, gpu_module_t,
//	gpu_function_t, gpu_graph_t, gpu_graph_exec_t, gpu_mem_handle_t,
//	gpu_mem_prop_t, gpu_mem_access_t
//
// Device addresses cross into Go as uint64_t and handles as uintptr_t. Every
// shim makes its device current itself, so Go never relies on a goroutine
// staying on one OS thread.
//
// Synchronous copies and memsets run on the legacy/null stream and may
// return before the device has finished. The backends' streams are
// non-blocking and do not wait for that stream, so these shims synchronise
// it before returning: the contract says "synchronously".

#define GPU_DPTR(u) ((gpu_dptr_t)(uintptr_t)(u))
#define GPU_U64(p) ((uint64_t)(uintptr_t)(p))

// BIND makes c current or returns the failure.
#define BIND(c)                                                          \
	do {                                                                 \
		gpu_result_t bind_r = GPU_BIND(c);                               \
		if (bind_r != GPU_SUCCESS) return bind_r;                        \
	} while (0)

// BIND_STAGED is BIND for the multi-call shims.
#define BIND_STAGED(c)                                                   \
	do {                                                                 \
		*stage = GPU_STAGE_BIND;                                         \
		BIND(c);                                                         \
	} while (0)

// STEP runs one driver call of a multi-call shim, recording its stage.
#define STEP(s, call)                                                    \
	do {                                                                 \
		*stage = (s);                                                    \
		r = (call);                                                      \
	} while (0)

// SYNCED runs call and then waits for the null stream.
#define SYNCED(s, call)                                                  \
	do {                                                                 \
		STEP(s, call);                                                   \
		if (r == GPU_SUCCESS) STEP(GPU_STAGE_SYNC, GPU_API.StreamSynchronize(NULL)); \
	} while (0)

gpu_result_t GPU_FN(host_alloc)(GPU_CTX_T c, size_t n, void **host, uint64_t *dptr, int *stage) {
	gpu_result_t r;
	gpu_dptr_t d = 0;
	BIND_STAGED(c);
	STEP(GPU_STAGE_ALLOC, GPU_API.HostAlloc(host, n, GPU_HOST_ALLOC_FLAGS));
	if (r != GPU_SUCCESS) return r;
	STEP(GPU_STAGE_DEVPTR, GPU_API.HostGetDevicePointer(&d, *host, 0));
	if (r != GPU_SUCCESS) {
		GPU_API.HostFree(*host);
		*host = NULL;
		return r;
	}
	memset(*host, 0, n);
	*dptr = GPU_U64(d);
	return GPU_SUCCESS;
}

gpu_result_t GPU_FN(host_free)(GPU_CTX_T c, void *host) {
	BIND(c);
	return GPU_API.HostFree(host);
}

gpu_result_t GPU_FN(copy_htod)(GPU_CTX_T c, uint64_t dst, const void *src, size_t n, int *stage) {
	gpu_result_t r;
	BIND_STAGED(c);
	SYNCED(GPU_STAGE_COPY, GPU_API.MemcpyHtoD(GPU_DPTR(dst), (void *)src, n));
	return r;
}

gpu_result_t GPU_FN(copy_dtoh)(GPU_CTX_T c, void *dst, uint64_t src, size_t n, int *stage) {
	gpu_result_t r;
	BIND_STAGED(c);
	SYNCED(GPU_STAGE_COPY, GPU_API.MemcpyDtoH(dst, GPU_DPTR(src), n));
	return r;
}

gpu_result_t GPU_FN(copy_dtod)(GPU_CTX_T c, uint64_t dst, uint64_t src, size_t n, int *stage) {
	gpu_result_t r;
	BIND_STAGED(c);
	SYNCED(GPU_STAGE_COPY, GPU_API.MemcpyDtoD(GPU_DPTR(dst), GPU_DPTR(src), n));
	return r;
}

gpu_result_t GPU_FN(memset)(GPU_CTX_T c, uint64_t dst, unsigned char v, size_t n, int *stage) {
	gpu_result_t r;
	BIND_STAGED(c);
	SYNCED(GPU_STAGE_MEMSET, GPU_API.MemsetD8(GPU_DPTR(dst), v, n));
	return r;
}

// address_range reports the allocation the driver knows that holds p: its
// base and size.
gpu_result_t GPU_FN(address_range)(GPU_CTX_T c, uint64_t p, uint64_t *base, size_t *size) {
	gpu_dptr_t b = 0;
	BIND(c);
	gpu_result_t r = GPU_API.MemGetAddressRange(&b, size, GPU_DPTR(p));
	*base = GPU_U64(b);
	return r;
}

// map_and_grant reserves an address range (aligned to align, 0 for the
// driver's choice) for handle h, maps it and grants read/write access to
// the listed devices. On failure it undoes its own steps (not the handle).
static gpu_result_t map_and_grant(gpu_mem_handle_t h, size_t size, size_t align, const int *access,
                                  int naccess, gpu_vmm *out, int *stage) {
	gpu_result_t r;
	gpu_dptr_t ptr = 0;
	gpu_mem_access_t desc[GPU_MAX_ACCESS];
	if (naccess < 1 || naccess > GPU_MAX_ACCESS) {
		*stage = GPU_STAGE_ACCESS;
		return GPU_ERROR_INVALID_VALUE;
	}
	STEP(GPU_STAGE_RESERVE, GPU_API.MemAddressReserve(&ptr, size, align, 0, 0));
	if (r != GPU_SUCCESS) return r;
	STEP(GPU_STAGE_MAP, GPU_API.MemMap(ptr, size, 0, h, 0));
	if (r != GPU_SUCCESS) {
		GPU_API.MemAddressFree(ptr, size);
		return r;
	}
	for (int i = 0; i < naccess; i++) {
		desc[i].location.type = 1; // the device location, in both APIs
		desc[i].location.id = access[i];
		desc[i].flags = 3; // read/write, in both APIs
	}
	STEP(GPU_STAGE_ACCESS, GPU_API.MemSetAccess(ptr, size, desc, (size_t)naccess));
	if (r != GPU_SUCCESS) {
		GPU_API.MemUnmap(ptr, size);
		GPU_API.MemAddressFree(ptr, size);
		return r;
	}
	out->ptr = GPU_U64(ptr);
	out->size = size;
	out->handle = GPU_U64(h);
	return GPU_SUCCESS;
}

// vmm_create allocates size bytes with prop (rounded up to the minimum
// granularity), maps them for the listed devices and zeroes them. The
// caller has made the device current.
static gpu_result_t vmm_create(const gpu_mem_prop_t *prop, size_t size, const int *access, int naccess,
                               gpu_vmm *out, int *stage) {
	gpu_result_t r;
	size_t gran = 0;
	gpu_mem_handle_t h = 0;
	STEP(GPU_STAGE_GRANULARITY, GPU_API.MemGetAllocationGranularity(&gran, prop, 0));
	if (r != GPU_SUCCESS) return r;
	if (gran > 0) size = (size + gran - 1) / gran * gran;
	STEP(GPU_STAGE_CREATE, GPU_API.MemCreate(&h, size, prop, 0));
	if (r != GPU_SUCCESS) return r;
	r = map_and_grant(h, size, gran, access, naccess, out, stage);
	if (r != GPU_SUCCESS) {
		GPU_API.MemRelease(h);
		return r;
	}
	SYNCED(GPU_STAGE_MEMSET, GPU_API.MemsetD8(GPU_DPTR(out->ptr), 0, size));
	if (r != GPU_SUCCESS) {
		GPU_API.MemUnmap(GPU_DPTR(out->ptr), size);
		GPU_API.MemAddressFree(GPU_DPTR(out->ptr), size);
		GPU_API.MemRelease(h);
		memset(out, 0, sizeof(*out));
	}
	return r;
}

// vmm_import maps memory exported as os_handle (a descriptor carried by
// value, or a pointer to the fabric bytes) of the given handle type. The
// caller has made the device current.
static gpu_result_t vmm_import(void *os_handle, int handle_type, size_t size, const int *access,
                               int naccess, gpu_vmm *out, int *stage) {
	gpu_result_t r;
	gpu_mem_handle_t h = 0;
	STEP(GPU_STAGE_IMPORT, GPU_API.MemImportFromShareableHandle(&h, os_handle, handle_type));
	if (r != GPU_SUCCESS) return r;
	r = map_and_grant(h, size, 0, access, naccess, out, stage);
	if (r != GPU_SUCCESS) GPU_API.MemRelease(h);
	return r;
}

gpu_result_t GPU_FN(vmm_release)(GPU_CTX_T c, const gpu_vmm *m, int *stage) {
	gpu_result_t r, first = GPU_SUCCESS;
	BIND_STAGED(c);
	// Work still queued against the range must finish before it is
	// unmapped. Every step runs; the first failure is reported.
#define KEEP_FIRST(s, call)                                              \
	do {                                                                 \
		r = (call);                                                      \
		if (r != GPU_SUCCESS && first == GPU_SUCCESS) {                  \
			first = r;                                                   \
			*stage = (s);                                                \
		}                                                                \
	} while (0)
	KEEP_FIRST(GPU_STAGE_DEVICE_SYNC, GPU_API.Synchronize());
	KEEP_FIRST(GPU_STAGE_UNMAP, GPU_API.MemUnmap(GPU_DPTR(m->ptr), m->size));
	KEEP_FIRST(GPU_STAGE_ADDRESS_FREE, GPU_API.MemAddressFree(GPU_DPTR(m->ptr), m->size));
	KEEP_FIRST(GPU_STAGE_RELEASE, GPU_API.MemRelease((gpu_mem_handle_t)(uintptr_t)m->handle));
#undef KEEP_FIRST
	return first;
}

gpu_result_t GPU_FN(vmm_export_fd)(GPU_CTX_T c, uint64_t handle, int *fd) {
	BIND(c);
	return GPU_API.MemExportToShareableHandle(fd, (gpu_mem_handle_t)(uintptr_t)handle, 1 /* POSIX fd */, 0);
}

gpu_result_t GPU_FN(stream_create)(GPU_CTX_T c, uintptr_t *stream) {
	gpu_stream_t s = NULL;
	BIND(c);
	gpu_result_t r = GPU_API.StreamCreate(&s, 1 /* non-blocking */);
	*stream = (uintptr_t)s;
	return r;
}

gpu_result_t GPU_FN(stream_destroy)(GPU_CTX_T c, uintptr_t stream) {
	BIND(c);
	return GPU_API.StreamDestroy((gpu_stream_t)stream);
}

gpu_result_t GPU_FN(stream_query)(GPU_CTX_T c, uintptr_t stream) {
	BIND(c);
	return GPU_API.StreamQuery((gpu_stream_t)stream);
}

gpu_result_t GPU_FN(stream_sync)(GPU_CTX_T c, uintptr_t stream) {
	BIND(c);
	return GPU_API.StreamSynchronize((gpu_stream_t)stream);
}

gpu_result_t GPU_FN(stream_wait_event)(GPU_CTX_T c, uintptr_t stream, uintptr_t event) {
	BIND(c);
	return GPU_API.StreamWaitEvent((gpu_stream_t)stream, (gpu_event_t)event, 0);
}

gpu_result_t GPU_FN(copy_dtod_async)(GPU_CTX_T c, uint64_t dst, uint64_t src, size_t n, uintptr_t stream) {
	BIND(c);
	return GPU_API.MemcpyDtoDAsync(GPU_DPTR(dst), GPU_DPTR(src), n, (gpu_stream_t)stream);
}

gpu_result_t GPU_FN(event_create)(GPU_CTX_T c, unsigned int flags, uintptr_t *event) {
	gpu_event_t e = NULL;
	BIND(c);
	gpu_result_t r = GPU_API.EventCreate(&e, flags);
	*event = (uintptr_t)e;
	return r;
}

gpu_result_t GPU_FN(event_record)(GPU_CTX_T c, uintptr_t event, uintptr_t stream) {
	BIND(c);
	return GPU_API.EventRecord((gpu_event_t)event, (gpu_stream_t)stream);
}

gpu_result_t GPU_FN(event_query)(GPU_CTX_T c, uintptr_t event) {
	BIND(c);
	return GPU_API.EventQuery((gpu_event_t)event);
}

gpu_result_t GPU_FN(event_sync)(GPU_CTX_T c, uintptr_t event) {
	BIND(c);
	return GPU_API.EventSynchronize((gpu_event_t)event);
}

gpu_result_t GPU_FN(event_elapsed)(GPU_CTX_T c, uintptr_t start, uintptr_t end, float *ms) {
	BIND(c);
	return GPU_API.EventElapsedTime(ms, (gpu_event_t)start, (gpu_event_t)end);
}

gpu_result_t GPU_FN(event_destroy)(GPU_CTX_T c, uintptr_t event) {
	BIND(c);
	return GPU_API.EventDestroy((gpu_event_t)event);
}

gpu_result_t GPU_FN(module_load)(GPU_CTX_T c, const void *image, uintptr_t *module) {
	gpu_module_t m = NULL;
	BIND(c);
	gpu_result_t r = GPU_API.ModuleLoadData(&m, image);
	*module = (uintptr_t)m;
	return r;
}

gpu_result_t GPU_FN(module_function)(GPU_CTX_T c, uintptr_t module, const char *name, uintptr_t *fn) {
	gpu_function_t f = NULL;
	BIND(c);
	gpu_result_t r = GPU_API.ModuleGetFunction(&f, (gpu_module_t)module, name);
	*fn = (uintptr_t)f;
	return r;
}

gpu_result_t GPU_FN(module_unload)(GPU_CTX_T c, uintptr_t module) {
	BIND(c);
	return GPU_API.ModuleUnload((gpu_module_t)module);
}

// launch_extra points extra (5 slots) at a packed parameter buffer the
// driver copies before the launch returns, so params may live anywhere;
// it returns NULL when there are no parameters.
static void **launch_extra(void **extra, void *params, size_t *size) {
	if (*size == 0) return NULL;
	extra[0] = (void *)0x1; // the buffer pointer follows (both APIs)
	extra[1] = params;
	extra[2] = (void *)0x2; // the buffer size follows
	extra[3] = size;
	extra[4] = (void *)GPU_LAUNCH_PARAM_END;
	return extra;
}

gpu_result_t GPU_FN(begin_capture)(GPU_CTX_T c, uintptr_t stream) {
	BIND(c);
	return GPU_API.StreamBeginCapture((gpu_stream_t)stream, 2 /* relaxed, in both APIs */);
}

gpu_result_t GPU_FN(end_capture)(GPU_CTX_T c, uintptr_t stream, uintptr_t *graph, uintptr_t *exec, int *stage) {
	gpu_result_t r;
	gpu_graph_t g = NULL;
	gpu_graph_exec_t e = NULL;
	BIND_STAGED(c);
	STEP(GPU_STAGE_END_CAPTURE, GPU_API.StreamEndCapture((gpu_stream_t)stream, &g));
	if (r != GPU_SUCCESS) {
		if (g != NULL) GPU_API.GraphDestroy(g);
		return r;
	}
	STEP(GPU_STAGE_INSTANTIATE, GPU_INSTANTIATE(&e, g));
	if (r != GPU_SUCCESS) {
		GPU_API.GraphDestroy(g);
		return r;
	}
	*graph = (uintptr_t)g;
	*exec = (uintptr_t)e;
	return GPU_SUCCESS;
}

gpu_result_t GPU_FN(graph_launch)(GPU_CTX_T c, uintptr_t exec, uintptr_t stream) {
	BIND(c);
	return GPU_API.GraphLaunch((gpu_graph_exec_t)exec, (gpu_stream_t)stream);
}

gpu_result_t GPU_FN(graph_destroy)(GPU_CTX_T c, uintptr_t graph, uintptr_t exec) {
	BIND(c);
	gpu_result_t r = GPU_API.GraphExecDestroy((gpu_graph_exec_t)exec);
	gpu_result_t r2 = GPU_API.GraphDestroy((gpu_graph_t)graph);
	return r != GPU_SUCCESS ? r : r2;
}
