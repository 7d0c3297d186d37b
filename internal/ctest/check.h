// check.h: what the C check programs of intranode's C libraries share
// (cabi/testdata/check.c, ncclapi/testdata/check.c). A program defines
// LAST_ERROR() (its library's last-error text) before including it.
#ifndef INTRANODE_CTEST_CHECK_H
#define INTRANODE_CTEST_CHECK_H

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

// CHECK fails the program, naming the line and the library's last error.
#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);               \
			fprintf(stderr, __VA_ARGS__);                                      \
			fprintf(stderr, " (last error: %s)\n", LAST_ERROR());              \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

// OK checks that a call returned 0 (success in both libraries).
#define OK(call)                                                                           \
	do {                                                                               \
		int r_ = (int)(call);                                                      \
		CHECK(r_ == 0, "%s returned %d", #call, r_);                               \
	} while (0)

enum { MAXW = 8 };

// now is a monotonic clock in seconds.
static inline double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline void hex(const unsigned char *b, size_t n, char *out) {
	for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", b[i]);
}

static inline void unhex(const char *s, unsigned char *b, size_t n) {
	for (size_t i = 0; i < n; i++) sscanf(s + 2 * i, "%2hhx", &b[i]);
}

// run_procs starts ranks 1..world-1 as copies of this program with the
// arguments "child MODE RANK WORLD HEXID", runs rank0 here, and waits for
// every child to exit 0.
static inline void run_procs(const char *argv0, const char *mode, int world, const void *id, size_t idlen,
                             void (*rank0)(void)) {
	char idhex[2 * 256 + 1], rs[16], ws[16];
	hex((const unsigned char *)id, idlen, idhex);
	snprintf(ws, sizeof ws, "%d", world);
	pid_t pids[MAXW];
	for (int r = 1; r < world; r++) {
		snprintf(rs, sizeof rs, "%d", r);
		char *args[] = {(char *)argv0, "child", (char *)mode, rs, ws, idhex, NULL};
		CHECK(posix_spawn(&pids[r], argv0, NULL, NULL, args, environ) == 0, "spawn rank %d", r);
	}
	rank0();
	for (int r = 1; r < world; r++) {
		int st;
		CHECK(waitpid(pids[r], &st, 0) == pids[r], "wait rank %d", r);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d exited with status %d", r, st);
	}
}

#endif
