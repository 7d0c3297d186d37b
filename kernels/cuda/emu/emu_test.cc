// emu_test.cc: runs the kernel sources on the CPU (port_emu.h) for every
// algorithm x dtype x world x size x aliasing case and checks the results
// bit for bit against a straightforward fold in rank order, plus the buffer
// contents the ABI promises, signal counting across calls, timeouts and
// bad-argument reports. Build and run with `make emu` in kernels/cuda.
#include "port_emu.h"

#include "../intranode.cuh"

#include "../entry.cuh"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace intranode;

using AllReduceFn = void (*)(const unsigned long long*, const unsigned long long*, const void*,
                             void*, unsigned long long, unsigned int, unsigned int, unsigned int,
                             unsigned int, unsigned int*, unsigned long long, unsigned long long,
                             unsigned long long);
using SignalFn = void (*)(const unsigned long long*, unsigned int, unsigned int, unsigned int,
                          unsigned int, unsigned int, unsigned int*, unsigned long long);

constexpr size_t kPadSize = kPushOffset + kPushSize;
constexpr uint64_t kTimeout = 2'000'000'000;  // 2 s: a hang is a failure, not a wait

int failures = 0;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                   \
      std::fprintf(stderr, "\n");                          \
      ++failures;                                          \
    }                                                      \
  } while (0)

struct Mem {
  explicit Mem(size_t n) : p(static_cast<char*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096))), size(n) {
    std::memset(p, 0, (n + 4095) / 4096 * 4096);
  }
  ~Mem() { std::free(p); }
  char* p;
  size_t size;
};

// Group is `world` ranks in one address space: symmetric buffers, signal
// pads, status words and the pointer arrays the kernels take.
struct Group {
  Group(int world, size_t buffer) : world(world), buffer(buffer) {
    for (int r = 0; r < world; ++r) {
      bufs.push_back(std::make_unique<Mem>(buffer));
      pads.push_back(std::make_unique<Mem>(kPadSize));
      buf_ptrs.push_back(reinterpret_cast<uintptr_t>(bufs.back()->p));
      pad_ptrs.push_back(reinterpret_cast<uintptr_t>(pads.back()->p));
    }
    status.assign(world, 0);
  }
  int world;
  size_t buffer;
  std::vector<std::unique_ptr<Mem>> bufs, pads;
  std::vector<unsigned long long> buf_ptrs, pad_ptrs;
  std::vector<uint32_t> status;
  uint32_t seq = 0;  // calls made: the sequence number of the next Call
};

// call_tag stands in for kernels.CallTag: the kernels only compare Calls,
// so any fingerprint that differs when the calls differ will do.
uint64_t call_tag(uint32_t seq, Algo a, uint64_t count, uint32_t dtype, uint32_t op) {
  const uint64_t h = (count * 0x9e3779b97f4a7c15ull) ^ (uint64_t(int(a)) << 40) ^ (uint64_t(dtype) << 48) ^
                     (uint64_t(op) << 56);
  return uint64_t(seq) << 32 | (uint32_t(h ^ h >> 32) | 1);
}

// launch runs body(rank) as a grid x block launch on every rank in ranks,
// all ranks at once.
void launch(const std::vector<int>& ranks, uint32_t grid, uint32_t block,
            const std::function<void(int)>& body) {
  std::vector<std::unique_ptr<port::Block>> blocks;
  std::vector<std::thread> threads;
  for (int r : ranks) {
    for (uint32_t b = 0; b < grid; ++b) {
      blocks.push_back(std::make_unique<port::Block>(block));
      port::Block* shared = blocks.back().get();
      for (uint32_t t = 0; t < block; ++t) {
        threads.emplace_back([=] {
          port::self = {t, block, b, grid, shared};
          body(r);
        });
      }
    }
  }
  for (auto& th : threads) {
    th.join();
  }
}

std::vector<int> all_ranks(int world) {
  std::vector<int> v(world);
  for (int r = 0; r < world; ++r) v[r] = r;
  return v;
}

template <uint32_t DT>
using Bits = typename Type<DT>::Bits;

template <uint32_t DT>
Bits<DT> random_elem(std::mt19937_64& rng) {
  if constexpr (DT == kI32) {
    return uint32_t(rng());
  } else if constexpr (DT == kF64) {
    return port::f64_bits(double(int64_t(rng() % 2001) - 1000) / 8 + double(rng() % 1000) * 1e-7);
  } else {
    const float f = float(int(rng() % 2001) - 1000) / 16 + float(rng() % 1000) * 1e-5f;
    return Type<DT>::down(f);
  }
}

template <uint32_t DT>
typename Type<DT>::Acc fold(uint32_t op, typename Type<DT>::Acc a, typename Type<DT>::Acc b) {
  if (op == kSum) return Fold<kSum>(op)(a, b);
  return Fold<kMinMax>(op)(a, b);
}

template <uint32_t DT>
Bits<DT> fold_ranks(uint32_t op, const std::vector<Bits<DT>>& x, const std::vector<int>& order) {
  using T = Type<DT>;
  typename T::Acc acc = T::up(x[order[0]]);
  for (size_t i = 1; i < order.size(); ++i) acc = fold<DT>(op, acc, T::up(x[order[i]]));
  return T::down(acc);
}

template <uint32_t DT>
const char* dtype_name() {
  switch (DT) {
    case kF32: return "f32";
    case kF16: return "f16";
    case kBF16: return "bf16";
    case kF64: return "f64";
    default: return "i32";
  }
}

enum class Mode { kOutOfPlace, kInputIsBuffer, kUserInPlace, kOutputIsBuffer, kMisaligned };

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kOutOfPlace: return "out-of-place";
    case Mode::kInputIsBuffer: return "input=buf";
    case Mode::kUserInPlace: return "in-place";
    case Mode::kOutputIsBuffer: return "output=buf";
    default: return "misaligned";
  }
}

struct Case {
  Algo algo;
  int world;
  uint64_t count;
  uint32_t grid;
  uint32_t block;
  uint32_t op;
  Mode mode;
  bool hcm_half;  // pass the partial offset in Extra's high half
};

template <uint32_t DT>
AllReduceFn kernel_for(Algo a) {
#define PICK(ALGO, NAME)                                     \
  if (a == ALGO) {                                           \
    if (DT == kF32) return intranode_##NAME##_f32;           \
    if (DT == kF16) return intranode_##NAME##_f16;           \
    if (DT == kBF16) return intranode_##NAME##_bf16;         \
    if (DT == kF64) return intranode_##NAME##_f64;           \
    return intranode_##NAME##_i32;                           \
  }
  PICK(Algo::kOneShot, one_shot)
  PICK(Algo::kTwoShot, two_shot)
  PICK(Algo::kHCM, hcm)
  PICK(Algo::kPipeline, pipeline)
  PICK(Algo::kReduceScatter, reduce_scatter)
  PICK(Algo::kAllGather, all_gather)
  PICK(Algo::kBroadcast, broadcast)
  PICK(Algo::kAllToAll, all_to_all)
#undef PICK
  return nullptr;
}

