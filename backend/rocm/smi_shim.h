//go:build rocm

// smi_shim.h declares the C side of the ROCm backend's binding to the
// system management libraries: amdsmi (libamd_smi.so) and, where it is
// absent, rocm-smi (librocm_smi64.so), both opened with dlopen at run time.
// Only what the link matrix needs is bound: initialisation, the devices and
// their PCI bus ids, P2P accessibility and link type of a pair.
//
// Every function returns the library's status (amdsmi_status_t or
// rsmi_status_t, both int-sized; 0 is success).

#ifndef INTRANODE_SMI_SHIM_H
#define INTRANODE_SMI_SHIM_H

#include <stddef.h>
#include <stdint.h>

enum {
	INS_SUCCESS = 0,
	INS_NOT_SUPPORTED = 2,
	INS_MAX_DEVICES = 256,
};

// The libraries; every function takes the one it works on. ins_load opens
// it and resolves its entry points (once; later calls return the first
// answer): 0 on success, 1 when it cannot be opened, 2 when an entry point
// is missing; err then holds the reason.
enum {
	INS_AMDSMI = 0,
	INS_RSMI = 1,
};
int ins_load(int which, const char *path, char *err, size_t errlen);

// ins_init initialises a loaded library and, for amdsmi, collects the GPU
// processor handles of every socket.
int ins_init(int which);
int ins_shutdown(int which);
const char *ins_status_string(int which, int status);

int ins_device_count(int which, uint32_t *count);
int ins_bdf(int which, uint32_t dev, uint64_t *bdfid);
int ins_p2p(int which, uint32_t src, uint32_t dst, int *accessible);
int ins_link_type(int which, uint32_t src, uint32_t dst, uint64_t *hops, int *type);

#endif
