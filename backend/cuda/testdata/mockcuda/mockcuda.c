// mockcuda.c is a CPU stand-in for libcuda.so.1, used by TestMockDriver to
// run the GPU tests' plumbing (the C shim, argument packing, contexts,
// shareable memory across processes) on machines without a GPU. It is built
// by the test with
//
//	gcc -shared -fPIC -o DIR/libcuda.so.1 mockcuda.c
//
// and found through LD_LIBRARY_PATH. "Device" memory is host memory; the
// test kernels (testdata/testkernels.cu) run on the CPU at launch time or,
// for captured streams, at graph replay. It is stricter than the real driver
// where that checks the backend: every call that needs a context fails with
// CUDA_ERROR_INVALID_CONTEXT unless one is current on the calling thread,
// and stream work must come from the stream's own context.

#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;

enum {
	OK = 0,
	INVALID_VALUE = 1,
	OUT_OF_MEMORY = 2,
	INVALID_DEVICE = 101,
	INVALID_CONTEXT = 201,
	INVALID_HANDLE = 400,
	NOT_FOUND = 500,
	NOT_SUPPORTED = 801,
	CAPTURE_UNSUPPORTED = 900,
};

enum { NDEV = 2, GRANULARITY = 2 << 20, MAX_PARAMS = 4096, MAX_RECORDED = 64 };

typedef struct {
	int type, id;
} CUmemLocation;

typedef struct {
	int type;
	int requestedHandleTypes;
	CUmemLocation location;
	void *win32HandleMetaData;
	unsigned char allocFlags[8];
} CUmemAllocationProp;

typedef struct {
	CUmemLocation location;
	int flags;
} CUmemAccessDesc;

struct ctx {
	int dev;
	int refs;
};

static struct ctx ctxs[NDEV] = {{0, 0}, {1, 0}};
static __thread struct ctx *cur;

#define NEED_CTX()                                                     \
	do {                                                               \
		if (cur == NULL) return INVALID_CONTEXT;                       \
	} while (0)

struct func {
	int kind; // 0 no-op, 1 add_one, 2 fill_u32, 3 spin_until
};

static struct func funcs[4] = {{0}, {1}, {2}, {3}};

struct launch {
	struct func *f;
	unsigned long long threads;
	size_t size;
	unsigned char params[MAX_PARAMS];
};

struct stream {
	struct ctx *owner;
	int capturing;
	int nrec;
	struct launch rec[MAX_RECORDED];
};

struct graph {
	int nrec;
	struct launch rec[MAX_RECORDED];
};

struct event {
	struct ctx *owner;
	unsigned int flags;
	int recorded;
};

struct module {
	struct ctx *owner;
};

struct alloc {
	int fd;
	size_t size;
	int types;
};

// ranges lists the address ranges handed out (cuMemAlloc, cuMemHostAlloc,
// cuMemAddressReserve) for cuMemGetAddressRange.
#define MAX_RANGES 4096
static struct {
	uintptr_t base;
	size_t size;
} ranges[MAX_RANGES];
static pthread_mutex_t ranges_mu = PTHREAD_MUTEX_INITIALIZER;

static void range_add(uintptr_t base, size_t size) {
	pthread_mutex_lock(&ranges_mu);
	for (int i = 0; i < MAX_RANGES; i++) {
		if (ranges[i].size == 0) {
			ranges[i].base = base;
			ranges[i].size = size;
			break;
		}
	}
	pthread_mutex_unlock(&ranges_mu);
}

static void range_remove(uintptr_t base) {
	pthread_mutex_lock(&ranges_mu);
	for (int i = 0; i < MAX_RANGES; i++) {
		if (ranges[i].size != 0 && ranges[i].base == base) ranges[i].size = 0;
	}
	pthread_mutex_unlock(&ranges_mu);
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
	CUresult r = NOT_FOUND;
	pthread_mutex_lock(&ranges_mu);
	for (int i = 0; i < MAX_RANGES; i++) {
		if (ranges[i].size != 0 && p >= ranges[i].base && p < ranges[i].base + ranges[i].size) {
			*base = ranges[i].base;
			*size = ranges[i].size;
			r = OK;
			break;
		}
	}
	pthread_mutex_unlock(&ranges_mu);
	return r;
}

static int valid_ctx(struct ctx *c) { return c == &ctxs[0] || c == &ctxs[1]; }