const char* algo_name(Algo a) {
  return a == Algo::kOneShot   ? "one_shot"
         : a == Algo::kTwoShot  ? "two_shot"
         : a == Algo::kPipeline ? "pipeline"
                                : "hcm";
}

// run_case all-reduces twice on a fresh group (so signal counters carry over
// between calls) and checks every rank's output and buffer.
template <uint32_t DT>
void run_case(Group& g, const Case& c, std::mt19937_64& rng, int calls) {
  using B = Bits<DT>;
  const size_t es = sizeof(B);
  const int W = c.world;
  const uint64_t n = c.count;
  const size_t half = c.hcm_half ? (g.buffer / 2) & ~size_t(15) : (n * es + 15) & ~size_t(15);
  char label[200];
  std::snprintf(label, sizeof label, "%s_%s world=%d count=%llu grid=%u block=%u op=%u %s%s",
                algo_name(c.algo), dtype_name<DT>(), W, (unsigned long long)n, c.grid, c.block,
                c.op, mode_name(c.mode), c.hcm_half ? " half" : "");

  for (int call = 0; call < calls; ++call) {
    std::vector<std::vector<B>> in(W, std::vector<B>(n));
    for (int r = 0; r < W; ++r)
      for (auto& x : in[r]) x = random_elem<DT>(rng);

    // Per-rank input and output memory as the mode asks.
    std::vector<std::unique_ptr<Mem>> user_in, user_out;
    std::vector<char*> inp(W), outp(W);
    const size_t shift = c.mode == Mode::kMisaligned ? es : 0;
    for (int r = 0; r < W; ++r) {
      user_in.push_back(std::make_unique<Mem>(n * es + 64));
      user_out.push_back(std::make_unique<Mem>(n * es + 64));
      char* mine = g.bufs[r]->p;
      switch (c.mode) {
        case Mode::kOutOfPlace:
          inp[r] = user_in[r]->p;
          outp[r] = user_out[r]->p;
          break;
        case Mode::kInputIsBuffer:
          inp[r] = mine;
          outp[r] = user_out[r]->p;
          break;
        case Mode::kUserInPlace:
          inp[r] = outp[r] = user_in[r]->p;
          break;
        case Mode::kOutputIsBuffer:
          inp[r] = user_in[r]->p;
          outp[r] = mine;
          break;
        case Mode::kMisaligned:
          inp[r] = user_in[r]->p + shift;
          outp[r] = user_out[r]->p + 3 * shift;
          break;
      }
      std::memcpy(inp[r], in[r].data(), n * es);
    }

    uint64_t extra = 0;
    std::vector<uint64_t> extras(W);
    if (c.algo == Algo::kHCM) {
      for (int r = 0; r < W; ++r) {
        const int base = r & 4;
        uint64_t e = 0;
        int k = 0;
        for (int q = base; q < base + 4; ++q)
          if (q != r) e |= uint64_t(q) << (8 * k++);
        e |= uint64_t(r ^ 4) << 24;
        if (c.hcm_half) e |= uint64_t(half) << 32;
        extras[r] = e;
      }
    }
    (void)extra;

    AllReduceFn fn = kernel_for<DT>(c.algo);
    std::fill(g.status.begin(), g.status.end(), 0);
    const uint64_t tag = call_tag(++g.seq, c.algo, n, DT, c.op);
    launch(all_ranks(W), c.grid, c.block, [&](int r) {
      fn(g.buf_ptrs.data(), g.pad_ptrs.data(), inp[r], outp[r], n, r, W, DT, c.op, &g.status[r],
         kTimeout, extras[r], tag);
    });

    // Expected output.
    std::vector<B> want(n), col(W);
    std::vector<int> order = all_ranks(W);
    std::vector<std::vector<B>> partial(2, std::vector<B>(n));
    for (uint64_t i = 0; i < n; ++i) {
      for (int r = 0; r < W; ++r) col[r] = in[r][i];
      if (c.algo == Algo::kHCM) {
        const B lo = fold_ranks<DT>(c.op, col, {0, 1, 2, 3});
        const B hi = fold_ranks<DT>(c.op, col, {4, 5, 6, 7});
        partial[0][i] = lo;
        partial[1][i] = hi;
        want[i] = fold_ranks<DT>(c.op, {lo, hi}, {0, 1});
      } else {
        want[i] = fold_ranks<DT>(c.op, col, order);
      }
    }

    for (int r = 0; r < W; ++r) {
      CHECK(g.status[r] == 0, "%s call %d rank %d: status %#x", label, call, r, g.status[r]);
      std::vector<B> got(n);
      std::memcpy(got.data(), outp[r], n * es);
      uint64_t bad = 0, first = n;
      for (uint64_t i = 0; i < n; ++i)
        if (got[i] != want[i]) {
          if (first == n) first = i;
          ++bad;
        }
      CHECK(bad == 0, "%s call %d rank %d: %llu wrong, first at %llu (got %#llx want %#llx)", label,
            call, r, (unsigned long long)bad, (unsigned long long)first,
            (unsigned long long)(first < n ? got[first] : 0),
            (unsigned long long)(first < n ? want[first] : 0));

      // What the ABI says the symmetric buffer holds afterwards: the input
      // (one-shot, classic path), or every other rank's reduced slice
      // (two-shot).
      const char* mine = g.bufs[r]->p;
      const bool slots = n > 0 && (n * es <= ll_max(uint32_t(W)) || n * es <= push_max(uint32_t(W)));
      if (c.algo == Algo::kOneShot && !slots && c.mode != Mode::kOutputIsBuffer) {
        CHECK(std::memcmp(mine, in[r].data(), n * es) == 0, "%s rank %d: bufs[rank] != input",
              label, r);
      }
      if (c.algo == Algo::kTwoShot) {
        const uint64_t S = (((n + W - 1) / W) + 16 / es - 1) / (16 / es) * (16 / es);
        for (int p = 0; p < W; ++p) {
          if (p == r && c.mode != Mode::kOutputIsBuffer) continue;
          const uint64_t lo = std::min<uint64_t>(p * S, n), hi = std::min<uint64_t>(lo + S, n);
          CHECK(std::memcmp(mine + lo * es, want.data() + lo, (hi - lo) * es) == 0,
                "%s rank %d: bufs[rank][slice %d] is not the reduced slice", label, r, p);
        }
      }
      if (c.algo == Algo::kHCM) {
        CHECK(std::memcmp(mine + half, partial[r >> 2].data(), n * es) == 0,
              "%s rank %d: partial at %zu is not the quad's", label, r, half);
      }
      // Every rank has made as many LL calls, and the ticket is back at 0.
      uint32_t e0, er, tr;
      std::memcpy(&e0, g.pads[0]->p + kEpochWord, 4);
      std::memcpy(&er, g.pads[r]->p + kEpochWord, 4);
      std::memcpy(&tr, g.pads[r]->p + kTicketWord, 4);
      CHECK(er == e0 && tr == 0, "%s rank %d: epoch %u (rank 0: %u), ticket %u", label, r, er, e0, tr);
    }
  }
}

