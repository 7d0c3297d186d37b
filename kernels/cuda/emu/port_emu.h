// port_emu.h: a CPU port layer that runs the kernel sources (intranode.cuh,
// entry.cuh) with one std::thread per emulated GPU thread, so the algorithms'
// index arithmetic, tails, slices, signal counting and timeouts can be tested
// on any Linux machine. It is a test harness, not a backend: it checks logic,
// not the GPU memory model or performance.
#pragma once

#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>

#define INTRANODE_DEVICE inline
#define INTRANODE_NOINLINE inline
#define INTRANODE_MAX_THREADS 1024
#define INTRANODE_KERNEL extern "C" void

namespace intranode {
namespace port {

struct alignas(16) V16 {
  uint32_t x, y, z, w;
};

// Block is what the threads of one emulated block share.
struct Block {
  explicit Block(int threads) : sync(threads) {}
  std::barrier<> sync;
  std::atomic<int> all{0};
  int flag = 0;
};

struct ThreadState {
  uint32_t thread = 0, threads = 1, block = 0, blocks = 1;
  Block* shared = nullptr;
};

inline thread_local ThreadState self;

inline uint32_t thread_index() { return self.thread; }
inline uint32_t block_threads() { return self.threads; }
inline uint32_t block_index() { return self.block; }
inline uint32_t grid_blocks() { return self.blocks; }
inline void block_sync() { self.shared->sync.arrive_and_wait(); }
inline volatile int* block_flag() { return &self.shared->flag; }
inline bool block_all(bool pred) {
  Block& b = *self.shared;
  b.sync.arrive_and_wait();
  if (!pred) {
    b.all.fetch_add(1);
  }
  b.sync.arrive_and_wait();
  const bool ok = b.all.load() == 0;
  b.sync.arrive_and_wait();
  return ok;
}

inline uint64_t now_ns() {
  std::this_thread::yield();  // spinning threads outnumber the cores
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline uint32_t load_acquire(const uint32_t* p) {
  return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(std::memory_order_acquire);
}
inline void store_release(uint32_t* p, uint32_t v) {
  std::atomic_ref<uint32_t>(*p).store(v, std::memory_order_release);
}
inline uint32_t load_plain(const uint32_t* p) { return *p; }
inline void store_plain(uint32_t* p, uint32_t v) { *p = v; }
inline uint32_t fetch_add_relaxed(uint32_t* p, uint32_t v) {
  return std::atomic_ref<uint32_t>(*p).fetch_add(v, std::memory_order_relaxed);
}
inline void fence_gpu() { std::atomic_thread_fence(std::memory_order_acq_rel); }
// LL lines: each 8-byte half {d, f} is one atomic access, as the ABI asks.
inline void store_ll(void* p, V16 v) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
    std::abort();
  }
  auto* q = static_cast<uint64_t*>(p);
  std::atomic_ref<uint64_t>(q[0]).store(uint64_t(v.y) << 32 | v.x, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(q[1]).store(uint64_t(v.w) << 32 | v.z, std::memory_order_relaxed);
}
inline V16 load_ll(const void* p) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
    std::abort();
  }
  auto* q = const_cast<uint64_t*>(static_cast<const uint64_t*>(p));
  const uint64_t lo = std::atomic_ref<uint64_t>(q[0]).load(std::memory_order_relaxed);
  const uint64_t hi = std::atomic_ref<uint64_t>(q[1]).load(std::memory_order_relaxed);
  std::this_thread::yield();  // pollers outnumber the cores
  return V16{uint32_t(lo), uint32_t(lo >> 32), uint32_t(hi), uint32_t(hi >> 32)};
}
inline uint64_t load_word64(const uint64_t* p) {
  return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(p)).load(std::memory_order_relaxed);
}
inline void store_word64(uint64_t* p, uint64_t v) {
  std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_relaxed);
}
inline uint32_t load_status(const uint32_t* p) {
  return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(std::memory_order_relaxed);
}
// Pauses records the pauses a thread asked for (sleep_ns) since a test
// last reset it: how many, the first's length and the longest.
struct Pauses {
  uint64_t count = 0;
  uint32_t first_ns = 0, longest_ns = 0;
};
inline thread_local Pauses pauses;
inline void sleep_ns(uint32_t ns) {
  if (pauses.count++ == 0) {
    pauses.first_ns = ns;
  }
  if (ns > pauses.longest_ns) {
    pauses.longest_ns = ns;
  }
  std::this_thread::yield();
}
inline int popcount(uint32_t x) { return __builtin_popcount(x); }