CUresult cuInit(unsigned int flags) { return flags == 0 ? OK : INVALID_VALUE; }

CUresult cuDriverGetVersion(int *v) {
	*v = 12080;
	return OK;
}

CUresult cuGetErrorName(CUresult r, const char **s) {
	switch (r) {
	case OK: *s = "CUDA_SUCCESS"; return OK;
	case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return OK;
	case OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return OK;
	case INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; return OK;
	case INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; return OK;
	case INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; return OK;
	case NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; return OK;
	case NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; return OK;
	case CAPTURE_UNSUPPORTED: *s = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; return OK;
	}
	*s = NULL;
	return INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult r, const char **s) {
	const char *name;
	if (cuGetErrorName(r, &name) != OK) {
		*s = NULL;
		return INVALID_VALUE;
	}
	*s = "mock driver error";
	return OK;
}

CUresult cuDeviceGetCount(int *n) {
	*n = NDEV;
	return OK;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
	if (ordinal < 0 || ordinal >= NDEV) return INVALID_DEVICE;
	*d = ordinal;
	return OK;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	if (d < 0 || d >= NDEV) return INVALID_DEVICE;
	snprintf(name, (size_t)len, "Mock GPU %d", d);
	return OK;
}

CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
	if (d < 0 || d >= NDEV) return INVALID_DEVICE;
	switch (attr) {
	case 19: case 41: case 102: case 103: *v = 1; return OK; // host map, UVA, VMM, POSIX fd
	case 75: *v = 9; return OK;
	case 76: *v = 0; return OK;
	case 128: case 132: *v = 0; return OK; // fabric handles, multicast
	}
	return INVALID_VALUE;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
	if (d < 0 || d >= NDEV) return INVALID_DEVICE;
	*bytes = (size_t)80 << 30;
	return OK;
}

CUresult cuDeviceGetUuid_v2(unsigned char *uuid, CUdevice d) {
	if (d < 0 || d >= NDEV) return INVALID_DEVICE;
	for (int i = 0; i < 16; i++) uuid[i] = (unsigned char)(0x10 * d + i);
	return OK;
}

CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice d) {
	if (d < 0 || d >= NDEV) return INVALID_DEVICE;
	snprintf(id, (size_t)len, "0000:%02X:00.0", 0x19 + 0x22 * d);
	return OK;
}

CUresult cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice p) {
	if (d < 0 || d >= NDEV || p < 0 || p >= NDEV) return INVALID_DEVICE;
	*can = d != p;
	return OK;
}

CUresult cuDevicePrimaryCtxRetain(struct ctx **c, CUdevice d) {
	if (d < 0 || d >= NDEV) return INVALID_DEVICE;
	__atomic_add_fetch(&ctxs[d].refs, 1, __ATOMIC_SEQ_CST);
	*c = &ctxs[d];
	return OK;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
	if (d < 0 || d >= NDEV) return INVALID_DEVICE;
	if (__atomic_sub_fetch(&ctxs[d].refs, 1, __ATOMIC_SEQ_CST) < 0) return INVALID_CONTEXT;
	return OK;
}

CUresult cuCtxSetCurrent(struct ctx *c) {
	if (c != NULL && !valid_ctx(c)) return INVALID_CONTEXT;
	if (c != NULL && __atomic_load_n(&c->refs, __ATOMIC_SEQ_CST) <= 0) return INVALID_CONTEXT;
	cur = c;
	return OK;
}

CUresult cuCtxSynchronize(void) {
	NEED_CTX();
	return OK;
}

CUresult cuCtxEnablePeerAccess(struct ctx *peer, unsigned int flags) {
	NEED_CTX();
	if (!valid_ctx(peer) || peer == cur || flags != 0) return INVALID_VALUE;
	return OK;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	NEED_CTX();
	void *m = n > ((size_t)1 << 40) ? NULL : malloc(n);
	if (m == NULL) return OUT_OF_MEMORY;
	memset(m, 0xcd, n); // the backend must zero it
	*p = (CUdeviceptr)(uintptr_t)m;
	range_add((uintptr_t)m, n);
	return OK;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
	NEED_CTX();
	range_remove((uintptr_t)p);
	free((void *)(uintptr_t)p);
	return OK;
}