Algo algos[] = {Algo::kOneShot, Algo::kTwoShot, Algo::kPipeline};

template <uint32_t DT>
void sweep(std::mt19937_64& rng, bool quick) {
  const size_t buffer = 1 << 16;
  const std::vector<uint64_t> counts = quick ? std::vector<uint64_t>{1, 9, 100, 1031}
                                             : std::vector<uint64_t>{1, 2, 7, 8, 9, 15, 16, 17, 31,
                                                                     33, 63, 100, 129, 1000, 1031,
                                                                     4099};
  for (Algo algo : algos) {
    for (int world : {1, 2, 3, 4, 5, 8}) {
      for (uint64_t n : counts) {
        for (uint32_t grid : {1u, 3u}) {
          for (Mode mode : {Mode::kOutOfPlace, Mode::kInputIsBuffer, Mode::kUserInPlace,
                            Mode::kOutputIsBuffer, Mode::kMisaligned}) {
            if (algo == Algo::kOneShot && mode == Mode::kOutputIsBuffer) continue;
            for (uint32_t op : {kSum, kMax, kMin}) {
              if (op != kSum && (mode != Mode::kOutOfPlace || grid != 3)) continue;
              Group g(world, buffer);
              run_case<DT>(g, {algo, world, n, grid, 16, op, mode, false}, rng, 2);
            }
          }
        }
      }
    }
  }
  for (uint64_t n : counts) {
    for (uint32_t grid : {1u, 2u}) {
      for (Mode mode : {Mode::kOutOfPlace, Mode::kInputIsBuffer, Mode::kOutputIsBuffer,
                        Mode::kMisaligned}) {
        for (bool half : {false, true}) {
          for (uint32_t op : {kSum, kMax}) {
            if (op != kSum && mode != Mode::kOutOfPlace) continue;
            Group g(8, buffer);
            run_case<DT>(g, {Algo::kHCM, 8, n, grid, 8, op, mode, half}, rng, 2);
          }
        }
      }
    }
  }
}

// run_mover runs one data-movement launch on a fresh group twice (n
// elements per block, blocks `stride` elements apart in the strided input
// or output, root for the broadcast) and checks every rank's output, bit
// for bit, and that nothing beyond the output changed. in_buffer puts the
// input in the symmetric buffer where the ABI lets a rank skip its copy.
template <uint32_t DT>
void run_mover(Group& g, Algo algo, uint64_t n, uint64_t stride, uint32_t grid, uint32_t op, uint32_t root,
               bool in_buffer, std::mt19937_64& rng, bool piped = false) {
  const int W = g.world;
  using B = Bits<DT>;
  const size_t es = sizeof(B);
  const bool blocked_in = algo == Algo::kReduceScatter || algo == Algo::kAllToAll;
  const bool blocked_out = algo == Algo::kAllGather || algo == Algo::kAllToAll;
  const uint64_t S = stride == 0 ? n : stride;
  const uint64_t in_n = blocked_in ? (W - 1) * S + n : n, out_n = blocked_out ? (W - 1) * S + n : n;
  char label[200];
  std::snprintf(label, sizeof label, "mover %d_%s world=%d count=%llu stride=%llu grid=%u op=%u root=%u%s%s",
                int(algo), dtype_name<DT>(), W, (unsigned long long)n, (unsigned long long)stride, grid, op, root,
                in_buffer ? " input=buf" : "", piped ? " pipelined" : "");
  for (int call = 0; call < 2; ++call) {
    std::vector<std::vector<B>> in(W, std::vector<B>(in_n));
    std::vector<std::unique_ptr<Mem>> user_in, user_out;
    std::vector<char*> inp(W), outp(W);
    const B poison = Type<DT>::down(12345);
    for (int r = 0; r < W; ++r) {
      for (auto& x : in[r]) x = random_elem<DT>(rng);
      user_in.push_back(std::make_unique<Mem>(in_n * es + 64));
      user_out.push_back(std::make_unique<Mem>(out_n * es + 64));
      inp[r] = in_buffer ? g.bufs[r]->p : user_in[r]->p;
      outp[r] = user_out[r]->p;
      std::memcpy(inp[r], in[r].data(), in_n * es);
      for (uint64_t i = 0; i < out_n; ++i) std::memcpy(outp[r] + i * es, &poison, es);
    }
    AllReduceFn fn = kernel_for<DT>(algo);
    std::fill(g.status.begin(), g.status.end(), 0);
    const uint64_t tag = call_tag(++g.seq, algo, n, DT, op);
    const uint64_t extra = (algo == Algo::kBroadcast ? root : stride) | (piped ? kMoverPipeline : 0);
    launch(all_ranks(W), grid, 16, [&](int r) {
      fn(g.buf_ptrs.data(), g.pad_ptrs.data(), inp[r], outp[r], n, r, W, DT, op, &g.status[r], kTimeout, extra, tag);
    });
    for (int r = 0; r < W; ++r) {
      CHECK(g.status[r] == 0, "%s call %d rank %d: status %#x", label, call, r, g.status[r]);
      std::vector<B> want(out_n, poison), col(W);
      for (uint64_t i = 0; i < n; ++i) {
        switch (algo) {
          case Algo::kReduceScatter:
            for (int q = 0; q < W; ++q) col[q] = in[q][r * S + i];
            want[i] = fold_ranks<DT>(op, col, all_ranks(W));
            break;
          case Algo::kAllGather:
            for (int q = 0; q < W; ++q) want[q * S + i] = in[q][i];
            break;
          case Algo::kBroadcast:
            want[i] = in[root][i];
            break;
          default:
            for (int q = 0; q < W; ++q) want[q * S + i] = in[q][r * S + i];
            break;
        }
      }
      std::vector<B> got(out_n);
      std::memcpy(got.data(), outp[r], out_n * es);
      uint64_t bad = 0, first = out_n;
      for (uint64_t i = 0; i < out_n; ++i)
        if (got[i] != want[i]) {
          if (first == out_n) first = i;
          ++bad;
        }
      CHECK(bad == 0, "%s call %d rank %d: %llu wrong, first at %llu", label, call, r, (unsigned long long)bad,
            (unsigned long long)first);
    }
  }
}

