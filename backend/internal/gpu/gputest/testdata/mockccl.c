// mockccl.c: a CPU stand-in for libnccl.so.2 (and, built under that
// name, librccl.so.1) with the entry points the backends resolve
// (ccl_impl.h). Its collectives work on the CUDA mock driver's "device"
// memory (host memory) for ranks that are threads of one process, f32 and
// i32 only (4-byte elements), synchronously; a group of sends and receives
// runs at ncclGroupEnd. Like the mock driver it is strict: init needs a
// current context, the all-reduce's stream must belong to the current
// context, and aborting a communicator twice fails; an abort ends a group
// call of the same group still waiting for a peer (ncclInternalError).
// MOCK_NCCL_ASYNC makes ncclCommGetAsyncError report that result.
// ncclCommInitRankConfig with blocking=0 makes a non-blocking communicator
// as NCCL does: it returns ncclInProgress until every rank has joined,
// which ncclCommGetAsyncError reports; MOCK_NCCL_INIT_FAIL_RANK=r makes
// rank r's init fail (ncclSystemError) without joining, a rank that dies
// inside creation. ncclCommSplit duplicates a communicator (one color, key
// = rank), non-blocking when its parent is, pending on the parent until
// every rank has split (it returns ncclSuccess even then, as NCCL 2.28
// does, and writes the duplicate when done); with splitShare the duplicate shares its parent's
// connections, without it it has none; MOCK_NCCL_SPLIT_FAIL_RANK=r makes
// rank r's split fail without joining; aborting a parent whose split is
// pending writes the half-made child, as NCCL does. MOCK_NCCL_LIVE=path
// keeps in that file the number of communicators made and not aborted. NCCL
// connects a communicator's sends and receives at their first group; the
// mock refuses (ncclInvalidUsage) a first group that comes after one of
// the communicator's collectives, as the backends make those connections
// when they create a communicator, before any call (gpu.CCL's connect). Without
// the mock driver loaded (the ROCm tests) only its loader-facing calls are
// used: version, unique id, error strings.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char internal[128]; } ncclUniqueId;

enum { MAXR = 8, MAGIC = 0x6e63636c };

struct group {
	char id[128];
	int nranks, joined, arrived, aborted;
	unsigned long gen;
	const void *send[MAXR];
	const void *to[MAXR][MAXR]; // to[src][dst]: what src sends dst in a group
	struct group *next;
};

