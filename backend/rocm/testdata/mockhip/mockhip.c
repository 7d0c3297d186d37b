// mockhip.c is a CPU stand-in for libamdhip64.so, used by TestMockRuntime
// to run the C side of the ROCm backend (the loader, its entry table, the
// shims shared with CUDA and the GPU core's binding of them) on machines
// without an AMD GPU. The test builds it with
//
//	gcc -shared -fPIC -o DIR/libamdhip64-mock.so mockhip.c
//
// and loads it by path. "Device" memory is host memory. It is stricter than
// the real runtime where that checks the backend: calls that work on a
// device fail with hipErrorInvalidDevice unless hipSetDevice chose one on
// the calling thread, so a shim that did not bind its device in the same C
// call fails. One kernel exists, "fill_u32" (pointer, u32 value, u64
// count, packed as a parameter buffer), run at launch time or, when the
// stream is capturing, at graph replay. The virtual memory management
// entry points of ROCm 6 map memfd memory, so that an exported descriptor
// imported again shows the same bytes.

#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int hipError_t;

enum {
	OK = 0,
	INVALID_VALUE = 1,
	OUT_OF_MEMORY = 2,
	INVALID_DEVICE = 101,
	INVALID_IMAGE = 200,
	INVALID_HANDLE = 400,
	NOT_FOUND = 500,
	NOT_READY = 600,
	PEER_ALREADY_ON = 704,
};

enum { NDEV = 2, MAX_ALLOC = 1 << 30, MAX_OPS = 16, MAX_PARAMS = 256, GRANULARITY = 2 << 20 };

static __thread int current = -1;

#define DEVICE()                                                 \
	do {                                                         \
		if (current < 0) return INVALID_DEVICE;                  \
	} while (0)

const char *hipGetErrorName(hipError_t r) {
	switch (r) {
	case OK: return "hipSuccess";
	case OUT_OF_MEMORY: return "hipErrorOutOfMemory";
	case INVALID_DEVICE: return "hipErrorInvalidDevice";
	case INVALID_IMAGE: return "hipErrorInvalidImage";
	case INVALID_HANDLE: return "hipErrorInvalidHandle";
	case NOT_READY: return "hipErrorNotReady";
	}
	return "hipErrorInvalidValue";
}

const char *hipGetErrorString(hipError_t r) { return r == OK ? "no error" : "mock failure"; }

hipError_t hipInit(unsigned int flags) { return flags == 0 ? OK : INVALID_VALUE; }
hipError_t hipRuntimeGetVersion(int *v) { *v = 60241133; return OK; }
hipError_t hipDriverGetVersion(int *v) { *v = 60241133; return OK; }
hipError_t hipGetDeviceCount(int *n) { *n = NDEV; return OK; }

hipError_t hipSetDevice(int dev) {
	if (dev < 0 || dev >= NDEV) return INVALID_DEVICE;
	current = dev;
	return OK;
}

hipError_t hipDeviceGetName(char *buf, int len, int dev) {
	if (dev < 0 || dev >= NDEV) return INVALID_DEVICE;
	strncpy(buf, "Mock MI300X", (size_t)len);
	return OK;
}

hipError_t hipDeviceGetPCIBusId(char *buf, int len, int dev) {
	static const char *ids[NDEV] = {"0000:0c:00.0", "0000:22:00.0"};
	if (dev < 0 || dev >= NDEV) return INVALID_DEVICE;
	strncpy(buf, ids[dev], (size_t)len);
	return OK;
}

hipError_t hipDeviceTotalMem(size_t *n, int dev) {
	if (dev < 0 || dev >= NDEV) return INVALID_DEVICE;
	*n = (size_t)192 << 30;
	return OK;
}

typedef struct {
	char bytes[16];
} hipUUID;

hipError_t hipDeviceGetUuid(hipUUID *u, int dev) {
	if (dev < 0 || dev >= NDEV) return INVALID_DEVICE;
	for (int i = 0; i < 16; i++) u->bytes[i] = (char)(dev * 16 + i);
	return OK;
}

hipError_t hipDeviceGetAttribute(int *v, int attr, int dev) {
	if (dev < 0 || dev >= NDEV) return INVALID_DEVICE;
	*v = attr == 23 ? 9 : 1; // compute major 9, every flag on
	return OK;
}

hipError_t hipDeviceCanAccessPeer(int *can, int dev, int peer) {
	if (dev < 0 || dev >= NDEV || peer < 0 || peer >= NDEV) return INVALID_DEVICE;
	*can = dev != peer;
	return OK;
}

static int peer_on[NDEV][NDEV];