// mover_buffer is a symmetric buffer large enough for any mover launch of n
// elements per block over world ranks.
template <uint32_t DT>
size_t mover_buffer(int world, uint64_t n) {
  return std::max<size_t>(world * ((n * sizeof(Bits<DT>) + 15) & ~uint64_t(15)), 64);
}

template <uint32_t DT>
void movers(std::mt19937_64& rng, bool quick) {
  // 2100 elements are over the emulator's push bound (4 KiB) in every
  // type: the classic path.
  const std::vector<uint64_t> counts = quick ? std::vector<uint64_t>{1, 9, 100, 2100}
                                             : std::vector<uint64_t>{1, 2, 7, 8, 9, 17, 31, 100, 1031, 2100};
  for (Algo algo : {Algo::kReduceScatter, Algo::kAllGather, Algo::kBroadcast, Algo::kAllToAll}) {
    for (int world : {2, 3, 4, 8}) {
      for (uint64_t n : counts) {
        for (uint32_t grid : {1u, 3u}) {
          for (uint64_t stride : {uint64_t(0), n + 5}) {
            if (algo == Algo::kBroadcast && stride != 0) continue;
            Group g(world, mover_buffer<DT>(world, n));
            run_mover<DT>(g, algo, n, stride, grid, kSum, uint32_t(n % world), false, rng);
          }
        }
        if (algo == Algo::kReduceScatter) {
          Group g(world, mover_buffer<DT>(world, n));
          run_mover<DT>(g, algo, n, 0, 2, kMax, 0, false, rng);
          run_mover<DT>(g, algo, n, 0, 2, kMin, 0, false, rng);
        }
        if (algo != Algo::kReduceScatter && algo != Algo::kAllToAll) {
          Group g(world, mover_buffer<DT>(world, n));
          run_mover<DT>(g, algo, n, 0, 2, kSum, uint32_t(world - 1), true, rng);
        }
      }
      // The pipelined path (kMoverPipeline) at any size: 16-byte chunks of
      // 672 bytes (grid 3) to 4 KiB (grid 1, wide: over 8 KiB a block),
      // so the larger counts take many steps and both halves.
      for (uint64_t n : {uint64_t(1), uint64_t(9), uint64_t(1031), uint64_t(5003)}) {
        for (uint32_t grid : {1u, 3u}) {
          for (uint64_t stride : {uint64_t(0), n + 5}) {
            if (algo == Algo::kBroadcast && stride != 0) continue;
            Group g(world, 64);
            run_mover<DT>(g, algo, n, stride, grid, kSum, uint32_t(n % world), false, rng, true);
            if (algo == Algo::kReduceScatter) {
              run_mover<DT>(g, algo, n, stride, grid, kMax, 0, false, rng, true);
            }
          }
        }
      }
    }
  }
}

// In place, pipelined: input and output the same memory where the ABI
// allows it (all-gather: the input is output block me; all-to-all and
// broadcast: the same pointer; reduce-scatter: the output is input block
// me), over many chunks.
template <uint32_t DT>
void movers_in_place(std::mt19937_64& rng) {
  using B = Bits<DT>;
  const size_t es = sizeof(B);
  for (Algo algo : {Algo::kReduceScatter, Algo::kAllGather, Algo::kBroadcast, Algo::kAllToAll}) {
    for (int W : {2, 3, 4}) {
      const uint64_t n = 3001;
      Group g(W, 64);
      std::vector<std::vector<B>> in(W, std::vector<B>(W * n));
      std::vector<std::unique_ptr<Mem>> mem;
      std::vector<char*> inp(W), outp(W);
      for (int r = 0; r < W; ++r) {
        for (auto& x : in[r]) x = random_elem<DT>(rng);
        mem.push_back(std::make_unique<Mem>(W * n * es + 64));
        std::memcpy(mem[r]->p, in[r].data(), W * n * es);
        outp[r] = mem[r]->p;
        inp[r] = algo == Algo::kAllGather ? mem[r]->p + r * n * es : mem[r]->p;
        if (algo == Algo::kAllGather) std::memcpy(inp[r], in[r].data(), n * es);
      }
      if (algo == Algo::kReduceScatter) {
        for (int r = 0; r < W; ++r) outp[r] = mem[r]->p + r * n * es;
      }
      const uint32_t root = uint32_t(W - 1);
      AllReduceFn fn = kernel_for<DT>(algo);
      std::fill(g.status.begin(), g.status.end(), 0);
      const uint64_t tag = call_tag(++g.seq, algo, n, DT, kSum);
      const uint64_t extra = (algo == Algo::kBroadcast ? root : 0) | kMoverPipeline;
      launch(all_ranks(W), 2, 16, [&](int r) {
        fn(g.buf_ptrs.data(), g.pad_ptrs.data(), inp[r], outp[r], n, r, W, DT, kSum, &g.status[r], kTimeout, extra,
           tag);
      });
      for (int r = 0; r < W; ++r) {
        CHECK(g.status[r] == 0, "in-place mover %d world=%d rank %d: status %#x", int(algo), W, r, g.status[r]);
        uint64_t bad = 0;
        std::vector<B> col(W);
        for (uint64_t i = 0; i < n; ++i) {
          for (int q = 0; q < W; ++q) {
            B want{}, got{};
            uint64_t at = q * n + i;
            switch (algo) {
              case Algo::kReduceScatter:
                if (q != 0) continue;
                for (int p = 0; p < W; ++p) col[p] = in[p][r * n + i];
                want = fold_ranks<DT>(kSum, col, all_ranks(W));
                at = r * n + i;
                break;
              case Algo::kAllGather:
                want = in[q][i];
                break;
              case Algo::kBroadcast:
                if (q != 0) continue;
                want = in[root][i];
                at = i;
                break;
              default:
                want = in[q][r * n + i];
                break;
            }
            std::memcpy(&got, mem[r]->p + at * es, es);
            if (got != want) ++bad;
          }
        }
        CHECK(bad == 0, "in-place mover %d_%s world=%d rank %d: %llu wrong", int(algo), dtype_name<DT>(), W, r,
              (unsigned long long)bad);
      }
    }
  }
}

