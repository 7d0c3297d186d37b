// Package hipkernels carries the HIP build of the intranode kernel module
// (kernels.ModuleName): the one-shot, two-shot and HCM all-reduce kernels and
// the barrier, put-signal and wait-signal kernels, implementing the ABI
// documented in package kernels.
//
// There is one algorithm source for CUDA and HIP: collectives.hip includes
// the hardware layer of this directory (port_hip.h) and then the algorithms
// and entry points of kernels/cuda (intranode.cuh, entry.cuh). The kernels
// synchronise only whole blocks (__syncthreads and __syncthreads_and) and
// spin per thread, never per warp, so they are correct with AMD's 64-wide
// wavefronts as with NVIDIA's 32-wide warps.
//
// The Makefile compiles them ahead of time with hipcc, one code object per
// offload architecture (gfx90a and gfx940 by default), bundles those the way
// hipcc --genco does and gzips the bundle into collectives.hsaco.gz, which
// this package embeds. The ROCm backend loads Load()'s bytes with
// hipModuleLoadData, and the runtime picks the code object of the device.
// The package itself is pure Go and needs neither hipcc nor a GPU.
//
// collectives.hsaco.sha256 records the digest of the sources the image was
// built from; this package's tests fail when the sources have changed since
// (run `make -C kernels/hip` to rebuild).
package hipkernels
