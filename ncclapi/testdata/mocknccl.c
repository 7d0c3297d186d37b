// mocknccl.c: a CPU stand-in for libnccl.so.2 behind the NCCL-API
// library's tests. Ranks are threads of one process; buffers are host
// memory (the fake backend's device memory is host memory); every call is
// synchronous. It runs int8, int32 and float32 collectives (sum, max, min;
// avg on float32), send/receive in groups, splits, and counts every call
// by name for mockNcclCalls, so a test can tell what reached NCCL.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char internal[128]; } ncclUniqueId;
enum { MAXR = 8, MAGIC = 0x6e63636c, NAMES = 64 };

struct group {
	char id[128];
	int nranks, joined, arrived, aborted;
	unsigned long gen;
	const void *send[MAXR];
	int color[MAXR], key[MAXR];
	const void *to[MAXR][MAXR];
	size_t tobytes[MAXR][MAXR];
	struct group *next;
};

struct comm {
	int magic, rank, device;
	struct group *g;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct group *groups;
static unsigned char ids;
static struct { const char *name; int n; } counts[NAMES];

static void count(const char *name) {
	pthread_mutex_lock(&mu);
	for (int i = 0; i < NAMES; i++) {
		if (counts[i].name == NULL) counts[i].name = name;
		if (strcmp(counts[i].name, name) == 0) {
			counts[i].n++;
			break;
		}
	}
	pthread_mutex_unlock(&mu);
}

// mockNcclCalls returns how many times name was called.
int mockNcclCalls(const char *name) {
	int n = 0;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < NAMES && counts[i].name != NULL; i++)
		if (strcmp(counts[i].name, name) == 0) n = counts[i].n;
	pthread_mutex_unlock(&mu);
	return n;
}

int ncclGetVersion(int *v) { count("ncclGetVersion"); *v = 22809; return 0; }

int ncclGetUniqueId(ncclUniqueId *id) {
	count("ncclGetUniqueId");
	pthread_mutex_lock(&mu);
	memset(id->internal, 7, sizeof(id->internal));
	id->internal[127] = (char)++ids;
	pthread_mutex_unlock(&mu);
	return 0;
}

static struct group *join(const char *id, int nranks) {
	struct group *g = groups;
	while (g != NULL && memcmp(g->id, id, sizeof(g->id)) != 0) g = g->next;
	if (g == NULL) {
		g = calloc(1, sizeof(*g));
		memcpy(g->id, id, sizeof(g->id));
		g->nranks = nranks;
		g->next = groups;
		groups = g;
	}
	return g;
}

int ncclCommInitRank(struct comm **out, int nranks, ncclUniqueId id, int rank) {
	count("ncclCommInitRank");
	*out = NULL;
	if (nranks < 1 || nranks > MAXR || rank < 0 || rank >= nranks) return 4;
	pthread_mutex_lock(&mu);
	struct group *g = join(id.internal, nranks);
	if (g->nranks != nranks || g->joined >= nranks) {
		pthread_mutex_unlock(&mu);
		return 5;
	}
	if (++g->joined == nranks) pthread_cond_broadcast(&cv);
	while (g->joined < nranks) pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	struct comm *c = calloc(1, sizeof(*c));
	c->magic = MAGIC;
	c->g = g;
	c->rank = rank;
	c->device = rank;
	*out = c;
	return 0;
}

// barrier waits, with mu held, for every rank of g; nonzero if aborted.
static int barrier(struct group *g) {
	unsigned long gen = g->gen;
	if (++g->arrived == g->nranks) {
		g->arrived = 0;
		g->gen++;
		pthread_cond_broadcast(&cv);
		return 0;
	}
	while (gen == g->gen && !g->aborted) pthread_cond_wait(&cv, &mu);
	return gen == g->gen;
}

static int ok(struct comm *c) { return c != NULL && c->magic == MAGIC; }

int ncclCommSplit(struct comm *c, int color, int key, struct comm **out, void *config) {
	(void)config;
	count("ncclCommSplit");
	*out = NULL;
	if (!ok(c)) return 5;
	pthread_mutex_lock(&mu);
	struct group *g = c->g;
	g->color[c->rank] = color;
	g->key[c->rank] = key;
	if (barrier(g)) {
		pthread_mutex_unlock(&mu);
		return 3;
	}
	int n = 0, rank = 0;
	for (int r = 0; r < g->nranks; r++) {
		if (g->color[r] != color) continue;
		n++;
		if (g->key[r] < key || (g->key[r] == key && r < c->rank)) rank++;
	}
	char id[128];
	memcpy(id, g->id, sizeof id);
	id[0] ^= (char)(color + 1);
	id[1] ^= (char)g->gen;
	struct group *ng = color < 0 ? NULL : join(id, n);
	barrier(g);
	pthread_mutex_unlock(&mu);
	if (ng == NULL) return 0;
	struct comm *nc = calloc(1, sizeof(*nc));
	nc->magic = MAGIC;
	nc->g = ng;
	nc->rank = rank;
	nc->device = c->device;
	*out = nc;
	return 0;
}