CUresult cuMemHostAlloc(void **pp, size_t n, unsigned int flags) {
	NEED_CTX();
	if ((flags & 2) == 0) return INVALID_VALUE; // must be device-mapped
	void *m = malloc(n);
	if (m == NULL) return OUT_OF_MEMORY;
	memset(m, 0xcd, n);
	*pp = m;
	range_add((uintptr_t)m, n);
	return OK;
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned int flags) {
	NEED_CTX();
	if (flags != 0) return INVALID_VALUE;
	*d = (CUdeviceptr)(uintptr_t)p;
	return OK;
}

CUresult cuMemFreeHost(void *p) {
	NEED_CTX();
	range_remove((uintptr_t)p);
	free(p);
	return OK;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	NEED_CTX();
	memcpy((void *)(uintptr_t)dst, src, n);
	return OK;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	NEED_CTX();
	memcpy(dst, (void *)(uintptr_t)src, n);
	return OK;
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
	NEED_CTX();
	memmove((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
	return OK;
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
	NEED_CTX();
	memset((void *)(uintptr_t)dst, v, n);
	return OK;
}

static int check_prop(const CUmemAllocationProp *p) {
	return p->type == 1 && p->location.type == 1 && p->location.id >= 0 && p->location.id < NDEV &&
	       p->win32HandleMetaData == NULL;
}

CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *p, int option) {
	if (!check_prop(p) || option != 0) return INVALID_VALUE;
	*g = GRANULARITY;
	return OK;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *p,
                     unsigned long long flags) {
	NEED_CTX();
	if (!check_prop(p) || flags != 0 || size == 0 || size % GRANULARITY != 0) return INVALID_VALUE;
	if (p->requestedHandleTypes & 8) return NOT_SUPPORTED; // no fabric here
	struct alloc *a = malloc(sizeof(*a));
	a->fd = memfd_create("mockcuda", MFD_CLOEXEC);
	if (a->fd < 0 || ftruncate(a->fd, (off_t)size) != 0) return OUT_OF_MEMORY;
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
	memset(m, 0xcd, size); // the backend must zero it
	munmap(m, size);
	a->size = size;
	a->types = p->requestedHandleTypes;
	*h = (CUmemGenericAllocationHandle)(uintptr_t)a;
	return OK;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
	struct alloc *a = (struct alloc *)(uintptr_t)h;
	if (a == NULL) return INVALID_VALUE;
	close(a->fd);
	free(a);
	return OK;
}

CUresult cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle h, int type,
                                      unsigned long long flags) {
	struct alloc *a = (struct alloc *)(uintptr_t)h;
	if (a == NULL || flags != 0) return INVALID_VALUE;
	if (type != 1 || (a->types & 1) == 0) return NOT_SUPPORTED;
	*(int *)out = dup(a->fd);
	return OK;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *os, int type) {
	if (type != 1) return NOT_SUPPORTED;
	int fd = (int)(uintptr_t)os;
	struct stat st;
	if (fstat(fd, &st) != 0) return INVALID_VALUE;
	struct alloc *a = malloc(sizeof(*a));
	a->fd = dup(fd);
	a->size = (size_t)st.st_size;
	a->types = 1;
	*h = (CUmemGenericAllocationHandle)(uintptr_t)a;
	return OK;
}

CUresult cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
                             unsigned long long flags) {
	if (size == 0 || size % GRANULARITY != 0 || addr != 0 || flags != 0) return INVALID_VALUE;
	if (align != 0 && align % GRANULARITY != 0) return INVALID_VALUE;
	void *m = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) return OUT_OF_MEMORY;
	*p = (CUdeviceptr)(uintptr_t)m;
	range_add((uintptr_t)m, size);
	return OK;
}

CUresult cuMemAddressFree(CUdeviceptr p, size_t size) {
	range_remove((uintptr_t)p);
	return munmap((void *)(uintptr_t)p, size) == 0 ? OK : INVALID_VALUE;
}

CUresult cuMemMap(CUdeviceptr p, size_t size, size_t off, CUmemGenericAllocationHandle h,
                  unsigned long long flags) {
	struct alloc *a = (struct alloc *)(uintptr_t)h;
	if (a == NULL || flags != 0 || off != 0 || size > a->size) return INVALID_VALUE;
	void *m = mmap((void *)(uintptr_t)p, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, a->fd, 0);
	return m == MAP_FAILED ? INVALID_VALUE : OK;
}