struct comm {
	int magic;
	struct group *g;
	int rank;
	int blocking;
	int pending;   // a non-blocking creation waiting for its peers
	int colls;     // collectives called, sends and receives aside
	int connected; // a group of sends and receives has run (on share)
	struct comm *share; // whose connections it uses: itself, or its parent's (splitShare)
	int splits;    // ncclCommSplit calls made of it
	struct comm *child, **child_out; // a non-blocking split still pending
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct group *groups;
static unsigned char ids;
static int (*ctx_sync)(void);
static int (*stream_query)(void *);

// driver binds the mock driver's checks, when the process has loaded it.
static int driver(void) {
	if (ctx_sync == NULL) {
		void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
		if (cu == NULL) return 0;
		ctx_sync = (int (*)(void))dlsym(cu, "cuCtxSynchronize");
		stream_query = (int (*)(void *))dlsym(cu, "cuStreamQuery");
	}
	return ctx_sync != NULL && stream_query != NULL;
}

int ncclGetVersion(int *v) { *v = 22809; return 0; }

int ncclGetUniqueId(ncclUniqueId *id) {
	pthread_mutex_lock(&mu);
	memset(id->internal, 7, sizeof(id->internal));
	id->internal[127] = (char)++ids;
	pthread_mutex_unlock(&mu);
	return 0;
}

// join adds rank to the group of id, with mu held; it returns the group, or
// NULL when the rank cannot join (*r says why).
static struct group *join(int nranks, ncclUniqueId id, int rank, int *r) {
	*r = 0;
	if (nranks < 1 || nranks > MAXR || rank < 0 || rank >= nranks) {
		*r = 4;
		return NULL;
	}
	if (driver() && ctx_sync() != 0) {
		*r = 1;
		return NULL;
	}
	struct group *g = groups;
	while (g != NULL && memcmp(g->id, id.internal, sizeof(g->id)) != 0) g = g->next;
	if (g == NULL) {
		g = calloc(1, sizeof(*g));
		memcpy(g->id, id.internal, sizeof(g->id));
		g->nranks = nranks;
		g->next = groups;
		groups = g;
	}
	if (g->nranks != nranks || g->joined >= nranks) {
		*r = 5;
		return NULL;
	}
	if (++g->joined == nranks) pthread_cond_broadcast(&cv);
	return g;
}

// count_live adds d to the communicators made and not yet aborted, with mu
// held, and writes the number to the file MOCK_NCCL_LIVE names, if any.
static int live;
static void count_live(int d) {
	live += d;
	const char *path = getenv("MOCK_NCCL_LIVE");
	if (path == NULL) return;
	FILE *f = fopen(path, "w");
	if (f == NULL) return;
	fprintf(f, "%d\n", live);
	fclose(f);
}

static struct comm *newcomm(struct group *g, int rank, int blocking) {
	count_live(1);
	struct comm *c = calloc(1, sizeof(*c));
	c->magic = MAGIC;
	c->g = g;
	c->rank = rank;
	c->blocking = blocking;
	c->share = c;
	return c;
}

// fails says whether the environment variable env names rank.
static int fails(const char *env, int rank) {
	const char *v = getenv(env);
	return v != NULL && atoi(v) == rank;
}

// init_rank makes rank's communicator: a blocking one returns once every
// rank has joined, a non-blocking one at once, pending (ncclInProgress)
// until they have.
static int init_rank(struct comm **out, int nranks, ncclUniqueId id, int rank, int blocking) {
	*out = NULL;
	int r;
	if (fails("MOCK_NCCL_INIT_FAIL_RANK", rank)) return 2;
	pthread_mutex_lock(&mu);
	struct group *g = join(nranks, id, rank, &r);
	if (g == NULL) {
		pthread_mutex_unlock(&mu);
		return r;
	}
	while (blocking && g->joined < nranks) pthread_cond_wait(&cv, &mu);
	struct comm *c = newcomm(g, rank, blocking);
	c->pending = g->joined < nranks;
	pthread_mutex_unlock(&mu);
	*out = c;
	return c->pending ? 7 : 0;
}

int ncclCommInitRank(struct comm **out, int nranks, ncclUniqueId id, int rank) {
	return init_rank(out, nranks, id, rank, 1);
}

// The fields of ncclConfig_t up to NCCL 2.18's.
struct config {
	size_t size;
	unsigned int magic, version;
	int blocking, cgaClusterSize, minCTAs, maxCTAs;
	const char *netName;
	int splitShare; // 2.18 and newer
};

int ncclCommInitRankConfig(struct comm **out, int nranks, ncclUniqueId id, int rank, struct config *cfg) {
	if (cfg == NULL || cfg->magic != 0xcafebeef || cfg->version < 21400 || cfg->size < sizeof(*cfg)) return 4;
	return init_rank(out, nranks, id, rank, cfg->blocking);
}

// split_done writes a pending split's child once every rank has split,
// with mu held; it returns whether the split is still pending.
static int split_done(struct comm *p) {
	if (p->child == NULL) return 0;
	if (p->child->g->joined < p->child->g->nranks) return 1;
	*p->child_out = p->child;
	p->child = NULL;
	p->child_out = NULL;
	return 0;
}

int ncclCommSplit(struct comm *p, int color, int key, struct comm **out, struct config *cfg) {
	if (p == NULL || p->magic != MAGIC || out == NULL || color < 0 || key != p->rank) return 4;
	if (cfg != NULL && (cfg->magic != 0xcafebeef || cfg->version < 21800 || cfg->size < sizeof(*cfg))) return 4;
	*out = NULL;
	if (fails("MOCK_NCCL_SPLIT_FAIL_RANK", p->rank)) return 2;
	pthread_mutex_lock(&mu);
	if (p->child != NULL) {
		pthread_mutex_unlock(&mu);
		return 5;
	}
	ncclUniqueId id;
	memcpy(id.internal, p->g->id, sizeof(id.internal));
	id.internal[0] ^= (char)++p->splits; // every rank splits in the same order
	int r;
	struct group *g = join(p->g->nranks, id, p->rank, &r);
	if (g == NULL) {
		pthread_mutex_unlock(&mu);
		return r;
	}
	struct comm *c = newcomm(g, p->rank, cfg != NULL ? cfg->blocking : p->blocking);
	if (cfg != NULL && cfg->splitShare) c->share = p->share;
	p->child = c;
	p->child_out = out;
	while (p->blocking && split_done(p)) pthread_cond_wait(&cv, &mu);
	split_done(p);
	pthread_mutex_unlock(&mu);
	return 0;
}

// barrier waits, with mu held, until every rank of g has arrived, or a
// communicator of g is aborted (then it returns nonzero).
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

// fold is one step of op (ncclSum or ncclAvg, which divides at the end,
// ncclMax, ncclMin); avg finishes an ncclAvg.
#define fold(op, acc, x) ((op) == 0 || (op) == 4 ? (acc) + (x) : (op) == 2 ? ((x) > (acc) ? (x) : (acc)) : ((x) < (acc) ? (x) : (acc)))
#define avg(op, acc, n) ((op) == 4 ? (acc) / (n) : (acc))

#define REDUCE(T)                                                                        \
	for (size_t i = 0; i < count; i++) {                                                 \
		T acc = ((const T *)g->send[0])[i];                                              \
		for (int r = 1; r < g->nranks; r++) {                                            \
			acc = fold(op, acc, ((const T *)g->send[r])[i]);                             \
		}                                                                                \
		((T *)tmp)[i] = avg(op, acc, (T)g->nranks);                                      \
	}

int ncclAllReduce(const void *send, void *recv, size_t count, int dtype, int op, struct comm *c, void *stream) {
	if (c == NULL || c->magic != MAGIC) return 5;
	if ((dtype != 7 && dtype != 2) || op < 0 || op == 1 || op > 4) return 4;
	pthread_mutex_lock(&mu);
	if (driver() && stream_query(stream) != 0) {
		pthread_mutex_unlock(&mu);
		return 1;
	}
	struct group *g = c->g;
	c->colls++;
	g->send[c->rank] = send;
	barrier(g);
	void *tmp = malloc(count * 4 + 1);
	if (dtype == 7) {
		REDUCE(float)
	} else {
		REDUCE(int)
	}
	barrier(g);
	memcpy(recv, tmp, count * 4);
	free(tmp);
	pthread_mutex_unlock(&mu);
	return 0;
}

// enter and leave bracket a collective: check the communicator, the dtype
// and the stream, and take mu.
static int enter(struct comm *c, int dtype, void *stream) {
	if (c == NULL || c->magic != MAGIC) return 5;
	if (dtype != 7 && dtype != 2) return 4;
	pthread_mutex_lock(&mu);
	if (driver() && stream_query(stream) != 0) {
		pthread_mutex_unlock(&mu);
		return 1;
	}
	return 0;
}

int ncclReduceScatter(const void *send, void *recv, size_t count, int dtype, int op, struct comm *c, void *stream) {
	if (op < 0 || op == 1 || op > 4) return 4;
	int r = enter(c, dtype, stream);
	if (r != 0) return r;
	struct group *g = c->g;
	c->colls++;
	g->send[c->rank] = send;
	barrier(g);
	void *tmp = malloc(count * 4 + 1);
	const size_t base = (size_t)c->rank * count;
	for (size_t i = 0; i < count; i++) {
		if (dtype == 7) {
			float acc = ((const float *)g->send[0])[base + i];
			for (int q = 1; q < g->nranks; q++) acc = fold(op, acc, ((const float *)g->send[q])[base + i]);
			((float *)tmp)[i] = avg(op, acc, (float)g->nranks);
		} else {
			int acc = ((const int *)g->send[0])[base + i];
			for (int q = 1; q < g->nranks; q++) acc = fold(op, acc, ((const int *)g->send[q])[base + i]);
			((int *)tmp)[i] = avg(op, acc, g->nranks);
		}
	}
	barrier(g);
	memcpy(recv, tmp, count * 4);
	free(tmp);
	pthread_mutex_unlock(&mu);
	return 0;
}

int ncclAllGather(const void *send, void *recv, size_t count, int dtype, struct comm *c, void *stream) {
	int r = enter(c, dtype, stream);
	if (r != 0) return r;
	struct group *g = c->g;
	c->colls++;
	void *mine = malloc(count * 4 + 1);
	memcpy(mine, send, count * 4);
	g->send[c->rank] = mine;
	barrier(g);
	for (int q = 0; q < g->nranks; q++) memcpy((char *)recv + (size_t)q * count * 4, g->send[q], count * 4);
	barrier(g);
	free(mine);
	pthread_mutex_unlock(&mu);
	return 0;
}

int ncclBroadcast(const void *send, void *recv, size_t count, int dtype, int root, struct comm *c, void *stream) {
	if (root < 0 || root >= c->g->nranks) return 4;
	int r = enter(c, dtype, stream);
	if (r != 0) return r;
	struct group *g = c->g;
	c->colls++;
	g->send[c->rank] = send;
	barrier(g);
	if (c->rank != root) memcpy(recv, g->send[root], count * 4);
	barrier(g);
	if (c->rank == root && recv != send) memcpy(recv, send, count * 4);
	pthread_mutex_unlock(&mu);
	return 0;
}

// A group of sends and receives, per thread (each mock rank is a thread).
static __thread int grouped;
static __thread struct comm *gcomm;
static __thread struct { void *buf; int peer; size_t bytes; } recvs[MAXR];
static __thread int nrecvs;

int ncclGroupStart(void) {
	grouped++;
	return 0;
}

int ncclSend(const void *buf, size_t count, int dtype, int peer, struct comm *c, void *stream) {
	int r = enter(c, dtype, stream);
	if (r != 0) return r;
	if (!grouped || peer < 0 || peer >= c->g->nranks) {
		pthread_mutex_unlock(&mu);
		return 5;
	}
	c->g->to[c->rank][peer] = buf;
	gcomm = c;
	pthread_mutex_unlock(&mu);
	return 0;
}

int ncclRecv(void *buf, size_t count, int dtype, int peer, struct comm *c, void *stream) {
	if (c == NULL || c->magic != MAGIC) return 5;
	if (!grouped || peer < 0 || peer >= c->g->nranks || nrecvs == MAXR) return 5;
	(void)dtype;
	(void)stream;
	recvs[nrecvs].buf = buf;
	recvs[nrecvs].peer = peer;
	recvs[nrecvs].bytes = count * 4;
	nrecvs++;
	gcomm = c;
	return 0;
}

int ncclGroupEnd(void) {
	if (grouped == 0) return 5;
	if (--grouped > 0 || gcomm == NULL) return 0;
	struct group *g = gcomm->g;
	pthread_mutex_lock(&mu);
	if (!gcomm->share->connected && gcomm->colls > 0) {
		pthread_mutex_unlock(&mu);
		nrecvs = 0;
		gcomm = NULL;
		return 5; // connected by a call, not at creation
	}
	gcomm->share->connected = 1;
	int r = barrier(g);
	if (r == 0) {
		for (int i = 0; i < nrecvs; i++) memcpy(recvs[i].buf, g->to[recvs[i].peer][gcomm->rank], recvs[i].bytes);
		r = barrier(g);
	}
	pthread_mutex_unlock(&mu);
	nrecvs = 0;
	gcomm = NULL;
	return r == 0 ? 0 : 3; // an aborted group: ncclInternalError
}

int ncclCommAbort(struct comm *c) {
	if (c == NULL) return 0;
	if (c->magic != MAGIC) return 5;
	if (driver() && ctx_sync() != 0) return 1;
	pthread_mutex_lock(&mu);
	c->magic = 0;
	count_live(-1);
	// Like NCCL's abort flag: a call of the group blocked waiting for a
	// peer returns.
	c->g->aborted = 1;
	if (c->child != NULL) {
		// NCCL's abort joins a split still in flight, which then writes
		// the communicator it was making, half made: the caller must
		// read the slot after the abort and abort that one too.
		*c->child_out = c->child;
		c->child = NULL;
		c->child_out = NULL;
	}
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	return 0;
}

int ncclCommGetAsyncError(struct comm *c, int *state) {
	if (c == NULL || c->magic != MAGIC) return 4;
	pthread_mutex_lock(&mu);
	if (c->pending && c->g->joined == c->g->nranks) c->pending = 0;
	int pending = c->pending || split_done(c);
	pthread_mutex_unlock(&mu);
	const char *e = getenv("MOCK_NCCL_ASYNC");
	*state = pending ? 7 : e != NULL ? atoi(e) : 0;
	return 0;
}

const char *ncclGetErrorString(int r) { return r == 5 ? "invalid usage (mock)" : "other (mock)"; }
const char *ncclGetLastError(void *c) { (void)c; return "mock last error"; }
