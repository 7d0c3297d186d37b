// port.cuh: the CUDA side of the portability layer.
//
// The collective algorithms in intranode.cuh touch the hardware only through
// the names defined here, so a HIP build reuses them by including its own
// port header (kernels/hip/port_hip.h) in place of this one. Everything the
// kernel ABI says about memory ordering is decided in this file: which loads
// are coherent, which stores release, what "now" means for a deadline.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700
#error "intranode kernels need sm_70 or newer (ld.acquire/st.release at system scope)"
#endif

#define INTRANODE_DEVICE __device__ __forceinline__
#define INTRANODE_NOINLINE __device__ __noinline__

// Every all-reduce kernel is compiled for at most this many threads per block;
// launches with more fail with CUDA_ERROR_INVALID_VALUE. 512 threads leave
// ptxas up to 128 registers per thread, which the 8-rank paths use.
#define INTRANODE_MAX_THREADS 512
#define INTRANODE_KERNEL extern "C" __global__ void __launch_bounds__(INTRANODE_MAX_THREADS)

namespace intranode {
namespace port {

// V16 is one 16-byte vector: the unit every main loop moves.
struct alignas(16) V16 {
  uint32_t x, y, z, w;
};

INTRANODE_DEVICE uint32_t thread_index() { return threadIdx.x; }
INTRANODE_DEVICE uint32_t block_threads() { return blockDim.x; }
INTRANODE_DEVICE uint32_t block_index() { return blockIdx.x; }
INTRANODE_DEVICE uint32_t grid_blocks() { return gridDim.x; }
INTRANODE_DEVICE void block_sync() { __syncthreads(); }
// block_flag is one int shared by the threads of a block.
INTRANODE_DEVICE volatile int* block_flag() {
  __shared__ int flag;
  return &flag;
}
// block_all is a block_sync that also tells whether pred holds on every thread.
INTRANODE_DEVICE bool block_all(bool pred) { return __syncthreads_and(pred) != 0; }

// Nanoseconds from the device's global timer; only differences are used.
INTRANODE_DEVICE uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// sleep_ns parks the calling thread for about ns nanoseconds (at most
// twice that: __nanosleep's promise), letting the memory system serve
// others while it waits.
INTRANODE_DEVICE void sleep_ns(uint32_t ns) { __nanosleep(ns); }

// Flag words of the signal pads. Loads spin with acquire at system scope so
// that the load that sees a peer's flag also orders every later read of the
// peer's data; stores release at system scope (st.release.sys: MEMBAR.ALL.SYS
// then the store) so that everything this block wrote before the preceding
// block_sync is visible to the peer first. A bar.sync followed by a release
// is cumulative in the PTX memory model, so one thread can publish the whole
// block's writes.
INTRANODE_DEVICE uint32_t load_acquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

INTRANODE_DEVICE void store_release(uint32_t* p, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Local counters of the signal pad: touched by one thread in one kernel at a
// time, ordered across kernels by the stream.
INTRANODE_DEVICE uint32_t load_plain(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

INTRANODE_DEVICE void store_plain(uint32_t* p, uint32_t v) {
  asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Device-scope counter and fence: the one-shot LL path counts its blocks in
// with a relaxed add between two fences (release before, acquire after,
// each placed where it costs nothing), so that the add itself never waits.
INTRANODE_DEVICE uint32_t fetch_add_relaxed(uint32_t* p, uint32_t v) {
  uint32_t old;
  asm volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
INTRANODE_DEVICE void fence_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

// LL lines of the one-shot LL path: 16 bytes {d0, f, d1, f}, written by one
// GPU into another's memory and polled there. Each 8-byte half must reach
// the reader as a unit, so that a reader seeing the flag f also sees the
// data word beside it. By default a line is one volatile 16-byte access, as
// NCCL's LL protocol does (the hardware delivers aligned 16-byte accesses
// whole, which is stronger than the PTX memory model promises for vectors).
// INTRANODE_LL_U64 builds the form the PTX model does promise: two 8-byte
// relaxed system-scope accesses per line.
INTRANODE_DEVICE void store_ll(void* p, V16 v) {
#ifdef INTRANODE_LL_U64
  const uint64_t lo = uint64_t(v.y) << 32 | v.x, hi = uint64_t(v.w) << 32 | v.z;
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(lo) : "memory");
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(static_cast<char*>(p) + 8), "l"(hi)
               : "memory");
#else
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
#endif
}

INTRANODE_DEVICE V16 load_ll(const void* p) {
  V16 v;
#ifdef INTRANODE_LL_U64
  uint64_t lo, hi;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(lo) : "l"(p) : "memory");
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];"
               : "=l"(hi)
               : "l"(static_cast<const char*>(p) + 8)
               : "memory");
  v.x = uint32_t(lo);
  v.y = uint32_t(lo >> 32);
  v.z = uint32_t(hi);
  v.w = uint32_t(hi >> 32);
#else
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
#endif
  return v;
}

// Words of the call agreement (kernels/abi.go): written by peers and
// polled, so relaxed system-scope accesses the compiler cannot hoist.
INTRANODE_DEVICE uint64_t load_word64(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
INTRANODE_DEVICE void store_word64(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// The status word lives in host memory; a spinning thread reads it now and
// then to learn that another thread of the launch has given up.
INTRANODE_DEVICE uint32_t load_status(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

INTRANODE_DEVICE int popcount(uint32_t x) { return __popc(x); }

// Programmatic dependent launch (sm_90; backend.LaunchConfig.Early). A
// kernel launched early may start while the kernel before it on the stream
// still runs: allow_dependents lets the next early launch begin, and
// wait_dependencies blocks until the work ahead has finished and its
// writes are visible. Before wait_dependencies a kernel reads only its
// parameters and what the host wrote before any of the stream's work (the
// pointer tables). Both are no-ops on older GPUs and in normal launches.
INTRANODE_DEVICE void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
INTRANODE_DEVICE void wait_dependencies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// First failure wins: the status word only changes from 0.
INTRANODE_DEVICE void status_cas(uint32_t* p, uint32_t v) { atomicCAS(p, 0u, v); }

// Kernel arguments that stay constant for the whole launch (the pointer
// arrays) go through the read-only path.
INTRANODE_DEVICE uint64_t load_arg_u64(const unsigned long long* p) { return __ldg(p); }

// Symmetric buffers: written by this or another GPU before a barrier, read
// after it. Weak loads are ordered by the acquire + bar.sync of the barrier;
// L1::no_allocate keeps peer data out of L1, where it would only be read once.
INTRANODE_DEVICE V16 load16(const void* p) {
  V16 v;
  asm volatile("ld.global.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

// The caller's input: nothing writes it while the kernel runs, so the
// non-coherent read-only path is safe.
INTRANODE_DEVICE V16 load16_input(const void* p) {
  V16 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

INTRANODE_DEVICE void store16(void* p, V16 v) {
  asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}

// Element loads and stores for tails and unaligned pointers.
INTRANODE_DEVICE uint16_t load_u16(const void* p) {
  uint16_t v;
  asm volatile("ld.global.u16 %0, [%1];" : "=h"(v) : "l"(p) : "memory");
  return v;
}
INTRANODE_DEVICE uint32_t load_u32(const void* p) {
  uint32_t v;
  asm volatile("ld.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
INTRANODE_DEVICE uint64_t load_u64(const void* p) {
  uint64_t v;
  asm volatile("ld.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
INTRANODE_DEVICE void store_u16(void* p, uint16_t v) {
  asm volatile("st.global.u16 [%0], %1;" ::"l"(p), "h"(v) : "memory");
}
INTRANODE_DEVICE void store_u32(void* p, uint32_t v) {
  asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
INTRANODE_DEVICE void store_u64(void* p, uint64_t v) {
  asm volatile("st.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// Arithmetic that must not be contracted or reassociated: every rank has to
// produce the same bits.
INTRANODE_DEVICE float add_f32(float a, float b) { return __fadd_rn(a, b); }
INTRANODE_DEVICE double add_f64(double a, double b) { return __dadd_rn(a, b); }
INTRANODE_DEVICE float div_f32(float a, float b) { return __fdiv_rn(a, b); }
INTRANODE_DEVICE double div_f64(double a, double b) { return __ddiv_rn(a, b); }

// Bit casts between element storage and arithmetic types.
INTRANODE_DEVICE float f32_from_bits(uint32_t b) { return __uint_as_float(b); }
INTRANODE_DEVICE uint32_t f32_bits(float f) { return __float_as_uint(f); }
INTRANODE_DEVICE double f64_from_bits(uint64_t b) { return __longlong_as_double(static_cast<long long>(b)); }
INTRANODE_DEVICE uint64_t f64_bits(double d) { return static_cast<uint64_t>(__double_as_longlong(d)); }

// 16-bit floating-point formats, as raw bits. Widening is exact; narrowing
// rounds to nearest even.
INTRANODE_DEVICE float f16_to_f32(uint16_t h) { return __half2float(__ushort_as_half(h)); }
INTRANODE_DEVICE uint16_t f32_to_f16(float f) { return __half_as_ushort(__float2half_rn(f)); }
INTRANODE_DEVICE float bf16_to_f32(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }
INTRANODE_DEVICE uint16_t f32_to_bf16(float f) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

}  // namespace port
}  // namespace intranode
