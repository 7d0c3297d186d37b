// shim_decl.h declares the shims of shim_impl.h under a backend's names. A
// backend's shim header includes it after defining GPU_FN and gpu_result_t
// (see shim_impl.h).

// The loader and the entry points each backend writes over its own library
// (shim.c, hip_shim.c), declared once. GPU_FN(load) returns 0 on success, 1
// when the library cannot be opened and 2 when a required entry point is
// missing; err then holds the reason. GPU_FN(entry_name) names the entry
// point whose slot a shim stored in its at argument (NULL for none).
int GPU_FN(load)(const char *path, char *err, size_t errlen);
const char *GPU_FN(entry_name)(uintptr_t slot);
const char *GPU_FN(error_name)(gpu_result_t r);
const char *GPU_FN(error_string)(gpu_result_t r);
gpu_result_t GPU_FN(init)(void);
gpu_result_t GPU_FN(driver_version)(int *version);
gpu_result_t GPU_FN(device_count)(int *count);
gpu_result_t GPU_FN(device_name)(int dev, char *buf, int len);
gpu_result_t GPU_FN(device_pci_bus_id)(int dev, char *buf, int len);
gpu_result_t GPU_FN(device_total_mem)(int dev, size_t *bytes);
gpu_result_t GPU_FN(device_uuid)(int dev, unsigned char *uuid);
gpu_result_t GPU_FN(device_attr)(int dev, int attr, int *value);
gpu_result_t GPU_FN(can_access_peer)(int dev, int peer, int *can);

// The runtime shims, called through their table (struct gpu_runtime).
const struct gpu_runtime *GPU_FN(runtime)(void);

gpu_result_t GPU_FN(vmm_release)(uintptr_t c, const gpu_vmm *m, uintptr_t *at);
gpu_result_t GPU_FN(vmm_export_fd)(uintptr_t c, uint64_t handle, int *fd, uintptr_t *at);
