//go:build rocm

// smi_shim.c binds amdsmi or rocm-smi at run time. The declarations follow
// amd_smi/amdsmi.h and rocm_smi/rocm_smi.h; the few types needed are
// declared here so building needs no ROCm headers. amdsmi_topo_get_link_type
// takes amdsmi_io_link_type_t in older releases and amdsmi_link_type_t in
// newer ones: both are int-sized and number XGMI 2 and PCIe 1.

#include "smi_shim.h"
#include "../internal/gpu/shim.h"

#include <stdbool.h>

typedef void *amdsmi_socket_handle;
typedef void *amdsmi_processor_handle;

enum {
	AMDSMI_INIT_AMD_GPUS = 1 << 1,
	AMDSMI_PROCESSOR_TYPE_AMD_GPU = 1,
};

// loaded[which] is 1 once ins_load succeeded for the library.
static int loaded[2];

static struct {
	int (*init)(uint64_t);
	int (*shut_down)(void);
	int (*status_code_to_string)(int, const char **);
	int (*get_socket_handles)(uint32_t *, amdsmi_socket_handle *);
	int (*get_processor_handles)(amdsmi_socket_handle, uint32_t *, amdsmi_processor_handle *);
	int (*get_processor_type)(amdsmi_processor_handle, int *); // optional
	int (*get_gpu_bdf_id)(amdsmi_processor_handle, uint64_t *);
	int (*is_P2P_accessible)(amdsmi_processor_handle, amdsmi_processor_handle, bool *);
	int (*topo_get_link_type)(amdsmi_processor_handle, amdsmi_processor_handle, uint64_t *, int *);
} amdsmi;

static amdsmi_processor_handle gpus[INS_MAX_DEVICES];
static uint32_t ngpus;

static struct {
	int (*init)(uint64_t);
	int (*shut_down)(void);
	int (*status_string)(int, const char **);
	int (*num_monitor_devices)(uint32_t *);
	int (*dev_pci_id_get)(uint32_t, uint64_t *);
	int (*is_P2P_accessible)(uint32_t, uint32_t, bool *);
	int (*topo_get_link_type)(uint32_t, uint32_t, uint64_t *, int *);
} rsmi;

int ins_load(int which, const char *path, char *err, size_t errlen) {
	void *lib = NULL;
	int r;
	if (loaded[which]) {
		return 0;
	}
	// Both libraries may leave threads behind: gpu_load never unmaps them.
	if (which == INS_AMDSMI) {
		static const struct gpu_entry entries[] = {
			{(void **)&amdsmi.init, "amdsmi_init"},
			{(void **)&amdsmi.shut_down, "amdsmi_shut_down"},
			{(void **)&amdsmi.status_code_to_string, "amdsmi_status_code_to_string"},
			{(void **)&amdsmi.get_socket_handles, "amdsmi_get_socket_handles"},
			{(void **)&amdsmi.get_processor_handles, "amdsmi_get_processor_handles"},
			{(void **)&amdsmi.get_gpu_bdf_id, "amdsmi_get_gpu_bdf_id"},
			{(void **)&amdsmi.is_P2P_accessible, "amdsmi_is_P2P_accessible"},
			{(void **)&amdsmi.topo_get_link_type, "amdsmi_topo_get_link_type"},
		};
		r = gpu_load(&lib, path, entries, GPU_LEN(entries), &amdsmi, sizeof(amdsmi), err, errlen);
		if (r != 0) return r;
		amdsmi.get_processor_type = (int (*)(amdsmi_processor_handle, int *))dlsym(lib, "amdsmi_get_processor_type");
	} else {
		static const struct gpu_entry entries[] = {
			{(void **)&rsmi.init, "rsmi_init"},
			{(void **)&rsmi.shut_down, "rsmi_shut_down"},
			{(void **)&rsmi.status_string, "rsmi_status_string"},
			{(void **)&rsmi.num_monitor_devices, "rsmi_num_monitor_devices"},
			{(void **)&rsmi.dev_pci_id_get, "rsmi_dev_pci_id_get"},
			{(void **)&rsmi.is_P2P_accessible, "rsmi_is_P2P_accessible"},
			{(void **)&rsmi.topo_get_link_type, "rsmi_topo_get_link_type"},
		};
		r = gpu_load(&lib, path, entries, GPU_LEN(entries), &rsmi, sizeof(rsmi), err, errlen);
		if (r != 0) return r;
	}
	loaded[which] = 1;
	return 0;
}

