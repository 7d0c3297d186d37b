// mocknccl.c: a CPU stand-in for libnccl.so.2 behind the NCCL-API
// library's tests. Ranks are threads of one process or processes: a
// group's state lives in POSIX shared memory named from its unique id,
// with a process-shared mutex and condition, and every collective passes
// its data through the group's staging area there. Buffers are host memory
// (the fake backend's device memory is host memory); every call is
// synchronous. It runs int8, int32 and float32 collectives (sum, max, min;
// avg on float32), send/receive in groups, splits, and counts every call
// by name for mockNcclCalls (per process), so a test can tell what reached
// NCCL. With MOCKNCCL_NONBLOCKING=1 every communicator is nonblocking: a
// collective returns ncclInProgress (7) and its output appears only when
// ncclCommGetAsyncError, polled, reports it done (the third poll); a call
// made before that is refused (ncclInvalidUsage) and counted as
// "call in progress". MOCKNCCL_STUCK=1 on top makes each communicator's
// first all-gather never complete, as when a peer never makes its call.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct { char internal[128]; } ncclUniqueId;
enum { MAXR = 8, MAGIC = 0x6e63636c, NAMES = 64, STAGE = 1 << 20, P2P = 64 << 10 };

// group is one communicator's shared state.
struct group {
	int ready; // set once the creator has initialised the rest
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int nranks, joined, arrived, aborted, refs;
	unsigned long gen;
	int color[MAXR], key[MAXR];
	char stage[MAXR][STAGE];
	size_t p2pbytes[MAXR][MAXR];
	char p2p[MAXR][MAXR][P2P];
};

struct comm {
	int magic, rank, device;
	struct group *g;
	char name[64];
	// A nonblocking collective's output, copied when it is polled done.
	int pending; // polls to go; -1: never
	void *precv, *ptmp;
	size_t pbytes;
	int gathers;
};

static int env_on(const char *name) { return getenv(name) != NULL && strcmp(getenv(name), "1") == 0; }

static int nonblocking(void) {
	static int nb = -1;
	if (nb < 0) nb = env_on("MOCKNCCL_NONBLOCKING");
	return nb;
}

// This process's mappings of groups, by shared-memory name.
static pthread_mutex_t local = PTHREAD_MUTEX_INITIALIZER;
static struct mapping { char name[64]; struct group *g; struct mapping *next; } *mappings;
static unsigned ids;
static struct { const char *name; int n; } counts[NAMES];

static void count(const char *name) {
	pthread_mutex_lock(&local);
	for (int i = 0; i < NAMES; i++) {
		if (counts[i].name == NULL) counts[i].name = name;
		if (strcmp(counts[i].name, name) == 0) {
			counts[i].n++;
			break;
		}
	}
	pthread_mutex_unlock(&local);
}

// mockNcclCalls returns how many times this process called name.
int mockNcclCalls(const char *name) {
	int n = 0;
	pthread_mutex_lock(&local);
	for (int i = 0; i < NAMES && counts[i].name != NULL; i++)
		if (strcmp(counts[i].name, name) == 0) n = counts[i].n;
	pthread_mutex_unlock(&local);
	return n;
}

int ncclGetVersion(int *v) { count("ncclGetVersion"); *v = 22809; return 0; }

int ncclGetUniqueId(ncclUniqueId *id) {
	count("ncclGetUniqueId");
	memset(id->internal, 0, sizeof(id->internal));
	pthread_mutex_lock(&local);
	unsigned n = ++ids;
	pthread_mutex_unlock(&local);
	snprintf(id->internal, sizeof(id->internal), "%d-%ld-%u", (int)getpid(), (long)time(NULL), n);
	return 0;
}

// shmName names the shared memory of the group an id names.
static void shmName(const char *id, char *out) {
	uint64_t h = 1469598103934665603ULL;
	for (int i = 0; i < 128; i++) h = (h ^ (unsigned char)id[i]) * 1099511628211ULL;
	snprintf(out, 64, "/mocknccl-%016llx", (unsigned long long)h);
}