int ncclCommGetAsyncError(struct comm *c, int *state);

// Like the real NCCL, ncclCommCount calls a public function of its own,
// which a library in front of it receives (interposition).
int ncclCommCount(struct comm *c, int *n) {
	count("ncclCommCount");
	int e = 0;
	if (!ok(c) || ncclCommGetAsyncError(c, &e) != 0) return 5;
	*n = c->g->nranks;
	return 0;
}
int ncclCommUserRank(struct comm *c, int *r) { count("ncclCommUserRank"); if (!ok(c)) return 5; *r = c->rank; return 0; }
int ncclCommCuDevice(struct comm *c, int *d) { count("ncclCommCuDevice"); if (!ok(c)) return 5; *d = c->device; return 0; }

static int size_of(int dtype) { return dtype == 0 ? 1 : (dtype == 2 || dtype == 7) ? 4 : 0; }

static double get(int dtype, const void *p, size_t i) {
	switch (dtype) {
	case 0: return ((const int8_t *)p)[i];
	case 2: return ((const int32_t *)p)[i];
	}
	return ((const float *)p)[i];
}

static void put(int dtype, void *p, size_t i, double v) {
	switch (dtype) {
	case 0: ((int8_t *)p)[i] = (int8_t)v; return;
	case 2: ((int32_t *)p)[i] = (int32_t)v; return;
	}
	((float *)p)[i] = (float)v;
}

// reduce folds element base+i of every rank's send into tmp[i].
static void reduce(struct group *g, int dtype, int op, size_t base, size_t count_, void *tmp) {
	for (size_t i = 0; i < count_; i++) {
		double acc = get(dtype, g->send[0], base + i);
		for (int r = 1; r < g->nranks; r++) {
			double x = get(dtype, g->send[r], base + i);
			acc = (op == 0 || op == 4) ? acc + x : op == 2 ? (x > acc ? x : acc) : (x < acc ? x : acc);
		}
		if (op == 4) acc /= g->nranks;
		put(dtype, tmp, i, acc);
	}
}

static int enter(const char *name, struct comm *c, int dtype, int op) {
	count(name);
	if (!ok(c)) return 5;
	if (size_of(dtype) == 0 || op < 0 || op > 4 || op == 1 || (op == 4 && dtype != 7)) return 4;
	pthread_mutex_lock(&mu);
	return 0;
}

int ncclAllReduce(const void *send, void *recv, size_t n, int dtype, int op, struct comm *c, void *stream) {
	(void)stream;
	int r = enter("ncclAllReduce", c, dtype, op);
	if (r) return r;
	struct group *g = c->g;
	g->send[c->rank] = send;
	barrier(g);
	void *tmp = malloc(n * 4 + 1);
	reduce(g, dtype, op, 0, n, tmp);
	barrier(g);
	memcpy(recv, tmp, n * size_of(dtype));
	free(tmp);
	pthread_mutex_unlock(&mu);
	return 0;
}

int ncclReduceScatter(const void *send, void *recv, size_t n, int dtype, int op, struct comm *c, void *stream) {
	(void)stream;
	int r = enter("ncclReduceScatter", c, dtype, op);
	if (r) return r;
	struct group *g = c->g;
	g->send[c->rank] = send;
	barrier(g);
	void *tmp = malloc(n * 4 + 1);
	reduce(g, dtype, op, (size_t)c->rank * n, n, tmp);
	barrier(g);
	memcpy(recv, tmp, n * size_of(dtype));
	free(tmp);
	pthread_mutex_unlock(&mu);
	return 0;
}

static __thread int grouped;

