//go:build cuda

// Package cuda is intranode's backend for NVIDIA GPUs: devices, memory,
// streams, kernels and graphs through the CUDA driver API, links and fabric
// state through NVML. It is built only with the cuda build tag and registers
// itself as backend "cuda" (priority 100) when imported:
//
//	import _ "github.com/intranode/intranode/backend/cuda"
//
//	b, err := backend.Open(ctx, "cuda")
//
// # What it needs at run time
//
// The driver's libcuda.so.1 (a driver for CUDA 11.4 or newer) and, for the
// link matrix and fabric checks, libnvidia-ml.so.1. Neither is needed to
// build: the driver library is opened with dlopen on first use and every
// entry point is resolved by its versioned name (cuMemAlloc_v2,
// cuStreamBeginCapture_v2, …), with the few driver types the backend uses
// declared in its own C shim. So `go build -tags cuda` works on a machine
// without CUDA, and a binary run where there is no driver gets a Backend
// whose Probe returns an error matching backend.ErrUnavailable
// ("libcuda.so.1 not found: …"). NVML goes through
// github.com/NVIDIA/go-nvml, which loads its library the same way. The
// loaded driver library is the package's only process-wide state (with
// the NCCL library, below); it is never unloaded, because the driver keeps
// threads in it after cuInit.
//
// # Contexts and threads
//
// Each device is used through its primary context, retained by every
// Device handle (and by the Backend for its own checks) and released on
// Close. Go moves goroutines between OS threads at will, so the backend
// never relies on a context staying current: every C shim takes the context
// and calls cuCtxSetCurrent inside the same C call, right before the driver
// call it wraps. That is one cgo transition per operation and needs no
// runtime.LockOSThread. The launch path packs arguments into a stack buffer
// (laid out as backend.MarshalArgs does) and passes it with
// CU_LAUNCH_PARAM_BUFFER_POINTER, so an eager launch allocates nothing.
//
// Streams are created non-blocking. Synchronous copies and memsets run on
// the legacy default stream and wait for it before returning. Graph capture
// uses CU_STREAM_CAPTURE_MODE_RELAXED, the only mode in which
// cuStreamEndCapture may run on a different OS thread from
// cuStreamBeginCapture.
//
// # Memory
//
// Shareable allocations use the virtual memory management API
// (cuMemCreate, cuMemMap, cuMemSetAccess) and export POSIX file descriptors
// or, where FabricSupported says so, fabric handles. Plain allocations use
// cuMemAlloc; host allocations are pinned, portable and mapped. The backend
// never uses managed memory and never creates multicast objects; it only
// reads the multicast-support attribute to report it.
//
// # NCCL
//
// The Backend implements collective.FallbackAllReducer with NCCL's
// all-reduce, for what a collective.Comm runs with algorithm None.
// libnccl.so.2 (or $INTRANODE_NCCL_LIBRARY) is opened with dlopen on first
// use, like the driver, so it is needed neither to build nor to run the
// rest of the backend; without it the fallback fails with an error matching
// backend.ErrUnavailable ("libnccl.so.2 not found: …") and `intranode
// doctor` says so. Each comm gets one NCCL communicator, bootstrapped
// through the comm's store and bounded by a timeout; see nccl.go. Before
// NCCL starts, the backend sets NCCL_NVLS_ENABLE=0 (no NVLink multicast,
// ever) and, unless it is set, NCCL_RUNTIME_CONNECT=0 in the process
// environment.
//
// # Errors
//
// Driver failures are *DriverError values (entry point, CUresult number and
// name), NCCL failures *NCCLError values, wrapped in backend errors whose
// codes let portable code use errors.Is(err, backend.ErrOutOfMemory) and
// the like.
package cuda
