// Package fake is intranode's default backend: devices that live in this
// host's memory and behave like GPUs closely enough that the rest of
// intranode — symmetric memory, rendezvous, the all-reduce algorithms and
// the conformance suite — runs unchanged on any Linux machine, CI included.
//
// Nothing is simulated that matters to correctness. Device memory is real
// memory from mmap; shareable allocations are memfds mapped MAP_SHARED, so
// an allocation exported as a file descriptor (or, with WithFabric, as
// opaque bytes naming /proc/<pid>/fd/<n>) and imported by another process
// is the same physical memory there. A DevicePtr is the address of the
// mapping in this process, and kernels reach memory only through a Memory
// that checks every access against the live allocations. Streams are
// goroutines running their queue in order; events, cross-stream waits and
// graph capture and replay follow CUDA's semantics; errors from kernels are
// sticky per stream.
//
// Kernels are Go functions (Kernel) grouped in modules registered by name
// from init with RegisterModule; package kernels/cpu registers the built-in
// collectives module, kernels.ModuleName. LoadModule with a binary image
// fails with backend.ErrNotSupported.
//
// The package registers itself as backend driver "fake" with priority 0, so
// backend.Open(ctx, "auto") picks it when no hardware backend works. The
// driver reads EnvDevices and EnvTopology, and accepts settings after the
// name: backend.Open(ctx, "fake:devices=2,topology=ring"). Topology presets
// (full, hcm, ring, pairs, none) shape the link matrix and peer access.
// EnvBrokenP2P (or WithBrokenP2P) makes chosen pairs fail their peer-access
// test while their links stay in the matrix, as on a machine whose IOMMU
// or PCIe settings break peer writes: rendezvous then refuses groups that
// would use them, and PeerTest says why.
//
// The fake needs Linux: memfd_create for shareable memory and /proc for
// fabric handles. Elsewhere it builds, and Probe and New say why it cannot
// be used.
package fake