// Launches run one after the other in the emulator.
inline void allow_dependents() {}
inline void wait_dependencies() {}
inline void status_cas(uint32_t* p, uint32_t v) {
  uint32_t zero = 0;
  std::atomic_ref<uint32_t>(*p).compare_exchange_strong(zero, v);
}
inline uint64_t load_arg_u64(const unsigned long long* p) { return *p; }

inline V16 load16(const void* p) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
    std::abort();  // a misaligned vector access faults on a GPU
  }
  V16 v;
  std::memcpy(&v, p, 16);
  return v;
}
inline V16 load16_input(const void* p) { return load16(p); }
inline void store16(void* p, V16 v) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
    std::abort();
  }
  std::memcpy(p, &v, 16);
}

template <class T>
inline T load_t(const void* p) {
  if (reinterpret_cast<uintptr_t>(p) % sizeof(T) != 0) {
    std::abort();
  }
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
inline void store_t(void* p, T v) {
  if (reinterpret_cast<uintptr_t>(p) % sizeof(T) != 0) {
    std::abort();
  }
  std::memcpy(p, &v, sizeof v);
}
inline uint16_t load_u16(const void* p) { return load_t<uint16_t>(p); }
inline uint32_t load_u32(const void* p) { return load_t<uint32_t>(p); }
inline uint64_t load_u64(const void* p) { return load_t<uint64_t>(p); }
inline void store_u16(void* p, uint16_t v) { store_t(p, v); }
inline void store_u32(void* p, uint32_t v) { store_t(p, v); }
inline void store_u64(void* p, uint64_t v) { store_t(p, v); }

inline float add_f32(float a, float b) { return a + b; }
inline double add_f64(double a, double b) { return a + b; }
inline float div_f32(float a, float b) { return a / b; }
inline double div_f64(double a, double b) { return a / b; }
inline float f32_from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
inline uint32_t f32_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
inline double f64_from_bits(uint64_t b) {
  double d;
  std::memcpy(&d, &b, 8);
  return d;
}
inline uint64_t f64_bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}

inline float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffff) > 0x7f800000) {
    return uint16_t(u >> 16 | 0x40);  // quiet NaN
  }
  u += 0x7fff + (u >> 16 & 1);
  return uint16_t(u >> 16);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const int exp = h >> 10 & 0x1f;
  const uint32_t man = h & 0x3ff;
  if (exp == 0x1f) {
    return f32_from_bits(sign | 0x7f800000 | man << 13);
  }
  if (exp == 0) {
    return f32_from_bits(f32_bits(std::ldexp(float(man), -24)) | sign);
  }
  return f32_from_bits(sign | uint32_t(exp - 15 + 127) << 23 | man << 13);
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = uint16_t(u >> 16 & 0x8000);
  const uint32_t a = u & 0x7fffffff;
  if (a > 0x7f800000) {
    return sign | 0x7e00;
  }
  if (a >= 0x477ff000) {  // rounds to infinity (65520 and up)
    return sign | 0x7c00;
  }
  if (a < 0x38800000) {  // below the smallest normal: round in units of 2^-24
    const float m = std::fabs(f) * 16777216.0f;  // exact scaling
    return sign | uint16_t(std::nearbyint(m));   // default rounding mode is to nearest even
  }
  const uint32_t e = (a >> 23) - 127 + 15;
  uint32_t m = a & 0x7fffff;
  uint32_t h = e << 10 | m >> 13;
  const uint32_t rest = m & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) {
    ++h;
  }
  return sign | uint16_t(h);
}

}  // namespace port
}  // namespace intranode