CUresult cuMemUnmap(CUdeviceptr p, size_t size) {
	void *m = mmap((void *)(uintptr_t)p, size, PROT_NONE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
	return m == MAP_FAILED ? INVALID_VALUE : OK;
}

CUresult cuMemSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc *d, size_t n) {
	if (p == 0 || size == 0 || n == 0 || n > NDEV) return INVALID_VALUE;
	for (size_t i = 0; i < n; i++) {
		if (d[i].location.type != 1 || d[i].location.id < 0 || d[i].location.id >= NDEV || d[i].flags != 3)
			return INVALID_VALUE;
	}
	return OK;
}

CUresult cuStreamCreate(struct stream **s, unsigned int flags) {
	NEED_CTX();
	if (flags != 1) return INVALID_VALUE; // the backend asks for non-blocking streams
	*s = calloc(1, sizeof(**s));
	(*s)->owner = cur;
	return OK;
}

#define STREAM_OK(s)                                                   \
	do {                                                               \
		NEED_CTX();                                                    \
		if ((s) == NULL || (s)->owner != cur) return INVALID_CONTEXT;  \
	} while (0)

CUresult cuStreamDestroy_v2(struct stream *s) {
	STREAM_OK(s);
	free(s);
	return OK;
}

CUresult cuStreamQuery(struct stream *s) {
	STREAM_OK(s);
	return s->capturing ? CAPTURE_UNSUPPORTED : OK;
}

CUresult cuStreamSynchronize(struct stream *s) {
	NEED_CTX();
	if (s == NULL) return OK; // the legacy default stream
	STREAM_OK(s);
	return s->capturing ? CAPTURE_UNSUPPORTED : OK;
}