int ncclAllGather(const void *send, void *recv, size_t n, int dtype, struct comm *c, void *stream) {
	(void)stream;
	// Real NCCL defers a collective issued inside a group to its end: a
	// caller that waits for it there waits forever. Count such calls.
	if (grouped) count("ncclAllGather in a group");
	int r = enter("ncclAllGather", c, dtype, 0);
	if (r) return r;
	struct group *g = c->g;
	size_t bytes = n * size_of(dtype);
	void *mine = malloc(bytes + 1);
	memcpy(mine, send, bytes);
	g->send[c->rank] = mine;
	barrier(g);
	for (int q = 0; q < g->nranks; q++) memcpy((char *)recv + (size_t)q * bytes, g->send[q], bytes);
	barrier(g);
	free(mine);
	pthread_mutex_unlock(&mu);
	return 0;
}

int ncclBroadcast(const void *send, void *recv, size_t n, int dtype, int root, struct comm *c, void *stream) {
	(void)stream;
	int r = enter("ncclBroadcast", c, dtype, 0);
	if (r) return r;
	struct group *g = c->g;
	if (root < 0 || root >= g->nranks) {
		pthread_mutex_unlock(&mu);
		return 4;
	}
	g->send[c->rank] = send;
	barrier(g);
	if (c->rank != root) memcpy(recv, g->send[root], n * size_of(dtype));
	barrier(g);
	if (c->rank == root && recv != send) memcpy(recv, send, n * size_of(dtype));
	pthread_mutex_unlock(&mu);
	return 0;
}

// Groups of sends and receives, per thread.
static __thread struct comm *gcomm;
static __thread struct { void *buf; int peer; size_t bytes; } recvs[MAXR];
static __thread int nrecvs;

int ncclGroupStart(void) { count("ncclGroupStart"); grouped++; return 0; }

int ncclSend(const void *buf, size_t n, int dtype, int peer, struct comm *c, void *stream) {
	(void)stream;
	count("ncclSend");
	if (!ok(c) || !grouped || peer < 0 || peer >= c->g->nranks || size_of(dtype) == 0) return 5;
	pthread_mutex_lock(&mu);
	c->g->to[c->rank][peer] = buf;
	c->g->tobytes[c->rank][peer] = n * size_of(dtype);
	pthread_mutex_unlock(&mu);
	gcomm = c;
	return 0;
}

int ncclRecv(void *buf, size_t n, int dtype, int peer, struct comm *c, void *stream) {
	(void)stream;
	count("ncclRecv");
	if (!ok(c) || !grouped || peer < 0 || peer >= c->g->nranks || nrecvs == MAXR || size_of(dtype) == 0) return 5;
	recvs[nrecvs].buf = buf;
	recvs[nrecvs].peer = peer;
	recvs[nrecvs].bytes = n * size_of(dtype);
	nrecvs++;
	gcomm = c;
	return 0;
}

int ncclGroupEnd(void) {
	count("ncclGroupEnd");
	if (grouped == 0) return 5;
	if (--grouped > 0 || gcomm == NULL) return 0;
	struct group *g = gcomm->g;
	pthread_mutex_lock(&mu);
	int r = barrier(g);
	if (r == 0) {
		for (int i = 0; i < nrecvs; i++) memcpy(recvs[i].buf, g->to[recvs[i].peer][gcomm->rank], recvs[i].bytes);
		r = barrier(g);
	}
	pthread_mutex_unlock(&mu);
	nrecvs = 0;
	gcomm = NULL;
	return r == 0 ? 0 : 3;
}

static int release(const char *name, struct comm *c) {
	count(name);
	if (c == NULL) return 0;
	if (c->magic != MAGIC) return 5;
	pthread_mutex_lock(&mu);
	c->magic = 0;
	c->g->aborted = strcmp(name, "ncclCommAbort") == 0;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	return 0;
}

int ncclCommAbort(struct comm *c) { return release("ncclCommAbort", c); }
int ncclCommDestroy(struct comm *c) { return release("ncclCommDestroy", c); }
int ncclCommFinalize(struct comm *c) { count("ncclCommFinalize"); return ok(c) ? 0 : 5; }

int ncclCommGetAsyncError(struct comm *c, int *state) {
	count("ncclCommGetAsyncError");
	if (!ok(c)) return 4;
	*state = 0;
	return 0;
}

const char *ncclGetErrorString(int r) { return r == 5 ? "invalid usage (mock)" : "other (mock)"; }
const char *ncclGetLastError(void *c) { (void)c; return "mock last error"; }

int ncclMemAlloc(void **p, size_t n) { count("ncclMemAlloc"); *p = calloc(1, n); return *p ? 0 : 2; }
int ncclMemFree(void *p) { count("ncclMemFree"); free(p); return 0; }