hipError_t hipDeviceEnablePeerAccess(int peer, unsigned int flags) {
	DEVICE();
	if (peer < 0 || peer >= NDEV || peer == current) return INVALID_DEVICE;
	if (peer_on[current][peer]) return PEER_ALREADY_ON;
	peer_on[current][peer] = 1;
	return flags == 0 ? OK : INVALID_VALUE;
}

hipError_t hipDeviceSynchronize(void) {
	DEVICE();
	return OK;
}

// Allocations are remembered so that the address range and frees can be
// checked.
static struct {
	char *p;
	size_t n;
} allocs[64];

static hipError_t remember(void **p, size_t n) {
	DEVICE();
	if (n == 0 || n > MAX_ALLOC) return OUT_OF_MEMORY;
	for (int i = 0; i < 64; i++) {
		if (allocs[i].p == NULL) {
			allocs[i].p = malloc(n);
			allocs[i].n = n;
			memset(allocs[i].p, 0xa5, n); // not zeroed: the shim must
			*p = allocs[i].p;
			return OK;
		}
	}
	return OUT_OF_MEMORY;
}

static int find(const void *p) {
	for (int i = 0; i < 64; i++) {
		if (allocs[i].p != NULL && (const char *)p >= allocs[i].p && (const char *)p < allocs[i].p + allocs[i].n) return i;
	}
	return -1;
}

hipError_t hipMalloc(void **p, size_t n) { return remember(p, n); }

hipError_t hipExtMallocWithFlags(void **p, size_t n, unsigned int flags) {
	return flags == 0x3 || flags == 0x1 ? remember(p, n) : INVALID_VALUE;
}

hipError_t hipFree(void *p) {
	DEVICE();
	int i = find(p);
	if (i < 0 || allocs[i].p != p) return INVALID_VALUE;
	free(allocs[i].p);
	allocs[i].p = NULL;
	return OK;
}

hipError_t hipHostMalloc(void **p, size_t n, unsigned int flags) {
	DEVICE();
	if (flags != 0x3) return INVALID_VALUE; // portable | mapped
	*p = malloc(n);
	memset(*p, 0xa5, n);
	return OK;
}

hipError_t hipHostGetDevicePointer(void **d, void *h, unsigned int flags) {
	*d = h;
	return flags == 0 ? OK : INVALID_VALUE;
}

hipError_t hipHostFree(void *p) {
	free(p);
	return OK;
}

static hipError_t copy(void *dst, const void *src, size_t n) {
	DEVICE();
	memmove(dst, src, n);
	return OK;
}

hipError_t hipMemcpyHtoD(void *dst, void *src, size_t n) { return copy(dst, src, n); }
hipError_t hipMemcpyDtoH(void *dst, void *src, size_t n) { return copy(dst, src, n); }
hipError_t hipMemcpyDtoD(void *dst, void *src, size_t n) { return copy(dst, src, n); }

hipError_t hipMemsetD8(void *dst, unsigned char v, size_t n) {
	DEVICE();
	memset(dst, v, n);
	return OK;
}

hipError_t hipMemGetAddressRange(void **base, size_t *size, void *p) {
	DEVICE();
	int i = find(p);
	if (i < 0) return NOT_FOUND;
	*base = allocs[i].p;
	*size = allocs[i].n;
	return OK;
}

typedef struct {
	char reserved[64];
} hipIpcMemHandle_t;

hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t *h, void *p) {
	DEVICE();
	if (find(p) < 0) return INVALID_VALUE;
	memset(h, 0, sizeof(*h));
	memcpy(h->reserved, &p, sizeof(p));
	return OK;
}

hipError_t hipIpcOpenMemHandle(void **p, hipIpcMemHandle_t h, unsigned int flags) {
	DEVICE();
	memcpy(p, h.reserved, sizeof(*p));
	return find(*p) < 0 ? INVALID_HANDLE : OK;
}

hipError_t hipIpcCloseMemHandle(void *p) {
	DEVICE();
	return find(p) < 0 ? INVALID_HANDLE : OK;
}

// A stream records the work of a capture; the graph made from it replays
// that work.
typedef struct {
	int kind; // 1 launch, 2 copy
	char params[MAX_PARAMS];
	size_t size;
	void *dst, *src;
} op;

typedef struct {
	int dev, capturing, nops;
	op ops[MAX_OPS];
} stream;

typedef struct {
	int nops;
	op ops[MAX_OPS];
} graph;

hipError_t hipStreamCreateWithFlags(stream **s, unsigned int flags) {
	DEVICE();
	if (flags != 1) return INVALID_VALUE; // non-blocking
	*s = calloc(1, sizeof(stream));
	(*s)->dev = current;
	return OK;
}

