//go:build rocm

// Package rocm is intranode's backend for AMD GPUs: devices, memory,
// streams, kernels and graphs through the HIP runtime, links through amdsmi
// or rocm-smi. It is built only with the rocm build tag and registers itself
// as backend "rocm" (priority 90, after cuda) when imported:
//
//	import _ "github.com/intranode/intranode/backend/rocm"
//
//	b, err := backend.Open(ctx, "rocm")
//
// # What it needs at run time
//
// The HIP runtime, libamdhip64.so (ROCm 5.2 or newer; $INTRANODE_HIP_LIBRARY
// names another), and for the link matrix amdsmi (libamd_smi.so) or, where
// amdsmi is absent, rocm-smi (librocm_smi64.so). None is needed to build:
// each library is opened with dlopen on first use and its entry points
// resolved by name, with the few types the backend uses declared in its own
// C shims. So `go build -tags rocm` works on a machine without ROCm, and a
// binary run where there is no runtime gets a Backend whose Probe returns an
// error matching backend.ErrUnavailable ("libamdhip64.so not found: …"),
// or, with the runtime but no GPU, "rocm: no AMD GPU: …", one line.
//
// Device attributes are read one at a time with hipDeviceGetAttribute,
// never from hipDeviceProp_t, whose layout changed in ROCm 6. The GPU's
// target name (gfx90a, gfx942), which HIP only gives inside that structure,
// comes from the kernel driver's topology in sysfs.
//
// # Devices and threads
//
// HIP keeps a current device per OS thread, and Go moves goroutines between
// threads at will, so the backend never relies on it: every C shim takes
// the device ordinal and calls hipSetDevice inside the same C call, right
// before the runtime call it wraps. That is one cgo transition per
// operation and needs no runtime.LockOSThread. The launch path packs
// arguments into a buffer the stream keeps (laid out as backend.MarshalArgs
// does, which is the AMDGPU kernel-argument layout) and passes it with
// HIP_LAUNCH_PARAM_BUFFER_POINTER.
//
// Streams are created non-blocking; synchronous copies and memsets run on
// the null stream and wait for it before returning. Graph capture uses
// hipStreamCaptureModeRelaxed, the only mode in which the capture may end on
// another OS thread.
//
// # Links
//
// LinkMatrix asks the SMI library, for every ordered pair of HIP devices,
// whether the pair is P2P accessible and how it is linked, and counts one
// link per P2P-accessible XGMI pair (kind connectivity.LinkXGMI; see
// XGMIMatrix). SMI libraries number every GPU of the host in their own
// order; HIP may see fewer (HIP_VISIBLE_DEVICES) in another order, so the
// two are matched by PCI bus id. The SMI and HIP bindings sit behind small
// interfaces (SMI, and the hipRuntime interfaces of hip.go) so that this
// logic is tested with fakes where there is no GPU; the C side (the
// loader, the shims and the GPU core's binding of them) runs in the tests
// over a mock libamdhip64 (testdata/mockhip).
//
// # Memory
//
// The kernels poll signal pads that peers write. A peer's write to
// ordinary (coarse-grained) device memory lands in memory, but a kernel of
// the owner that is already running may go on reading its own stale L2
// copy, so shareable allocations — which hold the signal pads — are
// uncached: hipMemCreate with hipMemAllocationTypeUncached, exported as a
// POSIX file descriptor (backend.HandleFD), where the runtime can make it,
// and otherwise hipExtMallocWithFlags with hipDeviceMallocUncached
// (hipDeviceMallocFinegrained on ROCm 5, which lacks the flag) exported as
// a HIP IPC memory handle. An IPC handle is 64 opaque bytes that any
// process of the host can open, which is what backend.HandleFabric carries
// through a store, so the backend declares CapHandleFabric in that mode
// and FabricSupported says whether the export works. HIP refuses to open
// an IPC handle in the process that made it, so ranks in one process map
// each other's memory by address, through peer access, and the memory is
// freed when its last user lets go. $INTRANODE_ROCM_HANDLES ("fd" or
// "ipc") forces one mode. Plain allocations use hipMalloc; host allocations
// are pinned, portable and mapped. The backend never uses managed memory.
//
// AMD GPUs have no multicast objects; MulticastSupported is false.
//
// # Kernels
//
// The built-in module (kernels.ModuleName) is the HIP build of the shared
// kernel sources, embedded by package kernels/hip for gfx90a and gfx940.
// Other targets (gfx942 is MI300X's) need the image rebuilt with a newer
// hipcc and $INTRANODE_HIP_KERNELS pointed at it; LoadModule says so.
//
// # Errors
//
// Runtime failures are *HIPError values (entry point, hipError_t number and
// name), SMI failures *SMIError values, wrapped in backend errors whose
// codes let portable code use errors.Is(err, backend.ErrOutOfMemory) and
// the like.
package rocm
