// shim_impl.h: the shims the CUDA and ROCm backends share, written once
// over a vendor's entry-point table, and the table of runtime shims that the
// GPU core's cgo binding calls (struct gpu_runtime, shim.h). A backend's
// shim .c includes it once, after declaring:
//
//	GPU_FN(name)      the exported name of a shim (inu_##name, inh_##name)
//	GPU_API           the entry-point table, whose members are named as used
//	                  below (StreamCreate is cuStreamCreate or
//	                  hipStreamCreateWithFlags, Synchronize is cuCtxSynchronize
//	                  or hipDeviceSynchronize, ...)
//	GPU_BIND_ENTRY    the member that makes a device current on the calling
//	                  thread (CtxSetCurrent, SetDevice), and
//	GPU_BIND_ARG(c)   its argument for the uintptr_t c
//	GPU_INSTANTIATE(e, g)  instantiates captured graph g into *e (with CALL)
//	GPU_HOST_ALLOC_FLAGS   portable, device-mapped host memory
//	GPU_LAUNCH_PARAM_END   the end marker of a launch's extra list
//	gpu_result_t, gpu_dptr_t, gpu_stream_t, gpu_event_t, gpu_module_t,
//	gpu_function_t, gpu_graph_t, gpu_graph_exec_t, gpu_mem_handle_t,
//	gpu_mem_prop_t, gpu_mem_access_t
//
// and, after it, the table's own entries: vendor_malloc, vendor_free,
// vendor_launch and GPU_FN(entry_name).
//
// Device addresses cross into Go as uint64_t and handles as uintptr_t. Every
// shim makes its device current itself, so Go never relies on a goroutine
// staying on one OS thread, and stores in *at the slot of each entry point
// before calling it, so that the slot of a failed shim names the call that
// failed.
//
// The go command does not see changes to this file (nor to shim.h and
// ccl_impl.h) when it decides what to rebuild in the backends' packages:
// after editing it, build with -a.
//
// Synchronous copies and memsets run on the legacy/null stream and may
// return before the device has finished. The backends' streams are
// non-blocking and do not wait for that stream, so these shims synchronise
// it before returning: the contract says "synchronously".

#define GPU_DPTR(u) ((gpu_dptr_t)(uintptr_t)(u))
#define GPU_U64(p) ((uint64_t)(uintptr_t)(p))

// CALL calls entry point name with the arguments, its slot stored in *at.
#define CALL(name, ...) (*at = (uintptr_t)&GPU_API.name, GPU_API.name(__VA_ARGS__))

// BIND makes c current or returns the failure; BIND_AT also names the
// binding call in *at.
#define BIND(c)                                                          \
	do {                                                                 \
		gpu_result_t bind_r = GPU_API.GPU_BIND_ENTRY(GPU_BIND_ARG(c));   \
		if (bind_r != GPU_SUCCESS) return bind_r;                        \
	} while (0)
#define BIND_AT(c)                                                       \
	do {                                                                 \
		*at = (uintptr_t)&GPU_API.GPU_BIND_ENTRY;                        \
		BIND(c);                                                         \
	} while (0)

// SYNCED runs call and then waits for the null stream.
#define SYNCED(call)                                                     \
	do {                                                                 \
		r = (call);                                                      \
		if (r == GPU_SUCCESS) r = CALL(StreamSynchronize, NULL);         \
	} while (0)

// The table's entries the vendor writes (after including this file).
static gpu_result_t vendor_malloc(uintptr_t c, size_t n, uint64_t *ptr, uintptr_t *at);
static gpu_result_t vendor_free(uintptr_t c, uint64_t ptr, uintptr_t *at);
static gpu_result_t vendor_launch(uintptr_t c, uintptr_t fn, unsigned int gx, unsigned int gy, unsigned int gz,
                                  unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                  uintptr_t stream, void *params, size_t size, int early, uintptr_t *at);