// on checks that s belongs to the current device.
static hipError_t on(stream *s) {
	DEVICE();
	return s == NULL || s->dev == current ? OK : INVALID_HANDLE;
}

hipError_t hipStreamDestroy(stream *s) {
	hipError_t r = on(s);
	if (r == OK) free(s);
	return r;
}

hipError_t hipStreamQuery(stream *s) { return on(s); }
hipError_t hipStreamSynchronize(stream *s) { return on(s); }

static void run(const op *o) {
	if (o->kind == 2) {
		memmove(o->dst, o->src, o->size);
		return;
	}
	uint32_t *p;
	uint32_t v;
	uint64_t n;
	memcpy(&p, o->params, 8);
	memcpy(&v, o->params + 8, 4);
	memcpy(&n, o->params + 16, 8);
	for (uint64_t i = 0; i < n; i++) p[i] = v;
}

static hipError_t submit(stream *s, const op *o) {
	hipError_t r = on(s);
	if (r != OK) return r;
	if (s != NULL && s->capturing) {
		if (s->nops == MAX_OPS) return OUT_OF_MEMORY;
		s->ops[s->nops++] = *o;
		return OK;
	}
	run(o);
	return OK;
}

hipError_t hipMemcpyDtoDAsync(void *dst, void *src, size_t n, stream *s) {
	op o = {.kind = 2, .dst = dst, .src = src, .size = n};
	return submit(s, &o);
}

typedef struct {
	int dev, recorded;
	unsigned int flags;
} event;

hipError_t hipEventCreateWithFlags(event **e, unsigned int flags) {
	DEVICE();
	*e = calloc(1, sizeof(event));
	(*e)->dev = current;
	(*e)->flags = flags;
	return OK;
}

hipError_t hipEventRecord(event *e, stream *s) {
	hipError_t r = on(s);
	if (r == OK) e->recorded = 1;
	return r;
}

hipError_t hipEventQuery(event *e) {
	DEVICE();
	return e->recorded ? OK : NOT_READY;
}

hipError_t hipEventSynchronize(event *e) {
	DEVICE();
	return OK;
}

hipError_t hipEventElapsedTime(float *ms, event *start, event *end) {
	DEVICE();
	if ((start->flags | end->flags) & 0x2) return INVALID_HANDLE; // timing disabled
	*ms = 0.5f;
	return OK;
}

hipError_t hipEventDestroy(event *e) {
	DEVICE();
	free(e);
	return OK;
}

hipError_t hipStreamWaitEvent(stream *s, event *e, unsigned int flags) {
	hipError_t r = on(s);
	if (r == OK && flags != 0) r = INVALID_VALUE;
	return r;
}

// A module is an image that starts with "MOCKHIP"; its one function is
// fill_u32.
static int module_tag, function_tag;

hipError_t hipModuleLoadData(void **m, const void *image) {
	DEVICE();
	if (strncmp(image, "MOCKHIP", 7) != 0) return INVALID_IMAGE;
	*m = &module_tag;
	return OK;
}

hipError_t hipModuleGetFunction(void **f, void *m, const char *name) {
	DEVICE();
	if (m != &module_tag) return INVALID_HANDLE;
	if (strcmp(name, "fill_u32") != 0) return NOT_FOUND;
	*f = &function_tag;
	return OK;
}

hipError_t hipModuleUnload(void *m) {
	DEVICE();
	return m == &module_tag ? OK : INVALID_HANDLE;
}

// The launch takes its parameters as one buffer in extra (pointer, then
// size, then the end marker 0x3), as the shims pass them.
hipError_t hipModuleLaunchKernel(void *f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                 unsigned int by, unsigned int bz, unsigned int shared, stream *s, void **params,
                                 void **extra) {
	if (f != &function_tag || params != NULL || extra == NULL) return INVALID_VALUE;
	if (bx * by * bz > 1024) return INVALID_VALUE;
	if (extra[0] != (void *)0x1 || extra[2] != (void *)0x2 || extra[4] != (void *)0x3) return INVALID_VALUE;
	size_t size = *(size_t *)extra[3];
	if (size != 24) return INVALID_VALUE;
	op o = {.kind = 1, .size = size};
	memcpy(o.params, extra[1], size);
	return submit(s, &o);
}

hipError_t hipStreamBeginCapture(stream *s, int mode) {
	hipError_t r = on(s);
	if (r != OK) return r;
	if (s == NULL || s->capturing || mode != 2) return INVALID_VALUE; // relaxed
	s->capturing = 1;
	s->nops = 0;
	return OK;
}

