// The private side of include/intranode.h: the communicator handle's
// layout and the helpers the Go exports call.
#ifndef INTRANODE_CABI_H
#define INTRANODE_CABI_H

#define INTRANODE_BUILDING_LIBRARY 1
#include <stdint.h>
#include <stdlib.h>
#include "../include/intranode.h"

// INTRANODE_COMM_MAGIC marks a live handle; a destroyed one is zeroed
// before it is freed, so that a use after destroy is caught where the
// memory has not been reused.
#define INTRANODE_COMM_MAGIC 0x696e74726e636f6dULL

struct intranodeComm {
	uint64_t magic;
	uint64_t id; // the Go side's key
};

__attribute__((visibility("hidden"))) void intranode_set_last_error(const char *msg, size_t n);

// intranode_ptr turns a stream handle or device address kept in Go as an
// integer into the pointer C expects.
static inline void *intranode_ptr(uintptr_t v) { return (void *)v; }

#endif