// One group, many different calls: the counters of every channel must stay
// in step across kernels, grids and the signal kernels.
void mixed_sequence(std::mt19937_64& rng) {
  Group g(4, 1 << 16);
  const uint32_t grids[] = {1, 3, 2, 5, 1};
  for (int i = 0; i < 5; ++i) {
    run_case<kBF16>(g, {Algo::kOneShot, 4, 1000 + uint64_t(i), grids[i], 32, kSum,
                        Mode::kOutOfPlace, false},
                    rng, 1);
    run_case<kF32>(g, {Algo::kTwoShot, 4, 777, grids[4 - i], 16, kSum, Mode::kUserInPlace, false},
                   rng, 1);
    // Another one-shot path between those (over the emulator's push bound
    // but for the first), with another grid.
    run_case<kF32>(g, {Algo::kOneShot, 4, 1024 + uint64_t(i), grids[(i + 2) % 5], 16, kSum,
                       Mode::kOutOfPlace, false},
                   rng, 1);
    // The pipeline shares the push area and the epoch with the one-shot.
    run_case<kI32>(g, {Algo::kPipeline, 4, 3000 + uint64_t(i), grids[(i + 1) % 5], 16, kSum,
                       Mode::kUserInPlace, false},
                   rng, 1);
    // The data-movement kernels' push and pipelined paths share the slots
    // and the epoch (two calls each); the classic path uses neither.
    run_mover<kF32>(g, Algo::kAllGather, 100 + uint64_t(i), 0, grids[i], kSum, 0, false, rng);
    run_mover<kBF16>(g, Algo::kReduceScatter, 50 + uint64_t(i), 0, grids[(i + 3) % 5], kSum, 0, false, rng);
    run_mover<kI32>(g, Algo::kAllToAll, 2000, 0, grids[(i + 4) % 5], kSum, 0, false, rng);
    run_mover<kF32>(g, Algo::kAllGather, 1500 + uint64_t(i), 0, grids[(i + 2) % 5], kSum, 0, false, rng, true);
    std::fill(g.status.begin(), g.status.end(), 0);
    launch(all_ranks(4), 1, 32, [&](int r) {
      intranode_barrier(g.pad_ptrs.data(), r, 4, 0, uint32_t(i), 0xf, &g.status[r], kTimeout);
    });
    for (int r = 0; r < 4; ++r) CHECK(g.status[r] == 0, "barrier %d rank %d: %#x", i, r, g.status[r]);
  }
  // One epoch step per one-shot call on the LL or push path, per pipeline
  // call and per mover call on its push or pipelined path (six per
  // iteration).
  uint32_t want = 5 + 5 * 6;
  for (int i = 0; i < 5; ++i) {
    want += uint64_t(1000 + i) * 2 <= push_max(4);
    want += uint64_t(1024 + i) * 4 <= push_max(4);
  }
  for (int r = 0; r < 4; ++r) {
    uint32_t e;
    std::memcpy(&e, g.pads[r]->p + kEpochWord, 4);
    CHECK(e == want, "rank %d: epoch %u after %u LL and push calls", r, e, want);
  }
}

// ll_stale_lines: a one-shot LL call of 200 elements (epoch 0) leaves
// lines at positions that the 255 one-element calls after it never write;
// the next call of 200 elements has epoch 256: the same slot and the same
// epoch byte. Without clearing consumed lines, its receivers could find the
// old tail line "complete, this epoch, another flag" and report a mismatch
// that is not there.
void ll_stale_lines(std::mt19937_64& rng) {
  Group g(2, 1 << 16);
  run_case<kF32>(g, {Algo::kOneShot, 2, 200, 1, 32, kSum, Mode::kOutOfPlace, false}, rng, 1);
  for (int i = 0; i < 255; ++i) {
    run_case<kF32>(g, {Algo::kOneShot, 2, 1, 1, 32, kSum, Mode::kOutOfPlace, false}, rng, 1);
  }
  run_case<kF32>(g, {Algo::kOneShot, 2, 200, 1, 32, kSum, Mode::kOutOfPlace, false}, rng, 1);
}

