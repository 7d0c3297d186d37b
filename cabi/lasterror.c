// Per-thread last error and the static result strings of intranode.h.
#include <string.h>
#include "cabi.h"

static __thread char last_error[1024];

__attribute__((visibility("hidden"))) void intranode_set_last_error(const char *msg, size_t n) {
	if (n >= sizeof last_error) n = sizeof last_error - 1;
	memcpy(last_error, msg, n);
	last_error[n] = 0;
}

const char *intranodeGetLastError(void) { return last_error; }

const char *intranodeGetErrorString(intranodeResult_t r) {
	switch (r) {
	case intranodeSuccess: return "success";
	case intranodeInvalidArgument: return "invalid argument";
	case intranodeNotSupported: return "not supported";
	case intranodeUnavailable: return "unavailable";
	case intranodeTimeout: return "timeout";
	case intranodeOutOfMemory: return "out of memory";
	case intranodeNotFound: return "not found";
	case intranodeClosed: return "closed";
	case intranodePeerFailed: return "peer failed";
	case intranodeInternal: return "internal error";
	case intranodeMismatch: return "ranks made different calls";
	}
	return "unknown result code";
}
