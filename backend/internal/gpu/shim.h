// shim.h is the C side the CUDA and ROCm backends share: the loader
// skeleton (dlopen a driver library that must never be unmapped, resolve a
// table of entry points, name an entry by its slot), the mapping of
// virtual-memory allocations, the table of runtime shims Go calls, and
// (shim_impl.h) the shims themselves, written once over a vendor's
// entry-point table. Each backend's shim includes it and declares its own
// types and table.

#ifndef INTRANODE_GPU_SHIM_H
#define INTRANODE_GPU_SHIM_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

// Values both drivers share.
enum {
	GPU_SUCCESS = 0,
	GPU_ERROR_INVALID_VALUE = 1,
	GPU_ERROR_NOT_READY = 600,
	GPU_MAX_ACCESS = 64,
};

// Memory mapped through the virtual memory management API: the address,
// the size and the allocation handle.
typedef struct {
	uint64_t ptr;
	size_t size;
	uint64_t handle;
} gpu_vmm;

// One entry point of a driver table: where to store it and its name.
struct gpu_entry {
	void **slot;
	const char *name;
};

// gpu_resolve fills the n entries from lib; it returns 1 when every one
// was found, else 0 with the missing one named in err (when err is not
// NULL).
//
// gpu_load opens the library at path (RTLD_NODELETE: drivers keep threads
// and callbacks inside it once initialised, so it must never be unmapped)
// and resolves the n required entries. It returns 0 and the handle in *lib,
// 1 when the library cannot be opened, 2 when an entry is missing (the
// table, size bytes at table, is then cleared); err says why.
__attribute__((unused)) static int gpu_resolve(void *lib, const struct gpu_entry *entries, size_t n, char *err, size_t errlen) {
	for (size_t i = 0; i < n; i++) {
		dlerror();
		void *sym = dlsym(lib, entries[i].name);
		if (sym == NULL) {
			if (err != NULL) {
				const char *e = dlerror();
				snprintf(err, errlen, "entry point %s missing (%s)", entries[i].name, e != NULL ? e : "no symbol");
			}
			return 0;
		}
		*entries[i].slot = sym;
	}
	return 1;
}

__attribute__((unused)) static int gpu_load(void **lib, const char *path, const struct gpu_entry *entries, size_t n, void *table,
             size_t size, char *err, size_t errlen) {
	void *l = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	if (l == NULL) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e != NULL ? e : "dlopen failed");
		return 1;
	}
	if (!gpu_resolve(l, entries, n, err, errlen)) {
		memset(table, 0, size);
		dlclose(l);
		return 2;
	}
	*lib = l;
	return 0;
}

// gpu_entry_name returns the name of the entry whose slot is at slot, or
// NULL.
__attribute__((unused)) static const char *gpu_entry_name(const struct gpu_entry *e, size_t n, uintptr_t slot) {
	for (size_t i = 0; i < n; i++) {
		if ((uintptr_t)e[i].slot == slot) return e[i].name;
	}
	return NULL;
}

#define GPU_LEN(a) (sizeof(a) / sizeof((a)[0]))

// gpu_runtime is a backend's table of the runtime shims (shim_impl.h), which
// the GPU core's cgo binding (runtime_cgo.go) calls for every backend. A
// call's device (a CUDA context, a HIP ordinal) travels as a uintptr_t; each
// shim stores in *at the slot of the entry point it called last, and
// entry_name turns the slot of a failed call into the entry point's name.
// malloc returns zeroed memory; launch's early asks for programmatic stream
// serialization where the driver has it.
struct gpu_runtime {
	int (*malloc)(uintptr_t c, size_t n, uint64_t *ptr, uintptr_t *at);
	int (*free)(uintptr_t c, uint64_t ptr, uintptr_t *at);
	int (*host_alloc)(uintptr_t c, size_t n, void **host, uint64_t *dptr, uintptr_t *at);
	int (*host_free)(uintptr_t c, void *host, uintptr_t *at);
	int (*copy_htod)(uintptr_t c, uint64_t dst, const void *src, size_t n, uintptr_t *at);
	int (*copy_dtoh)(uintptr_t c, void *dst, uint64_t src, size_t n, uintptr_t *at);
	int (*copy_dtod)(uintptr_t c, uint64_t dst, uint64_t src, size_t n, uintptr_t *at);
	int (*memset)(uintptr_t c, uint64_t dst, unsigned char v, size_t n, uintptr_t *at);
	int (*address_range)(uintptr_t c, uint64_t p, uint64_t *base, size_t *size, uintptr_t *at);
	int (*stream_create)(uintptr_t c, uintptr_t *stream, uintptr_t *at);
	int (*stream_destroy)(uintptr_t c, uintptr_t stream, uintptr_t *at);
	int (*stream_query)(uintptr_t c, uintptr_t stream, uintptr_t *at);
	int (*stream_sync)(uintptr_t c, uintptr_t stream, uintptr_t *at);
	int (*stream_wait_event)(uintptr_t c, uintptr_t stream, uintptr_t event, uintptr_t *at);
	int (*copy_dtod_async)(uintptr_t c, uint64_t dst, uint64_t src, size_t n, uintptr_t stream, uintptr_t *at);
	int (*event_create)(uintptr_t c, unsigned int flags, uintptr_t *event, uintptr_t *at);
	int (*event_record)(uintptr_t c, uintptr_t event, uintptr_t stream, uintptr_t *at);
	int (*event_query)(uintptr_t c, uintptr_t event, uintptr_t *at);
	int (*event_sync)(uintptr_t c, uintptr_t event, uintptr_t *at);
	int (*event_elapsed)(uintptr_t c, uintptr_t start, uintptr_t end, float *ms, uintptr_t *at);
	int (*event_destroy)(uintptr_t c, uintptr_t event, uintptr_t *at);
	int (*module_load)(uintptr_t c, const void *image, uintptr_t *module, uintptr_t *at);
	int (*module_function)(uintptr_t c, uintptr_t module, const char *name, uintptr_t *fn, uintptr_t *at);
	int (*module_unload)(uintptr_t c, uintptr_t module, uintptr_t *at);
	int (*launch)(uintptr_t c, uintptr_t fn, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
	              unsigned int by, unsigned int bz, unsigned int shared, uintptr_t stream, void *params, size_t size,
	              int early, uintptr_t *at);
	int (*begin_capture)(uintptr_t c, uintptr_t stream, uintptr_t *at);
	int (*end_capture)(uintptr_t c, uintptr_t stream, uintptr_t *graph, uintptr_t *exec, uintptr_t *at);
	int (*graph_launch)(uintptr_t c, uintptr_t exec, uintptr_t stream, uintptr_t *at);
	int (*graph_destroy)(uintptr_t c, uintptr_t graph, uintptr_t exec, uintptr_t *at);
	const char *(*entry_name)(uintptr_t slot);
};

#endif