// ll_backoff: an LL receiver whose peer is late pauses between polls (the
// first pause 32 ns, doubling up to kLLSleepMax); one whose peer's lines
// are already there never pauses. Rank 0 starts 50 ms before rank 1.
void ll_backoff() {
  Group g(2, 1 << 16);
  constexpr uint64_t n = 64;
  std::vector<float> in[2] = {std::vector<float>(n, 1.0f), std::vector<float>(n, 2.0f)};
  std::vector<float> out[2] = {std::vector<float>(n), std::vector<float>(n)};
  std::mutex mu;
  port::Pauses got[2];
  const uint64_t tag = call_tag(++g.seq, Algo::kOneShot, n, kF32, kSum);
  const auto body = [&](int r) {
    port::pauses = {};
    intranode_one_shot_f32(g.buf_ptrs.data(), g.pad_ptrs.data(), in[r].data(), out[r].data(), n, r, 2, kF32,
                           kSum, &g.status[r], kTimeout, 0, tag);
    std::lock_guard<std::mutex> lock(mu);
    if (port::pauses.count > 0 && (got[r].count == 0 || port::pauses.first_ns < got[r].first_ns)) {
      got[r].first_ns = port::pauses.first_ns;
    }
    got[r].count += port::pauses.count;
    got[r].longest_ns = std::max(got[r].longest_ns, port::pauses.longest_ns);
  };
  std::thread early([&] { launch({0}, 1, 32, body); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  launch({1}, 1, 32, body);
  early.join();
  for (int r = 0; r < 2; ++r) {
    CHECK(g.status[r] == 0, "ll_backoff rank %d: status %#x", r, g.status[r]);
    for (uint64_t i = 0; i < n; ++i) {
      CHECK(out[r][i] == 3.0f, "ll_backoff rank %d element %llu: %g, want 3", r, (unsigned long long)i, out[r][i]);
    }
  }
  CHECK(got[0].count > 0 && got[0].first_ns == 32 && got[0].longest_ns == kLLSleepMax,
        "ll_backoff: the early rank paused %llu times, first %u ns, longest %u ns; want some, 32, %u",
        (unsigned long long)got[0].count, got[0].first_ns, got[0].longest_ns, kLLSleepMax);
  CHECK(got[1].count == 0, "ll_backoff: the late rank paused %llu times, want 0", (unsigned long long)got[1].count);
}

void signals() {
  Group g(3, 4096);
  // Two puts may precede two waits.
  launch({0}, 1, 1, [&](int r) {
    intranode_put_signal(g.pad_ptrs.data(), r, 3, 2, 40, 0, &g.status[r], kTimeout);
    intranode_put_signal(g.pad_ptrs.data(), r, 3, 2, 40, 0, &g.status[r], kTimeout);
  });
  launch({2}, 1, 1, [&](int r) {
    intranode_wait_signal(g.pad_ptrs.data(), r, 3, 0, 40, 0, &g.status[r], kTimeout);
    intranode_wait_signal(g.pad_ptrs.data(), r, 3, 0, 40, 0, &g.status[r], kTimeout);
  });
  CHECK(g.status[0] == 0 && g.status[2] == 0, "put/put/wait/wait: %#x %#x", g.status[0], g.status[2]);
  // A third wait has nothing to consume.
  launch({2}, 1, 1, [&](int r) {
    intranode_wait_signal(g.pad_ptrs.data(), r, 3, 0, 40, 0, &g.status[r], 20'000'000);
  });
  CHECK(g.status[2] == (kStatusTimeout | 0 << 8 | 40 << 16), "third wait: %#x", g.status[2]);
  // Barrier of a subset: ranks 0 and 2 only, block smaller than the world.
  std::fill(g.status.begin(), g.status.end(), 0);
  launch({0, 2}, 1, 1, [&](int r) {
    intranode_barrier(g.pad_ptrs.data(), r, 3, 0, kNumChannels - 1, 0b101, &g.status[r], kTimeout);
  });
  CHECK(g.status[0] == 0 && g.status[2] == 0, "subset barrier: %#x %#x", g.status[0], g.status[2]);
  // Bad arguments.
  launch({0}, 1, 32, [&](int r) {
    intranode_barrier(g.pad_ptrs.data(), r, 3, 0, kNumChannels, 0b101, &g.status[r], kTimeout);
  });
  CHECK(g.status[0] == (kStatusBadArgs | kNumChannels << 16), "channel %u: %#x", kNumChannels,
        g.status[0]);
}

// confirm: the barrier after a vendor library's call. It is a barrier
// while no rank's comm has failed; a rank whose failed word (status[1]) is
// set does not take part, and its peers time out naming it.
void confirm() {
  Group g(3, 4096);
  uint32_t st[3][2] = {};
  launch(all_ranks(3), 1, 32, [&](int r) {
    intranode_confirm(g.pad_ptrs.data(), r, 3, 0, 129, 0b111, st[r], kTimeout);
  });
  for (int r = 0; r < 3; ++r) CHECK(st[r][0] == 0, "confirm rank %d: %#x", r, st[r][0]);
  st[1][1] = 1;
  launch(all_ranks(3), 1, 32, [&](int r) {
    intranode_confirm(g.pad_ptrs.data(), r, 3, 0, 129, 0b111, st[r], 20'000'000);
  });
  CHECK(st[1][0] == 0, "the failed rank reports nothing: %#x", st[1][0]);
  for (int r : {0, 2}) {
    CHECK(st[r][0] == (kStatusTimeout | 1 << 8 | 129 << 16), "rank %d after rank 1 failed: %#x", r, st[r][0]);
  }
}

void failures_end_in_status() {
  // A missing rank: the others time out on the first barrier and say who.
  Group g(2, 1 << 16);
  std::vector<float> in(100, 1.0f), out(100);
  const auto t0 = std::chrono::steady_clock::now();
  launch({0}, 2, 16, [&](int r) {
    intranode_one_shot_f32(g.buf_ptrs.data(), g.pad_ptrs.data(), in.data(), out.data(), 100, r, 2,
                           kF32, kSum, &g.status[r], 50'000'000, 0, call_tag(1, Algo::kOneShot, 100, kF32, kSum));
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint32_t code = g.status[0] & 0xff, peer = g.status[0] >> 8 & 0xff;
  CHECK(code == kStatusTimeout && peer == 1, "missing rank: status %#x", g.status[0]);
  CHECK(secs < 1.0, "missing rank: took %.2fs", secs);

  // Bad arguments: wrong dtype, grid over 32, block smaller than the world,
  // misaligned element, one-shot output over the buffer, HCM off world 8.
  struct Bad {
    const char* what;
    uint32_t dtype, grid, block, world;
    uint64_t in_off, out_off;
    Algo algo;
    bool out_is_buf;
  } bad[] = {
      {"dtype", kF16, 1, 16, 2, 0, 0, Algo::kOneShot, false},
      {"grid", kF32, kKernelChannels + 1, 4, 2, 0, 0, Algo::kOneShot, false},
      {"block", kF32, 1, 2, 4, 0, 0, Algo::kTwoShot, false},
      {"misaligned", kF32, 1, 16, 2, 2, 0, Algo::kTwoShot, false},
      {"one-shot output=buf", kF32, 1, 16, 2, 0, 0, Algo::kOneShot, true},
      {"hcm world 4", kF32, 1, 16, 4, 0, 0, Algo::kHCM, false},
  };
  for (const Bad& b : bad) {
    Group h(int(b.world), 1 << 16);
    launch({0}, b.grid, b.block, [&](int r) {
      AllReduceFn fn = kernel_for<kF32>(b.algo);
      void* o = b.out_is_buf ? h.bufs[0]->p : reinterpret_cast<char*>(out.data()) + b.out_off;
      fn(h.buf_ptrs.data(), h.pad_ptrs.data(), reinterpret_cast<char*>(in.data()) + b.in_off, o,
         10, r, b.world, b.dtype, kSum, &h.status[r], kTimeout, 0, 0);
    });
    CHECK((h.status[0] & 0xff) == kStatusBadArgs, "bad %s: status %#x", b.what, h.status[0]);
  }
}

// mismatched_calls: ranks that make different calls (kernels/abi.go, "Call
// agreement") all end with StatusMismatch naming a peer, long before the
// deadline, whatever paths and grids the calls take.
void mismatched_calls() {
  struct Side {
    Algo algo;
    uint64_t count;  // f32 elements
    uint32_t op;
    uint32_t seq;
    uint32_t grid;
  };
  const uint64_t ll = ll_max(2) / 4, push = push_max(2) / 4;
  // slow: the rank (if any) on the LL path against a peer on another path.
  // LL spins do not watch callIn (register pressure), so that rank learns
  // of the difference only at its deadline; the host then reads the
  // records (collective.ErrMismatch either way).
  struct Mis {
    const char* what;
    Side a, b;
    int slow = -1;
    // lagging: some LL threads wait for lines the peer never writes and
    // stop when they next poll the status word, which the emulator's
    // threads, yielding on two cores, take long to reach.
    bool lagging = false;
  } cases[] = {
      {"LL count", {Algo::kOneShot, ll / 2, kSum, 1, 1}, {Algo::kOneShot, ll / 4, kSum, 1, 1}, -1, true},
      {"LL op", {Algo::kOneShot, 40, kSum, 1, 1}, {Algo::kOneShot, 40, kMax, 1, 1}},
      {"LL skipped call", {Algo::kOneShot, 40, kSum, 1, 1}, {Algo::kOneShot, 40, kSum, 2, 1}},
      {"LL vs two-shot", {Algo::kOneShot, 40, kSum, 1, 1}, {Algo::kTwoShot, 40, kSum, 1, 3}, 0},
      {"LL vs push", {Algo::kOneShot, ll / 2, kSum, 1, 2}, {Algo::kOneShot, push / 2, kSum, 1, 3}, 0},
      {"push count", {Algo::kOneShot, push / 2, kSum, 1, 2}, {Algo::kOneShot, push / 2 + 4, kSum, 1, 2}},
      {"classic count", {Algo::kOneShot, push + 64, kSum, 1, 2}, {Algo::kOneShot, push + 128, kSum, 1, 2}},
      {"two-shot skipped call", {Algo::kTwoShot, 1000, kSum, 1, 2}, {Algo::kTwoShot, 1000, kSum, 2, 2}},
      {"two-shot vs classic", {Algo::kTwoShot, push + 64, kSum, 1, 2}, {Algo::kOneShot, push + 64, kSum, 1, 2}},
      {"pipeline count", {Algo::kPipeline, push * 2, kSum, 1, 3}, {Algo::kPipeline, push * 2 + 4, kSum, 1, 3}},
      {"pipeline vs push", {Algo::kPipeline, push / 2, kSum, 1, 2}, {Algo::kOneShot, push / 2, kSum, 1, 2}},
      {"pipeline vs two-shot", {Algo::kPipeline, 1000, kSum, 1, 2}, {Algo::kTwoShot, 1000, kSum, 1, 2}},
  };
  for (const Mis& m : cases) {
    Group g(2, 1 << 20);
    const uint64_t len = 2 * push + 256;
    std::vector<float> in0(len, 1.0f), in1(len, 2.0f), out0(len), out1(len);
    const Side side[2] = {m.a, m.b};
    float* ins[2] = {in0.data(), in1.data()};
    float* outs[2] = {out0.data(), out1.data()};
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r) {
      ranks.emplace_back([&, r] {
        const Side& sd = side[r];
        launch({r}, sd.grid, 64, [&](int rr) {
          kernel_for<kF32>(sd.algo)(g.buf_ptrs.data(), g.pad_ptrs.data(), ins[rr], outs[rr], sd.count,
                                    rr, 2, kF32, sd.op, &g.status[rr], 2'000'000'000ull, 0,
                                    call_tag(sd.seq, sd.algo, sd.count, kF32, sd.op));
        });
      });
    }
    for (auto& th : ranks) th.join();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (int r = 0; r < 2; ++r) {
      const uint32_t code = g.status[r] & 0xff, peer = g.status[r] >> 8 & 0xff;
      const uint32_t want = r == m.slow ? kStatusTimeout : kStatusMismatch;
      CHECK(code == want && peer == uint32_t(1 - r), "mismatch %s: rank %d status %#x (%.2fs)",
            m.what, r, g.status[r], secs);
      const uint64_t* rec = reinterpret_cast<const uint64_t*>(g.pads[r]->p + kRecordOffset);
      CHECK(rec[0] == call_tag(side[r].seq, side[r].algo, side[r].count, kF32, side[r].op) &&
                rec[1] == side[r].count,
            "mismatch %s: rank %d record %#llx %llu", m.what, r, (unsigned long long)rec[0],
            (unsigned long long)rec[1]);
    }
    CHECK(m.slow >= 0 || m.lagging || secs < 1.5, "mismatch %s: took %.2fs, the deadline is 2s", m.what, secs);
  }
}

// copy_agreement: the copy path's agreement (kMoverSync in Extra) is a
// barrier that carries the Call and touches no data: ranks whose Calls
// agree pass with the outputs and buffers as they were; Calls that differ
// end in StatusMismatch naming the peer on both ranks; a rank whose status
// word is already set does not signal, so its peer times out naming it;
// a reduce-scatter cannot be one (StatusBadArgs).
void copy_agreement() {
  struct Trial {
    const char* what;
    uint64_t tag[2];
    uint32_t preset[2];  // status words before the launch
    Algo algo;
    uint32_t want[2];    // status codes after it
  } trials[] = {
      {"agree", {call_tag(1, Algo::kAllGather, 1000, kF32, kSum), call_tag(1, Algo::kAllGather, 1000, kF32, kSum)},
       {0, 0}, Algo::kAllGather, {0, 0}},
      {"differ", {call_tag(1, Algo::kAllToAll, 1000, kF32, kSum), call_tag(1, Algo::kAllToAll, 1001, kF32, kSum)},
       {0, 0}, Algo::kAllToAll, {kStatusMismatch, kStatusMismatch}},
      {"failed before", {call_tag(1, Algo::kBroadcast, 1000, kF32, kSum), call_tag(1, Algo::kBroadcast, 1000, kF32, kSum)},
       {kStatusTimeout | 1u << 8, 0}, Algo::kBroadcast, {kStatusTimeout, kStatusTimeout}},
      {"reduce-scatter", {call_tag(1, Algo::kReduceScatter, 1000, kF32, kSum),
                          call_tag(1, Algo::kReduceScatter, 1000, kF32, kSum)},
       {0, 0}, Algo::kReduceScatter, {kStatusBadArgs, kStatusBadArgs}},
  };
  for (const Trial& t : trials) {
    Group g(2, 1 << 20);
    std::vector<float> in[2], out[2];
    for (int r = 0; r < 2; ++r) {
      in[r].assign(4096, float(r + 1));
      out[r].assign(4096, -7.0f);
      g.status[r] = t.preset[r];
      std::memset(g.bufs[r]->p, 0x5a, 1 << 20);
    }
    // The broadcast's Extra is its root; the others' the block stride.
    const uint64_t extra = (t.algo == Algo::kBroadcast ? 0 : 1000) | kMoverSync;
    launch({0, 1}, 3, 64, [&](int r) {
      kernel_for<kF32>(t.algo)(g.buf_ptrs.data(), g.pad_ptrs.data(), in[r].data(), out[r].data(), 1000, r, 2, kF32,
                               kSum, &g.status[r], 200'000'000ull, extra, t.tag[r]);
    });
    for (int r = 0; r < 2; ++r) {
      const uint32_t code = g.status[r] & 0xff, peer = g.status[r] >> 8 & 0xff;
      CHECK(code == t.want[r] && (code == 0 || code == kStatusBadArgs || peer == uint32_t(1 - r)),
            "copy agreement %s: rank %d status %#x", t.what, r, g.status[r]);
      bool untouched = true;
      for (float v : out[r]) untouched = untouched && v == -7.0f;
      for (int i = 0; i < (1 << 20); ++i) untouched = untouched && uint8_t(g.bufs[r]->p[i]) == 0x5a;
      CHECK(untouched, "copy agreement %s: rank %d wrote data", t.what, r);
      // A rank that had failed publishes no Call into its peer's slot,
      // where a peer still in an earlier call would take it for another.
      const uint64_t* slot = reinterpret_cast<const uint64_t*>(
          g.pads[1 - r]->p + kCallInOffset + (uint64_t(r) * 2 + (t.tag[r] >> 32 & 1)) * 8);
      CHECK((t.preset[r] == 0) == (*slot == t.tag[r]) || t.want[r] == kStatusBadArgs,
            "copy agreement %s: rank %d's Call in its peer's slot: %#llx", t.what, r, (unsigned long long)*slot);
    }
  }
}

}  // namespace

// divide_case runs intranode_divide_<DT> on count elements at offset
// `shift` elements into its allocations (0: 16-byte aligned), in place or
// not, and checks every quotient against the host's own division and
// that nothing around the output changed.
template <uint32_t DT>
void divide_case(AllReduceFn fn, std::mt19937_64& rng, uint32_t world, uint64_t count, uint64_t shift,
                 bool in_place, uint32_t grid) {
  using T = Type<DT>;
  constexpr uint64_t size = sizeof(Bits<DT>);
  const uint64_t bytes = (count + shift + 8) * size;
  Mem in(bytes), out(bytes);
  std::vector<Bits<DT>> x(count + shift + 8);
  for (auto& e : x) e = random_elem<DT>(rng);
  std::memcpy(in.p, x.data(), bytes);
  std::memcpy(out.p, x.data(), bytes);
  char* src = in.p + shift * size;
  char* dst = (in_place ? in.p : out.p) + shift * size;
  uint32_t status = 0;
  launch({0}, grid, 64, [&](int) {
    fn(nullptr, nullptr, src, dst, count, 0, world, DT, 0, &status, kTimeout, 0, 0);
  });
  CHECK(status == 0, "divide dtype %u world %u count %llu: status %#x", DT, world, (unsigned long long)count, status);
  const char* res = in_place ? in.p : out.p;
  for (uint64_t i = 0; i < count + shift + 8; ++i) {
    Bits<DT> got, want = x[i];
    std::memcpy(&got, res + i * size, size);
    if (i >= shift && i < shift + count) {
      if constexpr (DT == kI32) {
        want = uint32_t(int32_t(x[i]) / int32_t(world));
      } else {
        want = T::down(T::up(x[i]) / (typename T::Acc)(world));
      }
    }
    if (got != want) {
      CHECK(false, "divide dtype %u world %u count %llu shift %llu in place %d: element %llu", DT, world,
            (unsigned long long)count, (unsigned long long)shift, int(in_place), (unsigned long long)i);
      return;
    }
  }
}

template <uint32_t DT>
void divide_all(AllReduceFn fn, std::mt19937_64& rng) {
  for (uint32_t world = 1; world <= kMaxRanks; ++world) {
    for (uint64_t count : {1ull, 7ull, 8ull, 1000ull, 4099ull, 20011ull}) {
      for (uint64_t shift : {0ull, 1ull}) {
        for (bool in_place : {false, true}) {
          divide_case<DT>(fn, rng, world, count, shift, in_place, count > 100 ? 3 : 1);
        }
      }
    }
  }
}

// divide: every dtype, divisor, tail and alignment (20011 elements give
// each of the 192 threads more vectors than one round of its loads
// holds); a divisor of 0 or 9 and a misaligned pointer are refused
// through the status word with nothing written.
void divide(std::mt19937_64& rng) {
  divide_all<kBF16>(intranode_divide_bf16, rng);
  divide_all<kF16>(intranode_divide_f16, rng);
  divide_all<kF32>(intranode_divide_f32, rng);
  divide_all<kF64>(intranode_divide_f64, rng);
  divide_all<kI32>(intranode_divide_i32, rng);
  Mem m(64);
  std::memset(m.p, 0x3c, 64);
  for (uint32_t world : {0u, 9u, 2u}) {
    uint32_t status = 0;
    char* p = m.p + (world == 2 ? 2 : 0);  // world 2: a float not 4-byte aligned
    launch({0}, 1, 32, [&](int) { intranode_divide_f32(nullptr, nullptr, p, p, 4, 0, world, kF32, 0, &status, kTimeout, 0, 0); });
    CHECK((status & 0xff) == kStatusBadArgs, "divide world %u: status %#x, want bad arguments", world, status);
    for (int i = 0; i < 64; ++i) CHECK(uint8_t(m.p[i]) == 0x3c, "divide world %u wrote byte %d", world, i);
  }
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "-quick";
  std::mt19937_64 rng(1);
  if (argc > 1 && std::string(argv[1]) == "-ll-stale") {  // that case alone
    ll_stale_lines(rng);
    std::printf(failures == 0 ? "emu: ll_stale_lines passed\n" : "emu: ll_stale_lines: %d failures\n", failures);
    return failures == 0 ? 0 : 1;
  }
  if (argc > 1 && std::string(argv[1]) == "-ll-backoff") {  // that case alone
    ll_backoff();
    std::printf(failures == 0 ? "emu: ll_backoff passed\n" : "emu: ll_backoff: %d failures\n", failures);
    return failures == 0 ? 0 : 1;
  }
  if (argc > 1 && std::string(argv[1]) == "-copy") {  // that case alone
    copy_agreement();
    std::printf(failures == 0 ? "emu: copy_agreement passed\n" : "emu: copy_agreement: %d failures\n", failures);
    return failures == 0 ? 0 : 1;
  }
  if (argc > 1 && std::string(argv[1]) == "-divide") {  // that case alone
    divide(rng);
    std::printf(failures == 0 ? "emu: divide passed\n" : "emu: divide: %d failures\n", failures);
    return failures == 0 ? 0 : 1;
  }
  divide(rng);
  signals();
  confirm();
  failures_end_in_status();
  mismatched_calls();
  copy_agreement();
  ll_stale_lines(rng);
  ll_backoff();
  mixed_sequence(rng);
  sweep<kBF16>(rng, quick);
  sweep<kF16>(rng, quick);
  sweep<kF32>(rng, quick);
  sweep<kF64>(rng, true);
  sweep<kI32>(rng, true);
  movers<kBF16>(rng, quick);
  movers<kF32>(rng, true);
  movers<kI32>(rng, true);
  movers<kF64>(rng, true);
  movers_in_place<kBF16>(rng);
  movers_in_place<kI32>(rng);
  if (failures != 0) {
    std::fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  std::printf("emu: all cases passed\n");
  return 0;
}