// join maps (creating it if it is the first) the group an id names.
static struct group *join(const char *id, int nranks, char *name) {
	shmName(id, name);
	pthread_mutex_lock(&local);
	for (struct mapping *m = mappings; m != NULL; m = m->next) {
		if (strcmp(m->name, name) == 0) {
			pthread_mutex_unlock(&local);
			return m->g;
		}
	}
	int created = 1;
	int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		created = 0;
		fd = shm_open(name, O_RDWR, 0600);
	}
	struct group *g = NULL;
	if (fd >= 0 && (!created || ftruncate(fd, sizeof(struct group)) == 0)) {
		// An opener may come before the creator's ftruncate: wait for it.
		struct stat st;
		for (int i = 0; i < 10000 && fstat(fd, &st) == 0 && (size_t)st.st_size < sizeof(struct group); i++) usleep(100);
		void *p = mmap(NULL, sizeof(struct group), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p != MAP_FAILED) g = p;
	}
	if (fd >= 0) close(fd);
	if (g != NULL && created) {
		pthread_mutexattr_t ma;
		pthread_condattr_t ca;
		pthread_mutexattr_init(&ma);
		pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
		pthread_condattr_init(&ca);
		pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
		pthread_mutex_init(&g->mu, &ma);
		pthread_cond_init(&g->cv, &ca);
		g->nranks = nranks;
		__atomic_store_n(&g->ready, 1, __ATOMIC_RELEASE);
	}
	while (g != NULL && !__atomic_load_n(&g->ready, __ATOMIC_ACQUIRE)) usleep(100);
	if (g != NULL) {
		struct mapping *m = calloc(1, sizeof(*m));
		strcpy(m->name, name);
		m->g = g;
		m->next = mappings;
		mappings = m;
	}
	pthread_mutex_unlock(&local);
	return g;
}

static struct comm *newComm(struct group *g, const char *name, int rank, int device) {
	struct comm *c = calloc(1, sizeof(*c));
	c->magic = MAGIC;
	c->g = g;
	c->rank = rank;
	c->device = device;
	strcpy(c->name, name);
	return c;
}

// barrier waits, with g->mu held, for every rank of g; nonzero if aborted.
static int barrier(struct group *g) {
	unsigned long gen = g->gen;
	if (++g->arrived == g->nranks) {
		g->arrived = 0;
		g->gen++;
		pthread_cond_broadcast(&g->cv);
		return 0;
	}
	while (gen == g->gen && !g->aborted) pthread_cond_wait(&g->cv, &g->mu);
	return gen == g->gen;
}

int ncclCommInitRank(struct comm **out, int nranks, ncclUniqueId id, int rank) {
	count("ncclCommInitRank");
	*out = NULL;
	if (nranks < 1 || nranks > MAXR || rank < 0 || rank >= nranks) return 4;
	char name[64];
	struct group *g = join(id.internal, nranks, name);
	if (g == NULL) return 2;
	pthread_mutex_lock(&g->mu);
	if (g->nranks != nranks || g->joined >= nranks) {
		pthread_mutex_unlock(&g->mu);
		return 5;
	}
	g->joined++;
	g->refs++;
	int r = barrier(g);
	pthread_mutex_unlock(&g->mu);
	if (r) return 3;
	*out = newComm(g, name, rank, rank);
	return 0;
}

static int ok(struct comm *c) { return c != NULL && c->magic == MAGIC; }