int ins_init(int which) {
	if (which == INS_RSMI) {
		return rsmi.init(0);
	}
	int r = amdsmi.init(AMDSMI_INIT_AMD_GPUS);
	if (r != INS_SUCCESS) return r;
	uint32_t nsockets = 0;
	r = amdsmi.get_socket_handles(&nsockets, NULL);
	if (r != INS_SUCCESS) return r;
	amdsmi_socket_handle sockets[INS_MAX_DEVICES];
	if (nsockets > INS_MAX_DEVICES) nsockets = INS_MAX_DEVICES;
	r = amdsmi.get_socket_handles(&nsockets, sockets);
	if (r != INS_SUCCESS) return r;
	ngpus = 0;
	for (uint32_t s = 0; s < nsockets && ngpus < INS_MAX_DEVICES; s++) {
		uint32_t n = 0;
		r = amdsmi.get_processor_handles(sockets[s], &n, NULL);
		if (r != INS_SUCCESS) return r;
		amdsmi_processor_handle handles[INS_MAX_DEVICES];
		if (n > INS_MAX_DEVICES) n = INS_MAX_DEVICES;
		r = amdsmi.get_processor_handles(sockets[s], &n, handles);
		if (r != INS_SUCCESS) return r;
		for (uint32_t k = 0; k < n && ngpus < INS_MAX_DEVICES; k++) {
			int type = AMDSMI_PROCESSOR_TYPE_AMD_GPU;
			if (amdsmi.get_processor_type != NULL &&
			    amdsmi.get_processor_type(handles[k], &type) != INS_SUCCESS) {
				continue;
			}
			if (type == AMDSMI_PROCESSOR_TYPE_AMD_GPU) gpus[ngpus++] = handles[k];
		}
	}
	return INS_SUCCESS;
}

int ins_shutdown(int which) {
	return which == INS_RSMI ? rsmi.shut_down() : amdsmi.shut_down();
}

const char *ins_status_string(int which, int status) {
	const char *s = NULL;
	if (!loaded[which]) return NULL;
	int r = which == INS_RSMI ? rsmi.status_string(status, &s)
	                              : amdsmi.status_code_to_string(status, &s);
	return r == INS_SUCCESS ? s : NULL;
}

// amdsmi devices are looked up in the handle table; an index past it is
// AMDSMI_STATUS_INVAL (1), as the library would answer.
#define HANDLE(i) ((i) < ngpus ? gpus[(i)] : NULL)
#define CHECK_INDEX(i) \
	do { if ((i) >= ngpus) return 1; } while (0)

int ins_device_count(int which, uint32_t *count) {
	if (which == INS_RSMI) return rsmi.num_monitor_devices(count);
	*count = ngpus;
	return INS_SUCCESS;
}

int ins_bdf(int which, uint32_t dev, uint64_t *bdfid) {
	if (which == INS_RSMI) return rsmi.dev_pci_id_get(dev, bdfid);
	CHECK_INDEX(dev);
	return amdsmi.get_gpu_bdf_id(HANDLE(dev), bdfid);
}

int ins_p2p(int which, uint32_t src, uint32_t dst, int *accessible) {
	bool ok = false;
	int r;
	if (which == INS_RSMI) {
		r = rsmi.is_P2P_accessible(src, dst, &ok);
	} else {
		CHECK_INDEX(src);
		CHECK_INDEX(dst);
		r = amdsmi.is_P2P_accessible(HANDLE(src), HANDLE(dst), &ok);
	}
	*accessible = ok ? 1 : 0;
	return r;
}

int ins_link_type(int which, uint32_t src, uint32_t dst, uint64_t *hops, int *type) {
	*hops = 0;
	*type = 0;
	if (which == INS_RSMI) return rsmi.topo_get_link_type(src, dst, hops, type);
	CHECK_INDEX(src);
	CHECK_INDEX(dst);
	return amdsmi.topo_get_link_type(HANDLE(src), HANDLE(dst), hops, type);
}
