// Package cudakernels carries the CUDA build of the intranode kernel module
// (kernels.ModuleName): the one-shot, two-shot and HCM all-reduce kernels and
// the barrier, put-signal and wait-signal kernels, all implementing the ABI
// documented in package kernels.
//
// The kernels are written in CUDA C++ in this directory (collectives.cu, the
// algorithms in intranode.cuh, the hardware layer in port.cuh) and compiled
// ahead of time with nvcc into collectives.fatbin (SASS for sm_80 and sm_90,
// PTX for compute_90), which this package embeds. The CUDA backend loads
// Load()'s bytes with cuModuleLoadData; the package itself is pure Go and
// needs neither nvcc nor a GPU, so it builds and tests everywhere.
//
// collectives.fatbin.sha256 records the digest of the sources the image was
// built from; this package's tests fail when the sources have changed since
// (run `make kernels` at the repository root to rebuild).
package cudakernels