int ncclCommSplit(struct comm *c, int color, int key, struct comm **out, void *config) {
	(void)config;
	count("ncclCommSplit");
	*out = NULL;
	if (!ok(c)) return 5;
	struct group *g = c->g;
	pthread_mutex_lock(&g->mu);
	g->color[c->rank] = color;
	g->key[c->rank] = key;
	if (barrier(g)) {
		pthread_mutex_unlock(&g->mu);
		return 3;
	}
	int n = 0, rank = 0;
	for (int r = 0; r < g->nranks; r++) {
		if (g->color[r] != color) continue;
		n++;
		if (g->key[r] < key || (g->key[r] == key && r < c->rank)) rank++;
	}
	char id[128];
	memset(id, 0, sizeof id);
	snprintf(id, sizeof id, "%s/split%lu/color%d", c->name, g->gen, color);
	barrier(g);
	pthread_mutex_unlock(&g->mu);
	if (color < 0) return 0;
	ncclUniqueId nid;
	memcpy(nid.internal, id, sizeof id);
	int r = ncclCommInitRank(out, n, nid, rank);
	if (r == 0) (*out)->device = c->device;
	return r;
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

// reduce folds element base+i of every rank's stage into tmp[i].
static void reduce(struct group *g, int dtype, int op, size_t base, size_t n, void *tmp) {
	for (size_t i = 0; i < n; i++) {
		double acc = get(dtype, g->stage[0], base + i);
		for (int r = 1; r < g->nranks; r++) {
			double x = get(dtype, g->stage[r], base + i);
			acc = (op == 0 || op == 4) ? acc + x : op == 2 ? (x > acc ? x : acc) : (x < acc ? x : acc);
		}
		if (op == 4) acc /= g->nranks;
		put(dtype, tmp, i, acc);
	}
}

// enter checks a collective whose rank stages bytes and takes the group's
// lock.
static int enter(const char *name, struct comm *c, int dtype, int op, size_t bytes) {
	count(name);
	if (!ok(c)) return 5;
	if (c->pending) {
		count("call in progress");
		return 5;
	}
	if (size_of(dtype) == 0 || op < 0 || op > 4 || op == 1 || (op == 4 && dtype != 7)) return 4;
	if (bytes > STAGE) return 4;
	pthread_mutex_lock(&c->g->mu);
	return 0;
}

// finish copies tmp to recv after the second barrier and unlocks; on a
// nonblocking communicator the copy waits for the polls.
static int finish(struct comm *c, void *recv, void *tmp, size_t bytes) {
	int r = barrier(c->g);
	pthread_mutex_unlock(&c->g->mu);
	if (r == 0 && nonblocking()) {
		c->pending = 3;
		c->precv = recv;
		c->ptmp = tmp;
		c->pbytes = bytes;
		return 7;
	}
	if (r == 0 && recv != NULL) memcpy(recv, tmp, bytes);
	free(tmp);
	return r ? 3 : 0;
}

static __thread int grouped;

int ncclAllReduce(const void *send, void *recv, size_t n, int dtype, int op, struct comm *c, void *stream) {
	(void)stream;
	if (grouped) count("ncclAllReduce in a group");
	size_t bytes = n * size_of(dtype);
	int r = enter("ncclAllReduce", c, dtype, op, bytes);
	if (r) return r;
	struct group *g = c->g;
	memcpy(g->stage[c->rank], send, bytes);
	void *tmp = malloc(bytes + 1);
	if (barrier(g) == 0) reduce(g, dtype, op, 0, n, tmp);
	return finish(c, recv, tmp, bytes);
}

int ncclReduceScatter(const void *send, void *recv, size_t n, int dtype, int op, struct comm *c, void *stream) {
	(void)stream;
	size_t bytes = n * size_of(dtype);
	int r = enter("ncclReduceScatter", c, dtype, op, bytes * (ok(c) ? c->g->nranks : 1));
	if (r) return r;
	struct group *g = c->g;
	memcpy(g->stage[c->rank], send, bytes * g->nranks);
	void *tmp = malloc(bytes + 1);
	if (barrier(g) == 0) reduce(g, dtype, op, (size_t)c->rank * n, n, tmp);
	return finish(c, recv, tmp, bytes);
}

int ncclAllGather(const void *send, void *recv, size_t n, int dtype, struct comm *c, void *stream) {
	(void)stream;
	// Real NCCL defers a collective issued inside a group to its end: a
	// caller that waits for it there waits forever. Count such calls.
	if (grouped) count("ncclAllGather in a group");
	size_t bytes = n * size_of(dtype);
	int r = enter("ncclAllGather", c, dtype, 0, bytes);
	if (r) return r;
	struct group *g = c->g;
	memcpy(g->stage[c->rank], send, bytes);
	char *tmp = malloc(bytes * g->nranks + 1);
	if (barrier(g) == 0)
		for (int q = 0; q < g->nranks; q++) memcpy(tmp + (size_t)q * bytes, g->stage[q], bytes);
	r = finish(c, recv, tmp, bytes * g->nranks);
	if (r == 7 && c->gathers++ == 0 && env_on("MOCKNCCL_STUCK")) c->pending = -1;
	return r;
}

int ncclBroadcast(const void *send, void *recv, size_t n, int dtype, int root, struct comm *c, void *stream) {
	(void)stream;
	size_t bytes = n * size_of(dtype);
	if (ok(c) && (root < 0 || root >= c->g->nranks)) return 4;
	int r = enter("ncclBroadcast", c, dtype, 0, bytes);
	if (r) return r;
	struct group *g = c->g;
	if (c->rank == root) memcpy(g->stage[root], send, bytes);
	char *tmp = malloc(bytes + 1);
	if (barrier(g) == 0) memcpy(tmp, g->stage[root], bytes);
	return finish(c, recv, tmp, bytes);
}

// ncclAlltoAll (NCCL 2.28): block q of each rank's send goes to rank q.
int ncclAlltoAll(const void *send, void *recv, size_t n, int dtype, struct comm *c, void *stream) {
	(void)stream;
	size_t bytes = n * size_of(dtype);
	int r = enter("ncclAlltoAll", c, dtype, 0, bytes * (ok(c) ? c->g->nranks : 1));
	if (r) return r;
	struct group *g = c->g;
	memcpy(g->stage[c->rank], send, bytes * g->nranks);
	char *tmp = malloc(bytes * g->nranks + 1);
	if (barrier(g) == 0)
		for (int q = 0; q < g->nranks; q++)
			memcpy(tmp + (size_t)q * bytes, (const char *)g->stage[q] + (size_t)c->rank * bytes, bytes);
	return finish(c, recv, tmp, bytes * g->nranks);
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
	size_t bytes = n * size_of(dtype);
	if (bytes > P2P) return 4;
	pthread_mutex_lock(&c->g->mu);
	memcpy(c->g->p2p[c->rank][peer], buf, bytes);
	c->g->p2pbytes[c->rank][peer] = bytes;
	pthread_mutex_unlock(&c->g->mu);
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
	pthread_mutex_lock(&g->mu);
	int r = barrier(g);
	if (r == 0) {
		for (int i = 0; i < nrecvs; i++) memcpy(recvs[i].buf, g->p2p[recvs[i].peer][gcomm->rank], recvs[i].bytes);
		r = barrier(g);
	}
	pthread_mutex_unlock(&g->mu);
	nrecvs = 0;
	gcomm = NULL;
	return r == 0 ? 0 : 3;
}

// release ends a communicator; the last of a group unlinks its memory.
static int release(const char *name, struct comm *c) {
	count(name);
	if (c == NULL) return 0;
	if (c->magic != MAGIC) return 5;
	c->magic = 0;
	if (c->pending) free(c->ptmp);
	struct group *g = c->g;
	pthread_mutex_lock(&g->mu);
	if (strcmp(name, "ncclCommAbort") == 0) g->aborted = 1;
	int last = --g->refs == 0;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
	if (last) shm_unlink(c->name);
	return 0;
}

int ncclCommAbort(struct comm *c) { return release("ncclCommAbort", c); }
int ncclCommDestroy(struct comm *c) { return release("ncclCommDestroy", c); }
int ncclCommFinalize(struct comm *c) { count("ncclCommFinalize"); return ok(c) ? 0 : 5; }
int ncclCommRevoke(struct comm *c, int flags) { count("ncclCommRevoke"); return ok(c) && flags == 0 ? 0 : 5; }
// ncclCommShrink makes no communicator here: enough for what the library
// does before it forwards a shrink.
int ncclCommShrink(struct comm *c, int *exclude, int n, struct comm **out, void *config, int flags) {
	(void)exclude, (void)n, (void)config, (void)flags;
	count("ncclCommShrink");
	if (!ok(c)) return 5;
	*out = NULL;
	return 0;
}

int ncclCommGetAsyncError(struct comm *c, int *state) {
	count("ncclCommGetAsyncError");
	if (!ok(c)) return 4;
	if (c->pending > 0 && --c->pending == 0) {
		if (c->precv != NULL) memcpy(c->precv, c->ptmp, c->pbytes);
		free(c->ptmp);
	}
	*state = c->pending ? 7 : 0;
	return 0;
}

const char *ncclGetErrorString(int r) { return r == 5 ? "invalid usage (mock)" : "other (mock)"; }
const char *ncclGetLastError(void *c) { (void)c; return "mock last error"; }

int ncclMemAlloc(void **p, size_t n) { count("ncclMemAlloc"); *p = calloc(1, n); return *p ? 0 : 2; }
int ncclMemFree(void *p) { count("ncclMemFree"); free(p); return 0; }