static gpu_result_t rt_host_alloc(uintptr_t c, size_t n, void **host, uint64_t *dptr, uintptr_t *at) {
	gpu_result_t r;
	gpu_dptr_t d = 0;
	BIND_AT(c);
	r = CALL(HostAlloc, host, n, GPU_HOST_ALLOC_FLAGS);
	if (r != GPU_SUCCESS) return r;
	r = CALL(HostGetDevicePointer, &d, *host, 0);
	if (r != GPU_SUCCESS) {
		GPU_API.HostFree(*host);
		*host = NULL;
		return r;
	}
	memset(*host, 0, n);
	*dptr = GPU_U64(d);
	return GPU_SUCCESS;
}

static gpu_result_t rt_host_free(uintptr_t c, void *host, uintptr_t *at) {
	BIND_AT(c);
	return CALL(HostFree, host);
}

static gpu_result_t rt_copy_htod(uintptr_t c, uint64_t dst, const void *src, size_t n, uintptr_t *at) {
	gpu_result_t r;
	BIND_AT(c);
	SYNCED(CALL(MemcpyHtoD, GPU_DPTR(dst), (void *)src, n));
	return r;
}

static gpu_result_t rt_copy_dtoh(uintptr_t c, void *dst, uint64_t src, size_t n, uintptr_t *at) {
	gpu_result_t r;
	BIND_AT(c);
	SYNCED(CALL(MemcpyDtoH, dst, GPU_DPTR(src), n));
	return r;
}

static gpu_result_t rt_copy_dtod(uintptr_t c, uint64_t dst, uint64_t src, size_t n, uintptr_t *at) {
	gpu_result_t r;
	BIND_AT(c);
	SYNCED(CALL(MemcpyDtoD, GPU_DPTR(dst), GPU_DPTR(src), n));
	return r;
}

static gpu_result_t rt_memset(uintptr_t c, uint64_t dst, unsigned char v, size_t n, uintptr_t *at) {
	gpu_result_t r;
	BIND_AT(c);
	SYNCED(CALL(MemsetD8, GPU_DPTR(dst), v, n));
	return r;
}

// address_range reports the allocation the driver knows that holds p: its
// base and size.
static gpu_result_t rt_address_range(uintptr_t c, uint64_t p, uint64_t *base, size_t *size, uintptr_t *at) {
	gpu_dptr_t b = 0;
	BIND_AT(c);
	gpu_result_t r = CALL(MemGetAddressRange, &b, size, GPU_DPTR(p));
	*base = GPU_U64(b);
	return r;
}

// map_and_grant reserves an address range (aligned to align, 0 for the
// driver's choice) for handle h, maps it and grants read/write access to
// the listed devices. On failure it undoes its own steps (not the handle).
static gpu_result_t map_and_grant(gpu_mem_handle_t h, size_t size, size_t align, const int *access,
                                  int naccess, gpu_vmm *out, uintptr_t *at) {
	gpu_result_t r;
	gpu_dptr_t ptr = 0;
	gpu_mem_access_t desc[GPU_MAX_ACCESS];
	if (naccess < 1 || naccess > GPU_MAX_ACCESS) {
		*at = (uintptr_t)&GPU_API.MemSetAccess;
		return GPU_ERROR_INVALID_VALUE;
	}
	r = CALL(MemAddressReserve, &ptr, size, align, 0, 0);
	if (r != GPU_SUCCESS) return r;
	r = CALL(MemMap, ptr, size, 0, h, 0);
	if (r != GPU_SUCCESS) {
		GPU_API.MemAddressFree(ptr, size);
		return r;
	}
	for (int i = 0; i < naccess; i++) {
		desc[i].location.type = 1; // the device location, in both APIs
		desc[i].location.id = access[i];
		desc[i].flags = 3; // read/write, in both APIs
	}
	r = CALL(MemSetAccess, ptr, size, desc, (size_t)naccess);
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
                               gpu_vmm *out, uintptr_t *at) {
	gpu_result_t r;
	size_t gran = 0;
	gpu_mem_handle_t h = 0;
	r = CALL(MemGetAllocationGranularity, &gran, prop, 0);
	if (r != GPU_SUCCESS) return r;
	if (gran > 0) size = (size + gran - 1) / gran * gran;
	r = CALL(MemCreate, &h, size, prop, 0);
	if (r != GPU_SUCCESS) return r;
	r = map_and_grant(h, size, gran, access, naccess, out, at);
	if (r != GPU_SUCCESS) {
		GPU_API.MemRelease(h);
		return r;
	}
	SYNCED(CALL(MemsetD8, GPU_DPTR(out->ptr), 0, size));
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
                               int naccess, gpu_vmm *out, uintptr_t *at) {
	gpu_result_t r;
	gpu_mem_handle_t h = 0;
	r = CALL(MemImportFromShareableHandle, &h, os_handle, handle_type);
	if (r != GPU_SUCCESS) return r;
	r = map_and_grant(h, size, 0, access, naccess, out, at);
	if (r != GPU_SUCCESS) GPU_API.MemRelease(h);
	return r;
}