CUresult cuStreamWaitEvent(struct stream *s, struct event *e, unsigned int flags) {
	STREAM_OK(s);
	return e == NULL || flags != 0 ? INVALID_HANDLE : OK;
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, struct stream *s) {
	STREAM_OK(s);
	memmove((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n);
	return OK;
}

CUresult cuEventCreate(struct event **e, unsigned int flags) {
	NEED_CTX();
	*e = calloc(1, sizeof(**e));
	(*e)->owner = cur;
	(*e)->flags = flags;
	return OK;
}

CUresult cuEventRecord(struct event *e, struct stream *s) {
	STREAM_OK(s);
	if (e == NULL || e->owner != cur) return INVALID_HANDLE;
	e->recorded = 1;
	return OK;
}

CUresult cuEventQuery(struct event *e) {
	NEED_CTX();
	return e == NULL ? INVALID_HANDLE : OK;
}

CUresult cuEventSynchronize(struct event *e) {
	NEED_CTX();
	return e == NULL ? INVALID_HANDLE : OK;
}

CUresult cuEventElapsedTime(float *ms, struct event *start, struct event *end) {
	NEED_CTX();
	if (start == NULL || end == NULL || !start->recorded || !end->recorded) return INVALID_HANDLE;
	if ((start->flags | end->flags) & 2) return INVALID_HANDLE;
	*ms = 0.25f;
	return OK;
}

CUresult cuEventDestroy_v2(struct event *e) {
	NEED_CTX();
	free(e);
	return OK;
}

CUresult cuModuleLoadData(struct module **m, const void *image) {
	NEED_CTX();
	if (image == NULL || *(const char *)image == 0) return 200; // CUDA_ERROR_INVALID_IMAGE
	*m = calloc(1, sizeof(**m));
	(*m)->owner = cur;
	return OK;
}

CUresult cuModuleGetFunction(struct func **f, struct module *m, const char *name) {
	NEED_CTX();
	if (m == NULL) return INVALID_HANDLE;
	if (strcmp(name, "add_one") == 0) *f = &funcs[1];
	else if (strcmp(name, "fill_u32") == 0) *f = &funcs[2];
	else if (strcmp(name, "spin_until") == 0) *f = &funcs[3];
	else if (strncmp(name, "intranode_", 10) == 0) *f = &funcs[0];
	else return NOT_FOUND;
	return OK;
}

CUresult cuModuleUnload(struct module *m) {
	NEED_CTX();
	free(m);
	return OK;
}

static uint64_t u64_at(const unsigned char *p, size_t off) {
	uint64_t v;
	memcpy(&v, p + off, 8);
	return v;
}

static uint32_t u32_at(const unsigned char *p, size_t off) {
	uint32_t v;
	memcpy(&v, p + off, 4);
	return v;
}

// run executes one launch on the CPU; the parameter sizes the kernels
// expect are checked, so a wrongly packed buffer fails.
static CUresult run(const struct launch *l) {
	switch (l->f->kind) {
	case 1: { // add_one(u32 *p, u64 n)
		if (l->size != 16) return INVALID_VALUE;
		uint32_t *p = (uint32_t *)(uintptr_t)u64_at(l->params, 0);
		uint64_t n = u64_at(l->params, 8);
		for (uint64_t i = 0; i < n && i < l->threads; i++) p[i] += 1;
		return OK;
	}
	case 2: { // fill_u32(u32 *p, u32 v, u64 n)
		if (l->size != 24) return INVALID_VALUE;
		uint32_t *p = (uint32_t *)(uintptr_t)u64_at(l->params, 0);
		uint32_t v = u32_at(l->params, 8);
		uint64_t n = u64_at(l->params, 16);
		for (uint64_t i = 0; i < n && i < l->threads; i++) p[i] = v;
		return OK;
	}
	case 3: { // spin_until(u32 *flag, u32 *out): no waiting on a CPU
		if (l->size != 16) return INVALID_VALUE;
		uint32_t *flag = (uint32_t *)(uintptr_t)u64_at(l->params, 0);
		uint32_t *out = (uint32_t *)(uintptr_t)u64_at(l->params, 8);
		*out = *flag;
		return OK;
	}
	}
	return OK;
}

CUresult cuLaunchKernel(struct func *f, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                        struct stream *s, void **kernel_params, void **extra) {
	STREAM_OK(s);
	if (f == NULL || kernel_params != NULL) return INVALID_VALUE;
	if ((unsigned long long)bx * by * bz > 1024 || gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0)
		return INVALID_VALUE;
	(void)shared;
	struct launch l = {f, (unsigned long long)gx * gy * gz * bx * by * bz, 0, {0}};
	void *buf = NULL;
	size_t *size = NULL;
	for (int i = 0; extra != NULL && extra[i] != NULL; i += 2) {
		if (extra[i] == (void *)1) buf = extra[i + 1];
		else if (extra[i] == (void *)2) size = extra[i + 1];
		else return INVALID_VALUE;
	}
	if (extra != NULL) {
		if (buf == NULL || size == NULL || *size > MAX_PARAMS) return INVALID_VALUE;
		l.size = *size;
		memcpy(l.params, buf, l.size);
	}
	if (s->capturing) {
		if (s->nrec == MAX_RECORDED) return OUT_OF_MEMORY;
		s->rec[s->nrec++] = l;
		return OK;
	}
	return run(&l);
}

CUresult cuStreamBeginCapture_v2(struct stream *s, int mode) {
	STREAM_OK(s);
	if (mode != 2 || s->capturing) return INVALID_VALUE; // relaxed mode only
	s->capturing = 1;
	s->nrec = 0;
	return OK;
}

CUresult cuStreamEndCapture(struct stream *s, struct graph **g) {
	STREAM_OK(s);
	if (!s->capturing) return INVALID_VALUE;
	s->capturing = 0;
	*g = malloc(sizeof(**g));
	(*g)->nrec = s->nrec;
	memcpy((*g)->rec, s->rec, sizeof(s->rec[0]) * (size_t)s->nrec);
	return OK;
}

CUresult cuGraphInstantiateWithFlags(struct graph **exec, struct graph *g, unsigned long long flags) {
	NEED_CTX();
	if (g == NULL || flags != 0) return INVALID_VALUE;
	*exec = malloc(sizeof(**exec));
	memcpy(*exec, g, sizeof(*g));
	return OK;
}

CUresult cuGraphLaunch(struct graph *exec, struct stream *s) {
	STREAM_OK(s);
	if (exec == NULL) return INVALID_HANDLE;
	for (int i = 0; i < exec->nrec; i++) {
		CUresult r = run(&exec->rec[i]);
		if (r != OK) return r;
	}
	return OK;
}

CUresult cuGraphExecDestroy(struct graph *exec) {
	NEED_CTX();
	free(exec);
	return OK;
}

CUresult cuGraphDestroy(struct graph *g) {
	NEED_CTX();
	free(g);
	return OK;
}
