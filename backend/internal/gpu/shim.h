// shim.h is the C side the CUDA and ROCm backends share: the loader
// skeleton (dlopen a driver library that must never be unmapped, resolve a
// table of entry points), the stages multi-call shims report, the mapping
// of virtual-memory allocations, and (shim_impl.h) the shims themselves,
// written once over a vendor's entry-point table. Each backend's shim
// includes it and declares its own types and table.

#ifndef INTRANODE_GPU_SHIM_H
#define INTRANODE_GPU_SHIM_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

// Steps of the multi-call shims, reported through their stage argument so
// Go can name the entry point that failed.
enum {
	GPU_STAGE_BIND = 1, // making the device's context current
	GPU_STAGE_GRANULARITY,
	GPU_STAGE_CREATE,
	GPU_STAGE_IMPORT,
	GPU_STAGE_RESERVE,
	GPU_STAGE_MAP,
	GPU_STAGE_ACCESS,
	GPU_STAGE_MEMSET,
	GPU_STAGE_SYNC,
	GPU_STAGE_EXPORT,
	GPU_STAGE_ALLOC,
	GPU_STAGE_DEVPTR,
	GPU_STAGE_END_CAPTURE,
	GPU_STAGE_INSTANTIATE,
	GPU_STAGE_COPY,
	GPU_STAGE_DEVICE_SYNC,
	GPU_STAGE_UNMAP,
	GPU_STAGE_ADDRESS_FREE,
	GPU_STAGE_RELEASE,
};

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

#define GPU_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
