// port_hip.h: the HIP side of the portability layer. The algorithms in
// kernels/cuda/intranode.cuh and the entry points in kernels/cuda/entry.cuh
// compile unchanged on top of it; see port.cuh for what each name promises.
#pragma once

#include <hip/hip_runtime.h>
#include <stdint.h>

#define INTRANODE_DEVICE __device__ __forceinline__
#define INTRANODE_NOINLINE __device__ __noinline__
#define INTRANODE_MAX_THREADS 512
#define INTRANODE_KERNEL extern "C" __global__ void __launch_bounds__(INTRANODE_MAX_THREADS)

// Frequency of wall_clock64(): 100 MHz on CDNA2/CDNA3 (MI200, MI300); check
// hipDeviceAttributeWallClockRate on other parts and override with -D.
#ifndef INTRANODE_WALL_CLOCK_MHZ
#define INTRANODE_WALL_CLOCK_MHZ 100
#endif

namespace intranode {
namespace port {

struct alignas(16) V16 {
  uint32_t x, y, z, w;
};

INTRANODE_DEVICE uint32_t thread_index() { return threadIdx.x; }
INTRANODE_DEVICE uint32_t block_threads() { return blockDim.x; }
INTRANODE_DEVICE uint32_t block_index() { return blockIdx.x; }
INTRANODE_DEVICE uint32_t grid_blocks() { return gridDim.x; }
INTRANODE_DEVICE void block_sync() { __syncthreads(); }
INTRANODE_DEVICE volatile int* block_flag() {
  __shared__ int flag;
  return &flag;
}
INTRANODE_DEVICE bool block_all(bool pred) { return __syncthreads_and(pred) != 0; }

INTRANODE_DEVICE uint64_t now_ns() {
  return wall_clock64() * (1000 / INTRANODE_WALL_CLOCK_MHZ);
}

// s_sleep takes an immediate count of 64-clock units (about 30 ns at
// 2 GHz): one unit per 32 ns asked for.
INTRANODE_DEVICE void sleep_ns(uint32_t ns) {
  for (uint32_t t = 0; t < ns; t += 32) {
    __builtin_amdgcn_s_sleep(1);
  }
}

// Clang's __atomic builtins default to system scope on AMDGPU, which is what
// flags between GPUs need.
INTRANODE_DEVICE uint32_t load_acquire(const uint32_t* p) {
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
INTRANODE_DEVICE void store_release(uint32_t* p, uint32_t v) {
  __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
INTRANODE_DEVICE uint32_t load_plain(const uint32_t* p) { return *p; }
INTRANODE_DEVICE void store_plain(uint32_t* p, uint32_t v) { *p = v; }

INTRANODE_DEVICE uint32_t fetch_add_relaxed(uint32_t* p, uint32_t v) {
  return __hip_atomic_fetch_add(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
}
INTRANODE_DEVICE void fence_gpu() { __builtin_amdgcn_fence(__ATOMIC_ACQ_REL, "agent"); }
// LL lines: each 8-byte half {d, f} is one relaxed system-scope atomic.
INTRANODE_DEVICE void store_ll(void* p, V16 v) {
  uint64_t* q = static_cast<uint64_t*>(p);
  __hip_atomic_store(q, uint64_t(v.y) << 32 | v.x, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  __hip_atomic_store(q + 1, uint64_t(v.w) << 32 | v.z, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}
INTRANODE_DEVICE V16 load_ll(const void* p) {
  uint64_t* q = const_cast<uint64_t*>(static_cast<const uint64_t*>(p));
  const uint64_t lo = __hip_atomic_load(q, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  const uint64_t hi = __hip_atomic_load(q + 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  return V16{uint32_t(lo), uint32_t(lo >> 32), uint32_t(hi), uint32_t(hi >> 32)};
}
INTRANODE_DEVICE uint64_t load_word64(const uint64_t* p) {
  return __hip_atomic_load(const_cast<uint64_t*>(p), __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}
INTRANODE_DEVICE void store_word64(uint64_t* p, uint64_t v) {
  __hip_atomic_store(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}
INTRANODE_DEVICE uint32_t load_status(const uint32_t* p) {
  return __hip_atomic_load(const_cast<uint32_t*>(p), __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}
INTRANODE_DEVICE int popcount(uint32_t x) { return __builtin_popcount(x); }

// Programmatic dependent launch has no HIP counterpart: kernels on a stream
// run one after the other.
INTRANODE_DEVICE void allow_dependents() {}
INTRANODE_DEVICE void wait_dependencies() {}
INTRANODE_DEVICE void status_cas(uint32_t* p, uint32_t v) { atomicCAS(p, 0u, v); }
INTRANODE_DEVICE uint64_t load_arg_u64(const unsigned long long* p) { return *p; }

INTRANODE_DEVICE V16 load16(const void* p) { return *static_cast<const V16*>(p); }
INTRANODE_DEVICE V16 load16_input(const void* p) {
  typedef uint32_t u32x4 __attribute__((ext_vector_type(4)));
  const u32x4 v = __builtin_nontemporal_load(static_cast<const u32x4*>(p));
  return V16{v.x, v.y, v.z, v.w};
}
INTRANODE_DEVICE void store16(void* p, V16 v) { *static_cast<V16*>(p) = v; }

INTRANODE_DEVICE uint16_t load_u16(const void* p) { return *static_cast<const uint16_t*>(p); }
INTRANODE_DEVICE uint32_t load_u32(const void* p) { return *static_cast<const uint32_t*>(p); }
INTRANODE_DEVICE uint64_t load_u64(const void* p) { return *static_cast<const uint64_t*>(p); }
INTRANODE_DEVICE void store_u16(void* p, uint16_t v) { *static_cast<uint16_t*>(p) = v; }
INTRANODE_DEVICE void store_u32(void* p, uint32_t v) { *static_cast<uint32_t*>(p) = v; }
INTRANODE_DEVICE void store_u64(void* p, uint64_t v) { *static_cast<uint64_t*>(p) = v; }

// A lone add cannot be contracted into an FMA, so plain adds are exact IEEE
// round-to-nearest-even.
INTRANODE_DEVICE float add_f32(float a, float b) { return a + b; }
INTRANODE_DEVICE double add_f64(double a, double b) { return a + b; }
// hipcc divides floats correctly rounded unless told otherwise (as for
// CUDA's __fdiv_rn).
INTRANODE_DEVICE float div_f32(float a, float b) { return a / b; }
INTRANODE_DEVICE double div_f64(double a, double b) { return a / b; }

INTRANODE_DEVICE float f32_from_bits(uint32_t b) { return __builtin_bit_cast(float, b); }
INTRANODE_DEVICE uint32_t f32_bits(float f) { return __builtin_bit_cast(uint32_t, f); }
INTRANODE_DEVICE double f64_from_bits(uint64_t b) { return __builtin_bit_cast(double, b); }
INTRANODE_DEVICE uint64_t f64_bits(double d) { return __builtin_bit_cast(uint64_t, d); }

// f16 through the compiler's _Float16 (v_cvt_f16_f32 rounds to nearest even).
INTRANODE_DEVICE float f16_to_f32(uint16_t h) {
  return static_cast<float>(__builtin_bit_cast(_Float16, h));
}
INTRANODE_DEVICE uint16_t f32_to_f16(float f) {
  return __builtin_bit_cast(uint16_t, static_cast<_Float16>(f));
}

// bf16 in integer arithmetic: widening is a shift, narrowing rounds to
// nearest even and keeps NaNs quiet.
INTRANODE_DEVICE float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }
INTRANODE_DEVICE uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>(u >> 16 | 0x40);
  }
  u += 0x7fffu + (u >> 16 & 1);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace port
}  // namespace intranode