gpu_result_t GPU_FN(vmm_release)(uintptr_t c, const gpu_vmm *m, uintptr_t *at) {
	gpu_result_t r, first = GPU_SUCCESS;
	BIND_AT(c);
	// Work still queued against the range must finish before it is
	// unmapped. Every step runs; the first failure is reported.
#define KEEP_FIRST(name, ...)                                            \
	do {                                                                 \
		r = GPU_API.name(__VA_ARGS__);                                   \
		if (r != GPU_SUCCESS && first == GPU_SUCCESS) {                  \
			first = r;                                                   \
			*at = (uintptr_t)&GPU_API.name;                              \
		}                                                                \
	} while (0)
	KEEP_FIRST(Synchronize);
	KEEP_FIRST(MemUnmap, GPU_DPTR(m->ptr), m->size);
	KEEP_FIRST(MemAddressFree, GPU_DPTR(m->ptr), m->size);
	KEEP_FIRST(MemRelease, (gpu_mem_handle_t)(uintptr_t)m->handle);
#undef KEEP_FIRST
	return first;
}

gpu_result_t GPU_FN(vmm_export_fd)(uintptr_t c, uint64_t handle, int *fd, uintptr_t *at) {
	BIND_AT(c);
	return CALL(MemExportToShareableHandle, fd, (gpu_mem_handle_t)(uintptr_t)handle, 1 /* POSIX fd */, 0);
}

static gpu_result_t rt_stream_create(uintptr_t c, uintptr_t *stream, uintptr_t *at) {
	gpu_stream_t s = NULL;
	BIND_AT(c);
	gpu_result_t r = CALL(StreamCreate, &s, 1 /* non-blocking */);
	*stream = (uintptr_t)s;
	return r;
}

// ONE_HANDLE defines rt_name, a shim that makes c current and calls entry
// on one handle of type T.
#define ONE_HANDLE(name, entry, T)                                            \
	static gpu_result_t rt_##name(uintptr_t c, uintptr_t h, uintptr_t *at) { \
		BIND_AT(c);                                                          \
		return CALL(entry, (T)h);                                            \
	}

ONE_HANDLE(stream_destroy, StreamDestroy, gpu_stream_t)
ONE_HANDLE(stream_query, StreamQuery, gpu_stream_t)
ONE_HANDLE(stream_sync, StreamSynchronize, gpu_stream_t)
ONE_HANDLE(event_query, EventQuery, gpu_event_t)
ONE_HANDLE(event_sync, EventSynchronize, gpu_event_t)
ONE_HANDLE(event_destroy, EventDestroy, gpu_event_t)
ONE_HANDLE(module_unload, ModuleUnload, gpu_module_t)

static gpu_result_t rt_stream_wait_event(uintptr_t c, uintptr_t stream, uintptr_t event, uintptr_t *at) {
	BIND_AT(c);
	return CALL(StreamWaitEvent, (gpu_stream_t)stream, (gpu_event_t)event, 0);
}

static gpu_result_t rt_copy_dtod_async(uintptr_t c, uint64_t dst, uint64_t src, size_t n, uintptr_t stream, uintptr_t *at) {
	BIND_AT(c);
	return CALL(MemcpyDtoDAsync, GPU_DPTR(dst), GPU_DPTR(src), n, (gpu_stream_t)stream);
}