hipError_t hipStreamEndCapture(stream *s, graph **g) {
	hipError_t r = on(s);
	if (r != OK) return r;
	if (s == NULL || !s->capturing) return INVALID_VALUE;
	s->capturing = 0;
	*g = calloc(1, sizeof(graph));
	(*g)->nops = s->nops;
	memcpy((*g)->ops, s->ops, sizeof(s->ops));
	return OK;
}

hipError_t hipGraphInstantiate(graph **exec, graph *g, void *node, char *log, size_t n) {
	*exec = malloc(sizeof(graph));
	**exec = *g;
	return OK;
}

hipError_t hipGraphLaunch(graph *exec, stream *s) {
	hipError_t r = on(s);
	for (int i = 0; r == OK && i < exec->nops; i++) run(&exec->ops[i]);
	return r;
}

hipError_t hipGraphExecDestroy(graph *exec) {
	free(exec);
	return OK;
}

hipError_t hipGraphDestroy(graph *g) {
	free(g);
	return OK;
}

// Virtual memory management, as hip_shim.h declares its structures.
typedef struct {
	int type, id;
} location;

typedef struct {
	int type;
	int requestedHandleType;
	location loc;
	void *win32HandleMetaData;
	unsigned char allocFlags[4];
} prop;

typedef struct {
	location loc;
	int flags;
} access_desc;

typedef struct {
	int fd;
	size_t size;
} vmm_handle;

static int good_prop(const prop *p) {
	return (p->type == 1 || p->type == 0x40000000) && p->requestedHandleType == 1 && p->loc.type == 1 &&
	       p->loc.id >= 0 && p->loc.id < NDEV;
}

hipError_t hipMemGetAllocationGranularity(size_t *g, const prop *p, int option) {
	if (!good_prop(p) || option != 0) return INVALID_VALUE;
	*g = GRANULARITY;
	return OK;
}

hipError_t hipMemCreate(vmm_handle **h, size_t size, const prop *p, unsigned long long flags) {
	DEVICE();
	if (!good_prop(p) || flags != 0 || size == 0 || size % GRANULARITY != 0) return INVALID_VALUE;
	int fd = memfd_create("mockhip", 0);
	if (fd < 0 || ftruncate(fd, (off_t)size) != 0) return OUT_OF_MEMORY;
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) return OUT_OF_MEMORY;
	memset(m, 0xa5, size); // not zeroed: the shim must
	munmap(m, size);
	*h = malloc(sizeof(vmm_handle));
	(*h)->fd = fd;
	(*h)->size = size;
	return OK;
}

hipError_t hipMemRelease(vmm_handle *h) {
	close(h->fd);
	free(h);
	return OK;
}

hipError_t hipMemExportToShareableHandle(void *out, vmm_handle *h, int type, unsigned long long flags) {
	if (type != 1 || flags != 0) return INVALID_VALUE;
	*(int *)out = dup(h->fd);
	return OK;
}

hipError_t hipMemImportFromShareableHandle(vmm_handle **h, void *os_handle, int type) {
	DEVICE();
	struct stat st;
	int fd = (int)(intptr_t)os_handle;
	if (type != 1 || fstat(fd, &st) != 0) return INVALID_VALUE;
	*h = malloc(sizeof(vmm_handle));
	(*h)->fd = dup(fd);
	(*h)->size = (size_t)st.st_size;
	return OK;
}

hipError_t hipMemAddressReserve(void **ptr, size_t size, size_t align, void *addr, unsigned long long flags) {
	void *m = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED || addr != NULL || flags != 0) return OUT_OF_MEMORY;
	*ptr = m;
	return OK;
}

hipError_t hipMemAddressFree(void *ptr, size_t size) { return munmap(ptr, size) == 0 ? OK : INVALID_VALUE; }

hipError_t hipMemMap(void *ptr, size_t size, size_t offset, vmm_handle *h, unsigned long long flags) {
	if (size > h->size || flags != 0) return INVALID_VALUE;
	void *m = mmap(ptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, h->fd, (off_t)offset);
	return m == MAP_FAILED ? OUT_OF_MEMORY : OK;
}

hipError_t hipMemUnmap(void *ptr, size_t size) {
	void *m = mmap(ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	return m == MAP_FAILED ? INVALID_VALUE : OK;
}

hipError_t hipMemSetAccess(void *ptr, size_t size, const access_desc *d, size_t n) {
	if (n == 0) return INVALID_VALUE;
	for (size_t i = 0; i < n; i++) {
		if (d[i].loc.type != 1 || d[i].loc.id < 0 || d[i].loc.id >= NDEV || d[i].flags != 3) return INVALID_VALUE;
	}
	return OK;
}