static gpu_result_t rt_event_create(uintptr_t c, unsigned int flags, uintptr_t *event, uintptr_t *at) {
	gpu_event_t e = NULL;
	BIND_AT(c);
	gpu_result_t r = CALL(EventCreate, &e, flags);
	*event = (uintptr_t)e;
	return r;
}

static gpu_result_t rt_event_record(uintptr_t c, uintptr_t event, uintptr_t stream, uintptr_t *at) {
	BIND_AT(c);
	return CALL(EventRecord, (gpu_event_t)event, (gpu_stream_t)stream);
}

static gpu_result_t rt_event_elapsed(uintptr_t c, uintptr_t start, uintptr_t end, float *ms, uintptr_t *at) {
	BIND_AT(c);
	return CALL(EventElapsedTime, ms, (gpu_event_t)start, (gpu_event_t)end);
}

static gpu_result_t rt_module_load(uintptr_t c, const void *image, uintptr_t *module, uintptr_t *at) {
	gpu_module_t m = NULL;
	BIND_AT(c);
	gpu_result_t r = CALL(ModuleLoadData, &m, image);
	*module = (uintptr_t)m;
	return r;
}

static gpu_result_t rt_module_function(uintptr_t c, uintptr_t module, const char *name, uintptr_t *fn, uintptr_t *at) {
	gpu_function_t f = NULL;
	BIND_AT(c);
	gpu_result_t r = CALL(ModuleGetFunction, &f, (gpu_module_t)module, name);
	*fn = (uintptr_t)f;
	return r;
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

static gpu_result_t rt_begin_capture(uintptr_t c, uintptr_t stream, uintptr_t *at) {
	BIND_AT(c);
	return CALL(StreamBeginCapture, (gpu_stream_t)stream, 2 /* relaxed, in both APIs */);
}

static gpu_result_t rt_end_capture(uintptr_t c, uintptr_t stream, uintptr_t *graph, uintptr_t *exec, uintptr_t *at) {
	gpu_result_t r;
	gpu_graph_t g = NULL;
	gpu_graph_exec_t e = NULL;
	BIND_AT(c);
	r = CALL(StreamEndCapture, (gpu_stream_t)stream, &g);
	if (r != GPU_SUCCESS) {
		if (g != NULL) GPU_API.GraphDestroy(g);
		return r;
	}
	r = GPU_INSTANTIATE(&e, g);
	if (r != GPU_SUCCESS) {
		GPU_API.GraphDestroy(g);
		return r;
	}
	*graph = (uintptr_t)g;
	*exec = (uintptr_t)e;
	return GPU_SUCCESS;
}

static gpu_result_t rt_graph_launch(uintptr_t c, uintptr_t exec, uintptr_t stream, uintptr_t *at) {
	BIND_AT(c);
	return CALL(GraphLaunch, (gpu_graph_exec_t)exec, (gpu_stream_t)stream);
}

static gpu_result_t rt_graph_destroy(uintptr_t c, uintptr_t graph, uintptr_t exec, uintptr_t *at) {
	BIND_AT(c);
	gpu_result_t r = CALL(GraphExecDestroy, (gpu_graph_exec_t)exec);
	gpu_result_t r2 = GPU_API.GraphDestroy((gpu_graph_t)graph);
	return r != GPU_SUCCESS ? r : r2;
}

// GPU_FN(runtime) returns the table of the runtime shims.
const struct gpu_runtime *GPU_FN(runtime)(void) {
	static const struct gpu_runtime t = {
		vendor_malloc, vendor_free, rt_host_alloc, rt_host_free, rt_copy_htod, rt_copy_dtoh, rt_copy_dtod,
		rt_memset, rt_address_range, rt_stream_create, rt_stream_destroy, rt_stream_query, rt_stream_sync,
		rt_stream_wait_event, rt_copy_dtod_async, rt_event_create, rt_event_record, rt_event_query, rt_event_sync,
		rt_event_elapsed, rt_event_destroy, rt_module_load, rt_module_function, rt_module_unload, vendor_launch,
		rt_begin_capture, rt_end_capture, rt_graph_launch, rt_graph_destroy, GPU_FN(entry_name),
	};
	return &t;
}
