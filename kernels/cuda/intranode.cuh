// intranode.cuh: the collective algorithms of the kernel ABI (kernels/abi.go),
// written once for every GPU backend.
//
// This header touches the hardware only through namespace port, so the
// including translation unit must include a port header first: port.cuh for
// CUDA, kernels/hip/port_hip.h for HIP. The extern "C" entry points live in
// entry.cuh.
//
// Work split. Block b of a launch is the block that talks on signal channel b,
// and it only ever reads what block b of the other ranks wrote. Every block
// therefore owns the same slice of the data on every rank: the split below is
// a pure function of (count, world, gridDim, blockIdx), so all ranks must
// launch the same grid (the host computes it from the message size alone).
// Inside a block, threads stride over 16-byte vectors; a last partial vector
// is done element by element by the first threads of the block that owns it.
//
// Barriers. Thread t < world (t != rank) of each block is the block's link to
// rank t on the block's channel: it keeps that link's sent/recv counters in
// registers, puts with a release store into the peer's inbox and spins with
// acquire loads on its own inbox, all in parallel with the other links'
// threads. A block_sync before the put publishes the whole block's writes;
// one after the wait orders the whole block's later reads.
//
// Slots. The one-shot's LL and push paths write into areas of the peers'
// signal pads instead of reading the peers' buffers, and alternate between
// two slots there by a per-rank epoch (kernels/abi.go says why no closing
// barrier is needed). Every block reads the epoch; the last block of a
// launch to count itself in advances it (epoch_count_in/out). The LL path
// needs no barrier at all: each 8-byte half of a 16-byte line carries the
// call's flag beside 4 bytes of data, so the data is there as soon as the
// flag is (NCCL's LL protocol).
//
// Reduction order. Each 16-byte step loads the vectors of all sources first,
// then folds them in ascending rank order (acc = x0; acc = op(acc, x1); ...),
// so every rank computes the same bits. The order in which the loads are
// issued carries no meaning: they are independent and in flight together.
#pragma once

namespace intranode {

// ABI constants, mirrored from kernels/abi.go.
constexpr uint32_t kMaxRanks = 8;
constexpr uint32_t kNumChannels = 192;
constexpr uint32_t kKernelChannels = 128;
constexpr uint64_t kInboxOffset = 0;
constexpr uint64_t kSentOffset = uint64_t(kNumChannels) * kMaxRanks * 4;
constexpr uint64_t kRecvOffset = 2 * uint64_t(kNumChannels) * kMaxRanks * 4;
constexpr uint64_t kStateOffset = 3 * uint64_t(kNumChannels) * kMaxRanks * 4;
constexpr uint64_t kStateSize = 2048;
constexpr uint64_t kEpochWord = kStateOffset;
constexpr uint64_t kTicketWord = kStateOffset + 4;
constexpr uint64_t kRecordOffset = kStateOffset + 16;
constexpr uint64_t kCallInOffset = kStateOffset + 64;
constexpr uint64_t kLLOffset = kStateOffset + kStateSize;
// kernels.LLSize, kernels.OneShotLLMaxBytes, kernels.PushSize and
// kernels.OneShotPushMaxBytes. The CPU emulator overrides them to reach
// every one-shot path with small messages; a real build must match the Go
// constants (the pad is allocated from them).
#ifndef INTRANODE_LL_SIZE
#define INTRANODE_LL_SIZE (1ull << 20)
#endif
#ifndef INTRANODE_LL_MAX_BYTES
#define INTRANODE_LL_MAX_BYTES (256ull << 10)
#endif
#ifndef INTRANODE_PUSH_SIZE
#define INTRANODE_PUSH_SIZE (64ull << 20)
#endif
#ifndef INTRANODE_PUSH_MAX_BYTES
#define INTRANODE_PUSH_MAX_BYTES (8ull << 20)
#endif
constexpr uint64_t kLLSize = INTRANODE_LL_SIZE;
constexpr uint64_t kLLMaxBytes = INTRANODE_LL_MAX_BYTES;
constexpr uint64_t kPushOffset = kLLOffset + kLLSize;
constexpr uint64_t kPushSize = INTRANODE_PUSH_SIZE;
constexpr uint64_t kPushMaxBytes = INTRANODE_PUSH_MAX_BYTES;
// kernels.PipelineWideBytes: Pipeline messages over this use both halves of
// the push area (chunks twice as large, a closing signal when needed).
#ifndef INTRANODE_PIPE_WIDE_BYTES
#define INTRANODE_PIPE_WIDE_BYTES (16ull << 20)
#endif
constexpr uint64_t kPipeWideBytes = INTRANODE_PIPE_WIDE_BYTES;

// kernels.PushSplitBytes: push-path messages over this go in two rounds.
#ifndef INTRANODE_PUSH_SPLIT_BYTES
#define INTRANODE_PUSH_SPLIT_BYTES (2ull << 20)
#endif
constexpr uint64_t kPushSplitBytes = INTRANODE_PUSH_SPLIT_BYTES;

constexpr uint32_t kStatusTimeout = 1;
constexpr uint32_t kStatusBadArgs = 2;
constexpr uint32_t kStatusMismatch = 3;

// kernels.MoverPipeline: this bit of a data-movement launch's Extra asks
// for the pipelined path (mover_pipeline); the rest of Extra keeps its
// meaning (the block stride, or the broadcast's root).
constexpr uint64_t kMoverPipeline = 1ull << 62;
// kernels.MoverSync: the copy path's agreement (mover_sync), no data.
constexpr uint64_t kMoverSync = 1ull << 61;
constexpr uint64_t kMoverModes = kMoverPipeline | kMoverSync;

// Element types (backend.DType) and operators (backend.ReduceOp).
constexpr uint32_t kF32 = 0;
constexpr uint32_t kF16 = 1;
constexpr uint32_t kBF16 = 2;
constexpr uint32_t kF64 = 3;
constexpr uint32_t kI32 = 4;

constexpr uint32_t kSum = 0;
constexpr uint32_t kMax = 1;
constexpr uint32_t kMin = 2;

using port::V16;

// kPeers<N> is the length of per-peer arrays in code specialised for at most
// N ranks (at least one, so that the array type is valid at N == 1).
template <int N>
constexpr int kPeers = N > 1 ? N - 1 : 1;

// ---------------------------------------------------------------------------
// Status word and signal pads.

INTRANODE_DEVICE void report(uint32_t* status, uint32_t code, uint32_t peer, uint32_t ch) {
  if (status != nullptr) {
    port::status_cas(status, (code & 0xff) | (peer & 0xff) << 8 | (ch & 0xff) << 16);
  }
}

// The call agreement (kernels/abi.go, "Call agreement"). Everything here
// is out of line and takes what it needs as arguments: the spin loops that
// call it are register-bound, and the checks run once per launch or once
// every 16 spins.

// call_in is callIn[src][seq mod 2] of the pad at pad.
INTRANODE_DEVICE uint64_t* call_in(uint64_t pad, uint32_t src, uint64_t call) {
  return reinterpret_cast<uint64_t*>(pad + kCallInOffset + (uint64_t(src) * 2 + (call >> 32 & 1)) * 8);
}

// publish_call puts this rank's Call into callIn[me][seq mod 2] of peer_pad.
INTRANODE_DEVICE void publish_call(uint64_t peer_pad, uint32_t me, uint64_t call) {
  if (call != 0) {
    port::store_word64(call_in(peer_pad, me, call), call);
  }
}

// call_agrees runs after a signal from src: src published its Call first.
INTRANODE_DEVICE bool call_agrees(uint64_t my_pad, uint32_t src, uint64_t call, uint32_t* status,
                                    uint32_t ch) {
  if (call == 0 || port::load_word64(call_in(my_pad, src, call)) == call) {
    return true;
  }
  report(status, kStatusMismatch, src, ch);
  return false;
}

// watch_call runs now and then while a thread spins for src: true means
// stop, because src's Call for this sequence number differs (reported
// here) or another thread of the launch has already reported a failure.
INTRANODE_DEVICE bool watch_call(uint64_t my_pad, uint32_t src, uint64_t call, uint32_t* status,
                                   uint32_t ch, uint32_t spin) {
  if (call == 0) {
    return false;
  }
  const uint64_t v = port::load_word64(call_in(my_pad, src, call));
  if (v >> 32 == call >> 32 && v != call) {
    report(status, kStatusMismatch, src, ch);
    return true;
  }
  return (spin & 1023) == 0 && status != nullptr && port::load_status(status) != 0;
}

INTRANODE_DEVICE uint32_t* pad_word(uint64_t pad, uint64_t area, uint32_t ch, uint32_t rank) {
  return reinterpret_cast<uint32_t*>(pad + area + (uint64_t(ch) * kMaxRanks + rank) * 4);
}

// Wrap-safe "have counted up to want".
INTRANODE_DEVICE bool arrived(uint32_t have, uint32_t want) {
  return static_cast<int32_t>(have - want) >= 0;
}

// Link is one thread's end of the (channel, peer) signal pair: PutSignal and
// WaitSignal of the ABI with the local counters cached in registers.
struct Link {
  uint32_t* sent;    // sent[ch][peer] in my pad
  uint32_t* recv;    // recv[ch][peer] in my pad
  uint32_t* inbox;   // inbox[ch][peer] in my pad, written by the peer
  uint32_t* remote;  // inbox[ch][me] in the peer's pad
  uint32_t sent_count;
  uint32_t recv_count;

  INTRANODE_DEVICE void open(uint64_t my_pad, uint64_t peer_pad, uint32_t me, uint32_t peer,
                             uint32_t ch) {
    sent = pad_word(my_pad, kSentOffset, ch, peer);
    recv = pad_word(my_pad, kRecvOffset, ch, peer);
    inbox = pad_word(my_pad, kInboxOffset, ch, peer);
    remote = pad_word(peer_pad, kInboxOffset, ch, me);
    sent_count = port::load_plain(sent);
    recv_count = port::load_plain(recv);
  }

  INTRANODE_DEVICE void put() {
    ++sent_count;
    port::store_release(remote, sent_count);
    port::store_plain(sent, sent_count);
  }

  // wait returns kWaitOK once the peer's next signal is in, kWaitTimeout
  // when timeout_ns pass first (the caller reports it), or kWaitStopped
  // when the agreement (if any) says to stop (already reported).
  static constexpr int kWaitOK = 0, kWaitTimeout = 1, kWaitStopped = 2;
  // With a Call, the spin also watches the agreement (watch_call): my_pad
  // is this rank's pad, peer the rank waited for.
  INTRANODE_DEVICE int wait(uint64_t timeout_ns, uint64_t call = 0, uint64_t my_pad = 0,
                            uint32_t* status = nullptr, uint32_t peer = 0, uint32_t ch = 0) {
    const uint32_t want = recv_count + 1;
    if (!arrived(port::load_acquire(inbox), want)) {
      const uint64_t start = port::now_ns();
      for (uint32_t spin = 1; !arrived(port::load_acquire(inbox), want); ++spin) {
        if (port::now_ns() - start > timeout_ns) {
          return kWaitTimeout;
        }
        if (call != 0 && (spin & 15) == 0 && watch_call(my_pad, peer, call, status, ch, spin)) {
          return kWaitStopped;
        }
      }
    }
    recv_count = want;
    port::store_plain(recv, want);
    return kWaitOK;
  }
};

// Team is a block's side of Barrier(all) on its channel.
struct Team {
  Link link;
  bool active;  // this thread owns the link to rank `peer`
  uint32_t peer;
  uint32_t ch;
  uint32_t* status;
  uint64_t timeout_ns;
  volatile int* failed;  // block-shared: some link timed out
  uint64_t call;         // kernels.CallTag, 0: no agreement check
  uint64_t my_pad;
  uint64_t peer_pad;
  uint32_t rank;
  bool first;  // the first barrier of the launch carries the agreement

  // open takes the pad pointers already loaded (see check) so that
  // the counter loads are the only dependent step before the first put.
  INTRANODE_DEVICE void open(uint64_t my_pad_, uint64_t peer_pad_, uint32_t rank_, uint32_t world,
                             uint32_t* status_word, uint64_t timeout, volatile int* shared_failed,
                             uint64_t call_tag) {
    peer = port::thread_index();
    ch = port::block_index();
    status = status_word;
    timeout_ns = timeout;
    failed = shared_failed;
    call = call_tag;
    my_pad = my_pad_;
    peer_pad = peer_pad_;
    rank = rank_;
    first = true;
    active = peer < world && peer != rank;
    if (peer == 0) {
      *failed = 0;
    }
    if (active) {
      link.open(my_pad, peer_pad, rank, peer, ch);
    }
  }

  // signal is this thread's link's part of a barrier. In the first barrier
  // the Call goes out before the signal (whose release publishes it) and
  // is checked after the peer's signal is in.
  INTRANODE_DEVICE void signal() {
    if (active) {
      if (first) {
        publish_call(peer_pad, rank, call);
      }
      link.put();
      const int w = link.wait(timeout_ns, call, my_pad, status, peer, ch);
      if (w == Link::kWaitTimeout) {
        report(status, kStatusTimeout, peer, ch);
      }
      if (w != Link::kWaitOK || (first && !call_agrees(my_pad, peer, call, status, ch))) {
        *failed = 1;
      }
    }
    first = false;
  }

  // barrier returns false on every thread of the block when a link timed
  // out; the caller then returns without touching the data.
  INTRANODE_DEVICE bool barrier() {
    port::block_sync();
    signal();
    port::block_sync();
    return *failed == 0;
  }

  // post and receive are the two halves of a barrier, for kernels that do
  // work between them (the Pipeline). post publishes the block's writes
  // (and, when asked, the Call first); receive waits for every peer's next
  // signal (checking the peer's Call when asked) and returns false on every
  // thread when a link failed.
  INTRANODE_DEVICE void post(bool publish) {
    port::block_sync();
    if (active) {
      if (publish) {
        publish_call(peer_pad, rank, call);
      }
      link.put();
    }
  }

  INTRANODE_DEVICE bool receive(bool agree) {
    if (active) {
      const int w = link.wait(timeout_ns, call, my_pad, status, peer, ch);
      if (w == Link::kWaitTimeout) {
        report(status, kStatusTimeout, peer, ch);
      }
      if (w != Link::kWaitOK || (agree && !call_agrees(my_pad, peer, call, status, ch))) {
        *failed = 1;
      }
    }
    port::block_sync();
    return *failed == 0;
  }

  // last_barrier ends a kernel: nothing follows, so only the link threads
  // wait.
  INTRANODE_DEVICE void last_barrier() {
    port::block_sync();
    signal();
  }
};

// ---------------------------------------------------------------------------
// Element types and operators.

template <uint32_t DT>
struct Type;

// Type<DT>: Bits is the element's storage, Acc the type it is reduced in;
// up widens (exactly), down rounds to nearest even.
#define INTRANODE_TYPE(DT, BITS, ACC, UP, DOWN)                              \
  template <>                                                                \
  struct Type<DT> {                                                          \
    using Bits = BITS;                                                       \
    using Acc = ACC;                                                         \
    static INTRANODE_DEVICE Acc up(Bits b) { return UP(b); }                 \
    static INTRANODE_DEVICE Bits down(Acc a) { return DOWN(a); }             \
  };
INTRANODE_TYPE(kF32, uint32_t, float, port::f32_from_bits, port::f32_bits)
INTRANODE_TYPE(kF16, uint16_t, float, port::f16_to_f32, port::f32_to_f16)
INTRANODE_TYPE(kBF16, uint16_t, float, port::bf16_to_f32, port::f32_to_bf16)
INTRANODE_TYPE(kF64, uint64_t, double, port::f64_from_bits, port::f64_bits)
INTRANODE_TYPE(kI32, uint32_t, int32_t, static_cast<int32_t>, static_cast<uint32_t>)
#undef INTRANODE_TYPE

// Fold is the reduction operator. Sum gets its own code; max and min share
// one instantiation (kMinMax) that picks at run time, which costs nothing on
// GPUs whose min/max instruction takes the choice as a predicate and halves
// the code the module carries.
constexpr uint32_t kMinMax = 3;

template <uint32_t OP>
struct Fold;

template <>
struct Fold<kSum> {
  INTRANODE_DEVICE explicit Fold(uint32_t) {}
  INTRANODE_DEVICE float operator()(float a, float b) const { return port::add_f32(a, b); }
  INTRANODE_DEVICE double operator()(double a, double b) const { return port::add_f64(a, b); }
  INTRANODE_DEVICE int32_t operator()(int32_t a, int32_t b) const {
    return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  }
};

template <>
struct Fold<kMinMax> {
  bool max;
  INTRANODE_DEVICE explicit Fold(uint32_t op) : max(op == kMax) {}
  INTRANODE_DEVICE float operator()(float a, float b) const {
    return max ? fmaxf(a, b) : fminf(a, b);
  }
  INTRANODE_DEVICE double operator()(double a, double b) const {
    return max ? fmax(a, b) : fmin(a, b);
  }
  INTRANODE_DEVICE int32_t operator()(int32_t a, int32_t b) const {
    return max ? (a > b ? a : b) : (a < b ? a : b);
  }
};

template <uint32_t DT>
INTRANODE_DEVICE typename Type<DT>::Bits load_elem(const char* p) {
  using Bits = typename Type<DT>::Bits;
  if constexpr (sizeof(Bits) == 2) {
    return port::load_u16(p);
  } else if constexpr (sizeof(Bits) == 4) {
    return port::load_u32(p);
  } else {
    return port::load_u64(p);
  }
}

template <uint32_t DT>
INTRANODE_DEVICE void store_elem(char* p, typename Type<DT>::Bits v) {
  using Bits = typename Type<DT>::Bits;
  if constexpr (sizeof(Bits) == 2) {
    port::store_u16(p, v);
  } else if constexpr (sizeof(Bits) == 4) {
    port::store_u32(p, v);
  } else {
    port::store_u64(p, v);
  }
}

// Pack views one 16-byte vector as elements.
template <uint32_t DT>
union Pack {
  static constexpr int kElems = 16 / sizeof(typename Type<DT>::Bits);
  V16 v;
  typename Type<DT>::Bits e[kElems];
};

template <uint32_t DT>
constexpr uint64_t kVecElems = 16 / sizeof(typename Type<DT>::Bits);

template <uint32_t DT>
constexpr uint64_t kElemSize = sizeof(typename Type<DT>::Bits);

// reduce_pack folds v[0..n) in rank order. N is the compile-time bound; when
// the world is specialised n == N and the guards vanish.
template <uint32_t DT, uint32_t OP, int N>
INTRANODE_DEVICE V16 reduce_pack(const Fold<OP>& fold, const V16 (&v)[N], int n) {
  using T = Type<DT>;
  constexpr int E = Pack<DT>::kElems;
  typename T::Acc acc[E];
  Pack<DT> in;
  in.v = v[0];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    acc[e] = T::up(in.e[e]);
  }
#pragma unroll
  for (int r = 1; r < N; ++r) {
    if (r < n) {
      in.v = v[r];
#pragma unroll
      for (int e = 0; e < E; ++e) {
        acc[e] = fold(acc[e], T::up(in.e[e]));
      }
    }
  }
  Pack<DT> out;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    out.e[e] = T::down(acc[e]);
  }
  return out.v;
}

// Vector loads and stores for pointers the caller supplied, which need only
// be element-aligned. The element-wise paths are out of line: they are rare,
// and inlined into every unrolled loop they would double the module.
template <uint32_t DT>
INTRANODE_NOINLINE V16 load_unaligned(const char* p) {
  Pack<DT> k;
#pragma unroll
  for (int e = 0; e < Pack<DT>::kElems; ++e) {
    k.e[e] = load_elem<DT>(p + e * kElemSize<DT>);
  }
  return k.v;
}

template <uint32_t DT>
INTRANODE_NOINLINE void store_unaligned(char* p, V16 v) {
  Pack<DT> k;
  k.v = v;
#pragma unroll
  for (int e = 0; e < Pack<DT>::kElems; ++e) {
    store_elem<DT>(p + e * kElemSize<DT>, k.e[e]);
  }
}

template <uint32_t DT>
INTRANODE_DEVICE V16 load_input_vec(const char* p, bool aligned) {
  return aligned ? port::load16_input(p) : load_unaligned<DT>(p);
}

template <uint32_t DT>
INTRANODE_DEVICE void store_output_vec(char* p, V16 v, bool aligned) {
  if (aligned) {
    port::store16(p, v);
  } else {
    store_unaligned<DT>(p, v);
  }
}

// Loads in flight per thread per step: about eight 16-byte vectors whatever
// the number of sources, enough to cover NVLink latency with 512 threads on
// each of up to 32 SMs.
template <int N>
constexpr int kUnroll = N >= 8 ? 1 : 8 / N;

// ---------------------------------------------------------------------------
// Block work loops. Ranges are in 16-byte vectors relative to the given base
// pointers; all vectors in them are full.

// reduce_vectors: for i in [lo, hi), sink(i, fold over r < n of src[r][i]),
// the sink storing the result wherever it goes. Sources are 16-byte
// aligned.
template <uint32_t DT, uint32_t OP, int N, typename Sink>
INTRANODE_DEVICE void reduce_vectors(const Fold<OP>& fold, const char* const (&src)[N], int n, uint64_t lo,
                                     uint64_t hi, const Sink& sink) {
  constexpr int U = kUnroll<N>;
  const uint64_t stride = port::block_threads();
  for (uint64_t base = lo + port::thread_index(); base < hi; base += U * stride) {
    V16 v[U][N];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint64_t i = base + u * stride;
      if (i < hi) {
#pragma unroll
        for (int r = 0; r < N; ++r) {
          if (r < n) {
            v[u][r] = port::load16(src[r] + i * 16);
          }
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint64_t i = base + u * stride;
      if (i < hi) {
        sink(i, reduce_pack<DT, OP, N>(fold, v[u], n));
      }
    }
  }
}

// copy_vectors: for each segment k < nseg not in skip, dst[k*seg + j] =
// src[k][k*seg + j] for j in [lo, hi) while k*seg + j < nfull (vectors).
// Segments are interleaved so that all their loads are in flight together.
// FROM_INPUT picks the read-only load path and honours src_aligned; otherwise
// sources are aligned symmetric buffers.
template <uint32_t DT, int N, bool FROM_INPUT>
INTRANODE_DEVICE void copy_vectors(const char* const (&src)[N], char* dst, uint64_t seg,
                                   uint64_t nfull, uint32_t skip, int nseg, bool src_aligned,
                                   bool dst_aligned, uint64_t lo, uint64_t hi) {
  constexpr int U = kUnroll<N>;
  const uint64_t stride = port::block_threads();
  for (uint64_t base = lo + port::thread_index(); base < hi; base += U * stride) {
    V16 v[U][N];
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const uint64_t i = k * seg + base + u * stride;
        if (k < nseg && !(skip >> k & 1) && base + u * stride < hi && i < nfull) {
          if constexpr (FROM_INPUT) {
            v[u][k] = load_input_vec<DT>(src[k] + i * 16, src_aligned);
          } else {
            v[u][k] = port::load16(src[k] + i * 16);
          }
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const uint64_t i = k * seg + base + u * stride;
        if (k < nseg && !(skip >> k & 1) && base + u * stride < hi && i < nfull) {
          store_output_vec<DT>(dst + i * 16, v[u][k], dst_aligned);
        }
      }
    }
  }
}

// Tails: elements [first, count) of the last partial vector, one per
// thread; sink(byte offset, result) stores each reduced element.
template <uint32_t DT, uint32_t OP, int N, typename Sink>
INTRANODE_DEVICE void reduce_tail(const Fold<OP>& fold, const char* const (&src)[N], int n, uint64_t first,
                                  uint64_t count, const Sink& sink) {
  using T = Type<DT>;
  const uint64_t e = first + port::thread_index();
  if (e >= count) {
    return;
  }
  const uint64_t off = e * kElemSize<DT>;
  typename T::Bits x[N];
#pragma unroll
  for (int r = 0; r < N; ++r) {
    if (r < n) {
      x[r] = load_elem<DT>(src[r] + off);
    }
  }
  typename T::Acc acc = T::up(x[0]);
#pragma unroll
  for (int r = 1; r < N; ++r) {
    if (r < n) {
      acc = fold(acc, T::up(x[r]));
    }
  }
  sink(off, T::down(acc));
}

template <uint32_t DT>
INTRANODE_DEVICE void copy_tail(const char* src, char* dst, uint64_t first, uint64_t count) {
  const uint64_t e = first + port::thread_index();
  if (e < count) {
    const uint64_t off = e * kElemSize<DT>;
    store_elem<DT>(dst + off, load_elem<DT>(src + off));
  }
}

// ---------------------------------------------------------------------------
// Arguments.

struct Args {
  const unsigned long long* bufs;
  const unsigned long long* pads;
  const char* input;
  char* output;
  uint64_t count;
  uint32_t rank;
  uint32_t world;
  uint32_t dtype;
  uint32_t op;
  uint32_t* status;
  uint64_t timeout_ns;
  uint64_t extra;
  uint64_t call;  // kernels.CallTag; 0: no agreement check
  // Filled in by check: pads[rank], and pads[thread] for threads < world.
  uint64_t my_pad;
  uint64_t peer_pad;
};

// Algo numbers the kernels as kernels.AlgoID does, less one: the all-reduce
// algorithms, then the data-movement collectives (kernels.Movers).
enum class Algo { kOneShot, kTwoShot, kHCM, kPipeline, kReduceScatter, kAllGather, kBroadcast, kAllToAll };

INTRANODE_DEVICE constexpr bool is_mover(Algo algo) { return algo >= Algo::kReduceScatter; }

INTRANODE_DEVICE bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

// split gives part k of n items cut into parts nearly equal pieces.
INTRANODE_DEVICE void split(uint64_t n, uint64_t parts, uint64_t k, uint64_t& lo, uint64_t& hi) {
  lo = n * k / parts;
  hi = n * (k + 1) / parts;
}

INTRANODE_DEVICE constexpr uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

// kernels.OneShotLLMax and kernels.LLRegion.
static_assert(kLLSize < (1ull << 32), "the LL area fits 32-bit arithmetic");
INTRANODE_DEVICE uint64_t ll_max(uint32_t world) {
  // 32-bit division: this sits on the LL path's critical path.
  return world <= 1 ? kLLMaxBytes
                    : min_u64(kLLMaxBytes, (uint32_t(kLLSize) / (4u * (world - 1))) & ~15u);
}
INTRANODE_DEVICE uint64_t ll_region(uint32_t world) { return 2 * ll_max(world); }

// kernels.OneShotPushMax: also the byte size of one sender's region of one
// slot of the push area.
static_assert(kPushSize < (1ull << 32), "the push area fits 32-bit arithmetic");
INTRANODE_DEVICE uint64_t push_max(uint32_t world) {
  return world <= 1 ? kPushMaxBytes
                    : min_u64(kPushMaxBytes, (uint32_t(kPushSize) / (2u * (world - 1))) & ~15u);
}

// peer_regions points dst[k] at this rank's region of peer k's receiving
// area (peer k is rank k + (k >= me); the area at byte offset area of every
// pad, regions of region bytes indexed by sender from slot_base), and
// src[k] at peer k's region of my own pad, both plus off (a block's part);
// nullptr past the peers.
template <int N>
INTRANODE_DEVICE void peer_regions(const Args& a, int me, int np, uint64_t area, uint64_t slot_base,
                                   uint64_t region, uint64_t off, char* (&dst)[kPeers<N>],
                                   const char* (&src)[kPeers<N>]) {
  constexpr int P = kPeers<N>;
#pragma unroll
  for (int k = 0; k < P; ++k) {
    dst[k] = nullptr;
    src[k] = nullptr;
    if (k < np) {
      const int r = k + (k >= me);
      const uint64_t peer_pad = port::load_arg_u64(a.pads + r);
      const uint64_t to = me < r ? me : me - 1;  // my index at r
      dst[k] = reinterpret_cast<char*>(peer_pad + area + (slot_base + to) * region + off);
      src[k] = reinterpret_cast<const char*>(a.my_pad + area + (slot_base + k) * region + off);
    }
  }
}

// hcm_partial_offset is where HCM keeps the quad partials in every buffer:
// bits 32-63 of Extra when the host sets them (HCMPartialOffset of the
// buffer size), else the first 16-byte boundary after the data, which lies
// inside the buffer whenever the ABI's count*size <= buffer/2 holds.
INTRANODE_DEVICE uint64_t hcm_partial_offset(uint64_t extra, uint64_t bytes) {
  const uint64_t half = extra >> 32;
  return half != 0 ? half : (bytes + 15) & ~uint64_t(15);
}

// params_ok is the part of check that reads no memory: what must hold
// before a kernel may load through any pointer argument.
template <uint32_t DT>
INTRANODE_DEVICE bool params_ok(const Args& a) {
  constexpr uint64_t size = kElemSize<DT>;
  bool ok = a.bufs != nullptr && a.pads != nullptr && a.world >= 1 && a.world <= kMaxRanks &&
            a.rank < a.world && a.dtype == DT && a.op <= kMin &&
            port::grid_blocks() <= kKernelChannels && port::block_threads() >= a.world;
  if (ok && a.count > 0) {
    ok = a.input != nullptr && a.output != nullptr &&
         (reinterpret_cast<uintptr_t>(a.input) % size) == 0 &&
         (reinterpret_cast<uintptr_t>(a.output) % size) == 0;
  }
  return ok;
}

// check validates the arguments and loads the pointers every block needs
// first, all in one round trip. Every thread computes the same answer;
// thread 0 of each block reports StatusBadArgs.
template <uint32_t DT>
INTRANODE_DEVICE bool check(Args& a, Algo algo) {
  constexpr uint64_t size = kElemSize<DT>;
  const uint64_t bytes = a.count * size;
  bool ok = params_ok<DT>(a);
  if (ok && algo == Algo::kHCM) {
    const uint32_t q0 = a.extra & 0xff, q1 = a.extra >> 8 & 0xff, q2 = a.extra >> 16 & 0xff;
    const uint32_t c = a.extra >> 24 & 0xff;
    const uint32_t seen = 1u << a.rank | 1u << q0 | 1u << q1 | 1u << q2 | 1u << c;
    const uint64_t half = hcm_partial_offset(a.extra, bytes);
    ok = a.world == 8 && q0 < 8 && q1 < 8 && q2 < 8 && c < 8 && port::popcount(seen) == 5 &&
         (half & 15) == 0 && bytes <= half;
  }
  if (ok && algo == Algo::kBroadcast) {
    ok = (a.extra & ~kMoverModes) < a.world;  // the root
  } else if (ok && is_mover(algo)) {
    const uint64_t s = a.extra & ~kMoverModes;  // the block stride
    ok = (s == 0 || (s >= a.count && s <= (1ull << 40))) &&
         !(algo == Algo::kReduceScatter && (a.extra & kMoverSync) != 0);
  }
  if (ok) {
    const uint32_t t = port::thread_index();
    a.my_pad = port::load_arg_u64(a.pads + a.rank);
    a.peer_pad = t < a.world ? port::load_arg_u64(a.pads + t) : 0;
    uint64_t b[kMaxRanks];
#pragma unroll
    for (uint32_t r = 0; r < kMaxRanks; ++r) {
      b[r] = r < a.world ? port::load_arg_u64(a.bufs + r) : 16;
    }
#pragma unroll
    for (uint32_t r = 0; r < kMaxRanks; ++r) {
      ok = ok && b[r] != 0 && (b[r] & 15) == 0;
    }
    if (ok && algo == Algo::kOneShot && a.count > 0) {
      // Writing the result over bufs[rank] would change what peers still read.
      const char* mine = reinterpret_cast<const char*>(port::load_arg_u64(a.bufs + a.rank));
      ok = a.output + bytes <= mine || mine + bytes <= a.output;
    }
    ok = ok && a.my_pad != 0 && (t >= a.world || a.peer_pad != 0);
    // A null pad on one thread must stop the whole block.
    ok = port::block_all(ok);
  }
  // Everything above read only the parameters and the pointer tables; what
  // follows may touch memory the work ahead on the stream writes.
  port::wait_dependencies();
  if (!ok && port::thread_index() == 0) {
    report(a.status, kStatusBadArgs, 0, port::block_index());
  }
  if (ok && a.call != 0 && port::thread_index() == 0 && port::block_index() == 0) {
    // kernels.Record: what the host reads to name ranks whose calls differ.
    uint32_t id = static_cast<uint32_t>(algo) + 1;  // kernels.AlgoID
    if (is_mover(algo) && (a.extra & kMoverPipeline) != 0) {
      id |= 0x8000;  // kernels.InfoPipelined
    }
    if (is_mover(algo) && (a.extra & kMoverSync) != 0) {
      id |= 0x4000;  // kernels.InfoSync
    }
    uint64_t* rec = reinterpret_cast<uint64_t*>(a.my_pad + kRecordOffset);
    port::store_word64(rec + 1, a.count);
    port::store_word64(rec + 2, uint64_t(id << 16 | (a.dtype & 0xff) << 8 | (a.op & 0xff)));
    port::store_word64(rec, a.call);
  }
  return ok;
}

// ---------------------------------------------------------------------------
// Algorithms.

// copy_elems copies elements [0, count) from src to dst, this block's
// vectors [lo, hi) of them; FROM_INPUT reads through the input path (any
// element alignment), otherwise src is a 16-byte aligned buffer part.
template <uint32_t DT, bool FROM_INPUT>
INTRANODE_DEVICE void copy_elems(const char* src, char* dst, uint64_t count, uint64_t lo, uint64_t hi) {
  const uint64_t nfull = count / kVecElems<DT>;
  const char* const s[1] = {src};
  copy_vectors<DT, 1, FROM_INPUT>(s, dst, 0, nfull, 0, 1, aligned16(src), aligned16(dst), lo, min_u64(hi, nfull));
  if (nfull * kVecElems<DT> < count && lo <= nfull && nfull < hi) {
    copy_tail<DT>(src, dst, nfull * kVecElems<DT>, count);
  }
}

// copy_in_share: this block's share [lo, hi) of the message's vectors
// (nfull of them full) is copied from the input into mine, this rank's
// symmetric buffer, unless the input is that buffer; then the barrier.
// False when the barrier failed. (copy_vectors bounds the range by nfull
// itself: clamping hi first, as copy_elems does, costs HCM two registers.)
template <uint32_t DT>
INTRANODE_DEVICE bool copy_in_share(const Args& a, Team& team, char* mine, uint64_t& lo, uint64_t& hi,
                                    uint64_t& nfull) {
  nfull = a.count / kVecElems<DT>;
  split((a.count + kVecElems<DT> - 1) / kVecElems<DT>, port::grid_blocks(), port::block_index(), lo, hi);
  if (a.input != mine) {
    const char* const src[1] = {a.input};
    copy_vectors<DT, 1, true>(src, mine, 0, nfull, 0, 1, aligned16(a.input), true, lo, hi);
    if (nfull * kVecElems<DT> < a.count && lo <= nfull && nfull < hi) {
      copy_tail<DT>(a.input, mine, nfull * kVecElems<DT>, a.count);
    }
  }
  return team.barrier();
}

// reduce_block reduces vectors [lo, hi) of n sources (and the partial vector
// at nfull when it falls in the range) into dst.
template <uint32_t DT, uint32_t OP, int N>
INTRANODE_DEVICE void reduce_block(const Fold<OP>& fold, const char* const (&src)[N], int n, char* dst, bool dst_aligned,
                                   uint64_t lo, uint64_t hi, uint64_t nfull, uint64_t count) {
  reduce_vectors<DT, OP, N>(fold, src, n, lo, min_u64(hi, nfull),
                            [&](uint64_t i, V16 out) { store_output_vec<DT>(dst + i * 16, out, dst_aligned); });
  if (nfull * kVecElems<DT> < count && lo <= nfull && nfull < hi) {
    reduce_tail<DT, OP, N>(fold, src, n, nfull * kVecElems<DT>, count,
                           [&](uint64_t off, typename Type<DT>::Bits out) { store_elem<DT>(dst + off, out); });
  }
}

// OneShot: copy in, Barrier, output = fold of all buffers, Barrier.
template <uint32_t DT, uint32_t OP, int N>
INTRANODE_DEVICE void one_shot(const Args& a, int n) {
  Team team;
  team.open(a.my_pad, a.peer_pad, a.rank, a.world, a.status, a.timeout_ns, port::block_flag(), a.call);

  const char* src[N];
#pragma unroll
  for (int r = 0; r < N; ++r) {
    src[r] = r < n ? reinterpret_cast<const char*>(port::load_arg_u64(a.bufs + r)) : nullptr;
  }
  char* mine = reinterpret_cast<char*>(port::load_arg_u64(a.bufs + a.rank));

  uint64_t lo, hi, nfull;
  if (!copy_in_share<DT>(a, team, mine, lo, hi, nfull)) {
    return;
  }
  reduce_block<DT, OP, N>(Fold<OP>(a.op), src, n, a.output, aligned16(a.output), lo, hi, nfull, a.count);
  team.last_barrier();
}

// ---------------------------------------------------------------------------
// One-shot, LL path (kernels/abi.go): no barrier, no symmetric buffer. Each
// rank writes its input as LL lines into every peer's pad, then polls its
// own pad for every peer's lines; a line carries its flag beside each data
// word, so the data is there as soon as the flag is. Payload vector i (16
// bytes) travels as the two lines at 32*i of the sender's region:
// {v.x, f, v.y, f} and {v.z, f, v.w, f}.

// Vector i of a whole message: full vectors through the aligned or
// element-wise path, the last partial one element by element, zero-padded.
template <uint32_t DT>
INTRANODE_NOINLINE V16 load_partial(const char* p, uint64_t elems) {
  Pack<DT> k;
#pragma unroll
  for (int e = 0; e < Pack<DT>::kElems; ++e) {
    k.e[e] = uint64_t(e) < elems ? load_elem<DT>(p + e * kElemSize<DT>) : typename Type<DT>::Bits(0);
  }
  return k.v;
}

template <uint32_t DT>
INTRANODE_NOINLINE void store_partial(char* p, V16 v, uint64_t elems) {
  Pack<DT> k;
  k.v = v;
#pragma unroll
  for (int e = 0; e < Pack<DT>::kElems; ++e) {
    if (uint64_t(e) < elems) {
      store_elem<DT>(p + e * kElemSize<DT>, k.e[e]);
    }
  }
}

// part_load and part_store: vector i of count elements at p (the input, the
// output, or one rank's block of either).
template <uint32_t DT>
INTRANODE_DEVICE V16 part_load(const char* p, uint64_t count, uint64_t i, uint64_t nfull, bool aligned) {
  return i < nfull ? load_input_vec<DT>(p + i * 16, aligned) : load_partial<DT>(p + i * 16, count - i * kVecElems<DT>);
}

template <uint32_t DT>
INTRANODE_DEVICE void part_store(char* p, uint64_t count, uint64_t i, uint64_t nfull, bool aligned, V16 v) {
  if (i < nfull) {
    store_output_vec<DT>(p + i * 16, v, aligned);
  } else {
    store_partial<DT>(p + i * 16, v, count - i * kVecElems<DT>);
  }
}

template <uint32_t DT>
INTRANODE_DEVICE V16 message_load(const Args& a, uint64_t i, uint64_t nfull, bool aligned) {
  return part_load<DT>(a.input, a.count, i, nfull, aligned);
}

template <uint32_t DT>
INTRANODE_DEVICE void message_store(const Args& a, uint64_t i, uint64_t nfull, bool aligned, V16 v) {
  part_store<DT>(a.output, a.count, i, nfull, aligned, v);
}

INTRANODE_DEVICE bool ll_ready(const V16& l, uint32_t f) { return l.y == f && l.w == f; }

// kernels.LLFlag and kernels.LLMismatch: a whole half-line of this epoch
// whose flag is not ours comes from a call that differs.
INTRANODE_DEVICE uint32_t ll_flag(uint32_t epoch, uint64_t call) {
  const uint32_t h = uint32_t(call >> 32) * 0x9e3779b1u ^ uint32_t(call);
  return (epoch & 0xff) << 24 | (h >> 9) << 1 | 1;
}
INTRANODE_DEVICE bool ll_differs(const V16& l, uint32_t f) {
  return l.y == l.w && l.y != f && (l.y & 1) && (l.y >> 24) == (f >> 24);
}

// Every thread of an LL launch polls its own lines, up to 64K threads
// loading from the GPU's memory without pause while a peer is late, which
// is also the memory the peer's lines must be written into. After
// kLLSpinFree polls a thread waits between polls, the wait doubling from
// 32 ns up to kLLSleepMax: ranks in step (whose lines arrive within a few
// polls) never wait; a rank far ahead of its peer leaves the memory to the
// peer's writes. (-D overrides both; kLLSleepMax 0 polls without pause.)
#ifndef INTRANODE_LL_SPIN_FREE
#define INTRANODE_LL_SPIN_FREE 16
#endif
#ifndef INTRANODE_LL_SLEEP_MAX
#define INTRANODE_LL_SLEEP_MAX 1024
#endif
constexpr uint32_t kLLSpinFree = INTRANODE_LL_SPIN_FREE;
constexpr uint32_t kLLSleepMax = INTRANODE_LL_SLEEP_MAX;
INTRANODE_DEVICE void ll_backoff(uint32_t spin) {
  if (kLLSleepMax > 0 && spin > kLLSpinFree) {
    const uint32_t d = spin - kLLSpinFree;
    const uint32_t ns = 16u << (d < 10 ? d : 10);
    port::sleep_ns(ns < kLLSleepMax ? ns : kLLSleepMax);
  }
}

// The epoch (kernels.EpochWord) counts the one-shot calls that use the
// pad's slots; every block of a launch reads it, and it must advance once
// per launch, after all have. epoch_count_in runs once every thread of the
// block has read it (the caller's block-wide barrier ordered those reads):
// with one block, thread 0 advances it at once; otherwise thread 0 counts
// the block in (TicketWord) and epoch_count_out lets the last block in
// advance it and reset the ticket. The fence before the add (release) comes
// before any store of the launch, so it waits for nothing, and the add's
// result is not needed until the end.
INTRANODE_DEVICE uint32_t epoch_count_in(uint64_t my_pad, uint32_t epoch) {
  uint32_t ticket = 0;
  if (port::thread_index() == 0) {
    if (port::grid_blocks() == 1) {
      port::store_plain(reinterpret_cast<uint32_t*>(my_pad + kEpochWord), epoch + 1);
    } else {
      port::fence_gpu();
      ticket = port::fetch_add_relaxed(reinterpret_cast<uint32_t*>(my_pad + kTicketWord), 1);
    }
  }
  return ticket;
}

INTRANODE_DEVICE void epoch_count_out(uint64_t my_pad, uint32_t epoch, uint32_t ticket) {
  if (port::thread_index() == 0 && port::grid_blocks() > 1 && ticket == port::grid_blocks() - 1) {
    port::fence_gpu();  // acquire: every block's read of the epoch came first
    port::store_plain(reinterpret_cast<uint32_t*>(my_pad + kTicketWord), 0);
    port::store_plain(reinterpret_cast<uint32_t*>(my_pad + kEpochWord), epoch + 1);
  }
}

// PushCall opens a call on the push area (kernels/abi.go): the team, this
// rank's epoch (its parity picks the slot) and ticket, and the regions of
// this call's slot: dst[k], this rank's region in peer k's pad, and src[k],
// peer k's region in this rank's pad, both plus off (a block's part).
// close ends the call's epoch.
template <int N>
struct PushCall {
  Team team;
  uint32_t epoch;
  uint32_t ticket;
  char* dst[kPeers<N>];
  const char* src[kPeers<N>];

  INTRANODE_DEVICE void open(const Args& a, int np, uint64_t off) {
    team.open(a.my_pad, a.peer_pad, a.rank, a.world, a.status, a.timeout_ns, port::block_flag(), a.call);
    epoch = port::load_plain(reinterpret_cast<const uint32_t*>(a.my_pad + kEpochWord));
    port::block_sync();  // every thread has read the epoch
    ticket = epoch_count_in(a.my_pad, epoch);
    peer_regions<N>(a, int(a.rank), np, kPushOffset, uint64_t(epoch & 1) * (a.world - 1), push_max(a.world), off,
                    dst, src);
  }

  INTRANODE_DEVICE void close(const Args& a) { epoch_count_out(a.my_pad, epoch, ticket); }
};

// load_first reads this thread's first round of vectors of [lo, hi) of
// count elements at in (vector lo + thread + u*threads for u <
// kUnroll<N>), the round a block's loop over [lo, hi) would load first, so
// that a caller can have them in flight before it may use them: the LL
// kernels before check's table loads, the Pipeline before the peer's
// signal frees a slot.
template <uint32_t DT, int N>
INTRANODE_DEVICE void load_first(const char* in, uint64_t count, uint64_t nfull, bool in_aligned, uint64_t lo,
                                 uint64_t hi, V16 (&v)[kUnroll<N>]) {
  constexpr int U = kUnroll<N>;
  const uint64_t T = port::block_threads();
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const uint64_t i = lo + port::thread_index() + u * T;
    if (i < hi) {
      v[u] = part_load<DT>(in, count, i, nfull, in_aligned);
    }
  }
}

template <uint32_t DT, int N>
INTRANODE_DEVICE void load_first(const Args& a, uint64_t nfull, bool in_aligned, uint64_t lo, uint64_t hi,
                                 V16 (&v)[kUnroll<N>]) {
  load_first<DT, N>(a.input, a.count, nfull, in_aligned, lo, hi, v);
}

// The LL kernels: the one-shot's LL path and the data-movement
// collectives' (kernels.MoverPath "ll") differ only in what a rank sends
// each peer and what it makes of what it receives:
//
//   kAllReduce      its input to every peer; output = fold over all ranks
//   kReduceScatter  its input block r to peer r; output = fold over all
//                   ranks of their block me (this rank's from its input)
//   kGather         all-gather: its input to every peer; output block r =
//                   rank r's input. Broadcast: the root sends its input to
//                   every peer, every other rank a token (one vector of
//                   zeros) to every peer (kernels/abi.go: the epoch
//                   argument needs every rank to wait for every peer);
//                   output = the root's input
//   kAllToAll       its input block r to peer r; output block r = rank r's
//                   block me
enum class LL { kAllReduce, kReduceScatter, kGather, kAllToAll };

// ll_collective: every block sends its vectors as LL lines into every
// peer's pad, then polls its own pad for the peers' lines; a line carries
// its flag beside each data word, so the data is there as soon as the
// flag is. Payload vector i (16 bytes) travels as the two lines at 32*i of
// the sender's region: {v.x, f, v.y, f} and {v.z, f, v.w, f}.
template <uint32_t DT, uint32_t OP, int N, LL KIND>
INTRANODE_DEVICE void ll_collective(Args a, Algo algo, int n) {
  constexpr uint64_t E = kVecElems<DT>;
  constexpr int U = kUnroll<N>;
  constexpr int P = kPeers<N>;  // peers, by index k: rank k + (k >= me)
  constexpr bool kPerPeer = KIND == LL::kReduceScatter || KIND == LL::kAllToAll;
  constexpr bool kReduce = KIND == LL::kAllReduce || KIND == LL::kReduceScatter;
  const int me = int(a.rank);
  const int np = n - 1;
  const uint32_t t = port::thread_index();
  const uint64_t T = port::block_threads();
  const uint32_t grid = port::grid_blocks();
  const uint64_t nfull = a.count / E;
  const uint64_t nvec = (a.count + E - 1) / E;
  uint64_t lo, hi;
  split(nvec, grid, port::block_index(), lo, hi);
  // Rank blocks of a strided input or output lie stride bytes apart; the
  // broadcast's root is Extra (checked below; until then it only selects).
  const bool bcast = KIND == LL::kGather && algo == Algo::kBroadcast;
  const uint64_t stride = (bcast || a.extra == 0 ? a.count : a.extra) * kElemSize<DT>;
  const int root = bcast ? int(min_u64(a.extra, kMaxRanks)) : -1;
  const bool has_input = !bcast || me == root;
  const bool blocked_out = KIND == LL::kAllToAll || (KIND == LL::kGather && !bcast);
  const char* own_in = a.input + (kPerPeer ? uint64_t(me) * stride : 0);
  char* own_out = a.output + (blocked_out ? uint64_t(me) * stride : 0);
  const bool in_aligned = aligned16(a.input) && (!kPerPeer || (stride & 15) == 0);
  const bool out_aligned = aligned16(a.output) && (!blocked_out || (stride & 15) == 0);

  // This rank's pad comes from the pointer table, before the work ahead on
  // the stream has finished (an early launch); the epoch and this thread's
  // first vectors of its own part go out as soon as it has, ahead of
  // check's table loads and block-wide reduction.
  uint32_t epoch = 0;
  V16 first[U];
  const bool params = params_ok<DT>(a) && (KIND == LL::kAllReduce || bcast || a.extra == 0 ||
                                           (a.extra >= a.count && a.extra <= (1ull << 40)));
  const uint64_t pad = params ? port::load_arg_u64(a.pads + a.rank) : 0;
  port::wait_dependencies();
  if (params) {
    epoch = port::load_plain(reinterpret_cast<const uint32_t*>(pad + kEpochWord));
    if (has_input) {
      load_first<DT, N>(own_in, a.count, nfull, in_aligned, lo, hi, first);
    }
  }
  if (!check<DT>(a, algo)) {
    return;
  }

  // The epoch picks the slot and the flag; check's block-wide reduction
  // ordered every thread's read of it before this.
  const uint32_t ticket = epoch_count_in(a.my_pad, epoch);
  const uint32_t f = ll_flag(epoch, a.call);
  const uint64_t slot_base = uint64_t(epoch & 1) * (a.world - 1);
  const uint64_t region = ll_region(a.world);
  if (port::block_index() == 0 && t < a.world && t != a.rank) {
    // For peers on another path, which watch for it (kernels/abi.go).
    publish_call(a.peer_pad, a.rank, a.call);
  }

  char* dst[P];        // my region of the slot in peer k's pad
  const char* src[P];  // peer k's region of the slot in my pad
  peer_regions<N>(a, me, np, kLLOffset, slot_base, region, 0, dst, src);
  // expects: whether vector i comes from peer k (every vector from every
  // peer, but in a broadcast only the root's; the others send their token
  // at vector 0).
  const auto expects = [&](int k, uint64_t i) { return !bcast || i == 0 || k + (k >= me) == root; };
  const auto send = [&](int k, uint64_t i, V16 v) {
    port::store_ll(dst[k] + 32 * i, V16{v.x, f, v.y, f});
    port::store_ll(dst[k] + 32 * i + 16, V16{v.z, f, v.w, f});
  };

  // 1. Send: every vector of this block to every peer (its block r to peer
  // r), or the broadcast's token to every peer.
  for (uint64_t base = lo + t; base < hi; base += U * T) {
    if constexpr (kPerPeer) {
#pragma unroll
      for (int k = 0; k < P; ++k) {
        if (k < np) {
          const char* blk = a.input + uint64_t(k + (k >= me)) * stride;
          V16 v[U];
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const uint64_t i = base + u * T;
            if (i < hi) {
              v[u] = part_load<DT>(blk, a.count, i, nfull, in_aligned);
            }
          }
#pragma unroll
          for (int u = 0; u < U; ++u) {
            const uint64_t i = base + u * T;
            if (i < hi) {
              send(k, i, v[u]);
            }
          }
        }
      }
    } else if (has_input) {
      V16 v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const uint64_t i = base + u * T;
        if (i < hi) {
          v[u] = base == lo + t ? first[u] : part_load<DT>(a.input, a.count, i, nfull, in_aligned);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const uint64_t i = base + u * T;
        if (i < hi) {
#pragma unroll
          for (int k = 0; k < P; ++k) {
            if (k < np) {
              send(k, i, v[u]);
            }
          }
        }
      }
    } else if (base == 0) {
#pragma unroll
      for (int k = 0; k < P; ++k) {
        if (k < np) {
          send(k, 0, V16{0, 0, 0, 0});
        }
      }
    }
  }

  // 2. Receive, then reduce in rank order with this rank's own part in its
  // place, or copy each peer's part to its place.
  bool alive = true;
  for (uint64_t base = lo + t; alive && base < hi; base += U * T) {
    V16 la[U][P], lb[U][P], own[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint64_t i = base + u * T;
      if (i < hi) {
#pragma unroll
        for (int k = 0; k < P; ++k) {
          if (k < np && expects(k, i)) {
            la[u][k] = port::load_ll(src[k] + 32 * i);
            lb[u][k] = port::load_ll(src[k] + 32 * i + 16);
          }
        }
        if (has_input) {
          own[u] = base == lo + t ? first[u] : part_load<DT>(own_in, a.count, i, nfull, in_aligned);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint64_t i = base + u * T;
#pragma unroll
      for (int k = 0; k < P; ++k) {
        if (alive && i < hi && k < np && expects(k, i) && !(ll_ready(la[u][k], f) && ll_ready(lb[u][k], f))) {
          const uint64_t start = port::now_ns();
          const uint32_t peer = uint32_t(k + (k >= me));
          for (uint32_t spin = 1;; ++spin) {
            la[u][k] = port::load_ll(src[k] + 32 * i);
            lb[u][k] = port::load_ll(src[k] + 32 * i + 16);
            if (ll_ready(la[u][k], f) && ll_ready(lb[u][k], f)) {
              break;
            }
            if ((spin & 15) == 0) {
              // A line of this epoch with another flag: a differing call.
              const bool differs = ll_differs(la[u][k], f);
              if (differs || port::now_ns() - start > a.timeout_ns) {
                report(a.status, differs ? kStatusMismatch : kStatusTimeout, peer, port::block_index());
                alive = false;
                break;
              }
              // Another thread of the launch has given up (status set).
              if ((spin & 1023) == 0 && a.status != nullptr && port::load_status(a.status) != 0) {
                alive = false;
                break;
              }
            }
            ll_backoff(spin);
          }
        }
      }
    }
    if (!alive) {
      break;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint64_t i = base + u * T;
      if (i < hi) {
        if constexpr (kReduce) {
          V16 x[N];
#pragma unroll
          for (int r = 0; r < N; ++r) {
            // Rank r is peer r (r < me) or peer r-1 (r > me).
            const int k0 = r < P ? r : P - 1;
            const int k1 = r > 0 ? r - 1 : 0;
            const bool lower = r < me;
            const V16 pay{lower ? la[u][k0].x : la[u][k1].x, lower ? la[u][k0].z : la[u][k1].z,
                          lower ? lb[u][k0].x : lb[u][k1].x, lower ? lb[u][k0].z : lb[u][k1].z};
            x[r] = r == me ? own[u] : pay;
          }
          part_store<DT>(a.output, a.count, i, nfull, out_aligned, reduce_pack<DT, OP, N>(Fold<OP>(a.op), x, n));
        } else {
#pragma unroll
          for (int k = 0; k < P; ++k) {
            const int r = k + (k >= me);
            if (k < np && (!bcast || r == root)) {
              const V16 pay{la[u][k].x, la[u][k].z, lb[u][k].x, lb[u][k].z};
              part_store<DT>(a.output + (blocked_out ? uint64_t(r) * stride : 0), a.count, i, nfull, out_aligned,
                             pay);
            }
          }
          if (has_input && own_in != own_out) {
            part_store<DT>(own_out, a.count, i, nfull, out_aligned, own[u]);
          }
        }
      }
    }
    // 3. Clear the lines read (kernels/abi.go): a line left in the slot
    // would pass, 256 calls later, for one of that call.
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint64_t i = base + u * T;
#pragma unroll
      for (int k = 0; k < P; ++k) {
        if (i < hi && k < np && expects(k, i)) {
          char* line = const_cast<char*>(src[k]) + 32 * i;
          port::store16(line, V16{0, 0, 0, 0});
          port::store16(line + 16, V16{0, 0, 0, 0});
        }
      }
    }
  }

  epoch_count_out(a.my_pad, epoch, ticket);
}

// push_part writes vectors [lo, hi) of the message (the last one
// zero-padded) to every peer's push region dst[k], vector i at i - skew.
// With first, the first round stores what load_first read for the same
// range instead of loading it.
template <uint32_t DT, int N>
INTRANODE_DEVICE void push_part(const Args& a, char* const (&dst)[kPeers<N>], int np,
                                uint64_t nfull, bool in_aligned, uint64_t lo, uint64_t hi,
                                uint64_t skew = 0, const V16 (*first)[kUnroll<N>] = nullptr) {
  constexpr int U = kUnroll<N>;
  constexpr int P = kPeers<N>;
  const uint64_t T = port::block_threads();
  for (uint64_t base = lo + port::thread_index(); base < hi; base += U * T) {
    V16 v[U];
    const bool loaded = first != nullptr && base == lo + port::thread_index();
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint64_t i = base + u * T;
      if (i < hi) {
        v[u] = loaded ? (*first)[u] : message_load<DT>(a, i, nfull, in_aligned);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint64_t i = base + u * T;
      if (i < hi) {
#pragma unroll
        for (int k = 0; k < P; ++k) {
          if (k < np) {
            port::store16(dst[k] + 16 * (i - skew), v[u]);
          }
        }
      }
    }
  }
}

// reduce_part reduces vectors [lo, hi) in rank order: this rank's input in
// its place, peer k's pushed data from src[k] (peer k is rank k + (k >= me)),
// vector i at i - skew. With push, each result also goes to push[k] of
// every peer k, vector i at i - skew.
template <uint32_t DT, uint32_t OP, int N>
INTRANODE_DEVICE void reduce_part(const Args& a, const char* const (&src)[kPeers<N>],
                                  int n, uint64_t nfull, bool in_aligned, bool out_aligned,
                                  uint64_t lo, uint64_t hi, uint64_t skew = 0,
                                  char* const* push = nullptr) {
  constexpr int U = kUnroll<N>;
  constexpr int P = kPeers<N>;
  const int me = int(a.rank);
  const int np = n - 1;
  const uint64_t T = port::block_threads();
  for (uint64_t base = lo + port::thread_index(); base < hi; base += U * T) {
    V16 pv[U][P], own[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint64_t i = base + u * T;
      if (i < hi) {
#pragma unroll
        for (int k = 0; k < P; ++k) {
          if (k < np) {
            pv[u][k] = port::load16(src[k] + 16 * (i - skew));
          }
        }
        own[u] = message_load<DT>(a, i, nfull, in_aligned);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint64_t i = base + u * T;
      if (i < hi) {
        V16 x[N];
#pragma unroll
        for (int r = 0; r < N; ++r) {
          const int k0 = r < P ? r : P - 1;
          const int k1 = r > 0 ? r - 1 : 0;
          const bool lower = r < me;
          const V16 peer{lower ? pv[u][k0].x : pv[u][k1].x, lower ? pv[u][k0].y : pv[u][k1].y,
                         lower ? pv[u][k0].z : pv[u][k1].z, lower ? pv[u][k0].w : pv[u][k1].w};
          x[r] = r == me ? own[u] : peer;
        }
        const V16 r = reduce_pack<DT, OP, N>(Fold<OP>(a.op), x, n);
        message_store<DT>(a, i, nfull, out_aligned, r);
        if (push != nullptr) {
#pragma unroll
          for (int k = 0; k < P; ++k) {
            if (k < np) {
              port::store16(push[k] + 16 * (i - skew), r);
            }
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// One-shot, push path (kernels/abi.go): every rank writes its input into
// its region of a slot of every peer's push area, Barrier(all), then
// reduces locally: its own input and what the peers wrote into its own pad.
// The slots alternate with the epoch, as the LL path's do, so no barrier
// closes the call.
template <uint32_t DT, uint32_t OP, int N>
INTRANODE_DEVICE void one_shot_push(const Args& a, int n) {
  constexpr uint64_t E = kVecElems<DT>;
  constexpr int P = kPeers<N>;  // peers, by index k: rank k + (k >= me)
  const int np = n - 1;
  PushCall<N> call;
  call.open(a, np, 0);
  Team& team = call.team;
  char* const(&dst)[P] = call.dst;        // this block's region in peer k's pad
  const char* const(&src)[P] = call.src;  // peer k's block region in my pad

  const uint64_t nfull = a.count / E;
  const uint64_t nvec = (a.count + E - 1) / E;
  uint64_t lo, hi;
  split(nvec, port::grid_blocks(), port::block_index(), lo, hi);
  const bool in_aligned = aligned16(a.input);
  const bool out_aligned = aligned16(a.output);

  // Over kernels.PushSplitBytes, two rounds: push the first half of this
  // block's range, Barrier, push the second half and, while it is on the
  // wire, reduce the first, Barrier, reduce the second.
  const bool two = a.count * kElemSize<DT> > kPushSplitBytes;
  const uint64_t mid = two ? lo + (hi - lo) / 2 : hi;
  push_part<DT, N>(a, dst, np, nfull, in_aligned, lo, mid);
  if (!team.barrier()) {
    return;
  }
  if (two) {
    push_part<DT, N>(a, dst, np, nfull, in_aligned, mid, hi);
    reduce_part<DT, OP, N>(a, src, n, nfull, in_aligned, out_aligned, lo, mid);
    if (!team.barrier()) {
      return;
    }
  }
  reduce_part<DT, OP, N>(a, src, n, nfull, in_aligned, out_aligned, two ? mid : lo, hi);
  call.close(a);
}

// ---------------------------------------------------------------------------
// The Pipeline's chunk slots and schedule (kernels/abi.go, "Pipeline"),
// shared by the all-reduce Pipeline at world 2 and the data-movement
// collectives' pipelined path at every world.

// PipeSlots is a block's share of the push area for a message of `bytes`
// (a block of the message, for the data-movement collectives): its region
// of a sender's part of half s and its chunk size (kernels.PipelineChunk,
// kernels.MoverPipelineChunk). Wide (kernels.PipelineWideBytes): chunk slot
// 0 is the block's region of half s, slot 1 the same region of the other
// half; otherwise both slots lie in half s.
struct PipeSlots {
  uint64_t block_region;
  uint64_t chunk;
  bool wide;

  INTRANODE_DEVICE PipeSlots(uint32_t world, uint64_t bytes) {
    block_region = (push_max(world) / port::grid_blocks()) & ~uint64_t(15);
    wide = bytes > kPipeWideBytes;
    chunk = wide ? block_region : (block_region / 2) & ~uint64_t(15);
  }

  // ok reports StatusBadArgs (thread 0) and returns false when the grid
  // leaves chunks under 16 bytes.
  INTRANODE_DEVICE bool ok(const Args& a) const {
    if (chunk < 16 && port::thread_index() == 0) {
      report(a.status, kStatusBadArgs, 0, uint32_t(port::block_index()));
    }
    return chunk >= 16;
  }

  // slot1 is the byte offset of chunk slot 1 from slot 0 in epoch `epoch`
  // (negative when wide and s == 1: the other half lies below).
  INTRANODE_DEVICE int64_t slot1(uint32_t world, uint32_t epoch) const {
    const int64_t halves = int64_t(world - 1) * int64_t(push_max(world));
    return !wide ? int64_t(chunk) : (epoch & 1) == 0 ? halves : -halves;
  }
};

// pipeline_steps runs block b's chunks, from vector `first` in strides of
// `step` below nvec, chunk j in slot j mod 2 (byte offset 0 or slot1):
// push(lo, slot) writes chunk lo's data into the peers' slot, drain(lo,
// slot) writes its output from this rank's pad, prefetch(lo) may load the
// first round of chunk lo before the wait that lets it be pushed. Step j:
// wait for the peers' chunk j, push chunk j+1 into the other slot, drain
// chunk j while those stores are on the wire, then signal chunk j+1; a
// wide call whose last chunk lies in the other half ends with one more
// signal each way. False when a link failed.
template <typename Prefetch, typename Push, typename Drain>
INTRANODE_DEVICE bool pipeline_steps(Team& team, const PipeSlots& ps, int64_t slot1, uint64_t first,
                                     uint64_t nvec, uint64_t step, Prefetch&& prefetch, Push&& push,
                                     Drain&& drain) {
  if (first < nvec) {
    push(first, int64_t(0));
    team.post(true);
  }
  int64_t slot = 0;  // byte offset of chunk j's slot: 0 or slot1
  bool odd = false;   // chunk j is in slot 1
  for (uint64_t lo = first; lo < nvec; lo += step) {
    const bool more = lo + step < nvec;
    if (more) {
      prefetch(lo + step);
    }
    if (!team.receive(lo == first)) {
      return false;
    }
    if (more) {
      push(lo + step, odd ? 0 : slot1);
    }
    drain(lo, slot);
    if (more) {
      team.post(false);
    } else if (ps.wide && odd) {
      // The last chunk lies in the other half, where the next call's push
      // path writes without asking: one more signal each way once it is
      // out.
      team.post(false);
      if (!team.receive(false)) {
        return false;
      }
    }
    odd = !odd;
    slot = odd ? slot1 : 0;
  }
  return true;
}

// ---------------------------------------------------------------------------
// Pipeline (kernels/abi.go): the push path in chunks, through two chunk
// slots per block in half s of the peers' push areas, for any size. Block
// b moves chunks b, b+G, ...: each step reduces one chunk while the next
// one is on the wire.
// (A variant with separate pusher and reducer blocks, four slots each and
// credits on a second channel, moved 243 GB/s at 256 MiB against this
// one's 286: docs/PERFORMANCE-kernels.md.)
template <uint32_t DT, uint32_t OP, int N>
INTRANODE_DEVICE void pipeline(const Args& a, int n) {
  constexpr uint64_t E = kVecElems<DT>;
  constexpr int P = kPeers<N>;  // peers, by index k: rank k + (k >= me)
  const int np = n - 1;
  const uint64_t grid = port::grid_blocks();
  const uint64_t b = port::block_index();
  const PipeSlots ps(a.world, a.count * kElemSize<DT>);
  if (!ps.ok(a)) {
    return;
  }
  const uint64_t nfull = a.count / E;
  const uint64_t nvec = (a.count + E - 1) / E;
  const uint64_t cv = ps.chunk / 16;  // vectors per chunk
  const bool in_aligned = aligned16(a.input);
  const bool out_aligned = aligned16(a.output);
  // The first round of each chunk's push is loaded a step early: chunk 0's
  // while the team opens, chunk j+1's before waiting for the signal that
  // lets this block store it.
  V16 next[kUnroll<N>];
  if (b * cv < nvec) {
    load_first<DT, N>(a, nfull, in_aligned, b * cv, min_u64(nvec, b * cv + cv), next);
  }
  PushCall<N> call;
  call.open(a, np, b * ps.block_region);
  char* const(&dst)[P] = call.dst;        // this block's region in peer k's pad
  const char* const(&src)[P] = call.src;  // peer k's block region in my pad
  const auto push_chunk = [&](uint64_t lo, int64_t slot) {
    char* d[P];
#pragma unroll
    for (int k = 0; k < P; ++k) {
      d[k] = dst[k] == nullptr ? nullptr : dst[k] + slot;
    }
    push_part<DT, N>(a, d, np, nfull, in_aligned, lo, min_u64(nvec, lo + cv), lo, &next);
  };
  const auto reduce_chunk = [&](uint64_t lo, int64_t slot) {
    const char* q[P];
#pragma unroll
    for (int k = 0; k < P; ++k) {
      q[k] = src[k] == nullptr ? nullptr : src[k] + slot;
    }
    // Input chunk j was pushed (read) a step ago, so in place is safe.
    reduce_part<DT, OP, N>(a, q, n, nfull, in_aligned, out_aligned, lo, min_u64(nvec, lo + cv), lo);
  };
  const auto prefetch = [&](uint64_t lo) {
    load_first<DT, N>(a, nfull, in_aligned, lo, min_u64(nvec, lo + cv), next);
  };
  if (pipeline_steps(call.team, ps, ps.slot1(a.world, call.epoch), b * cv, nvec, grid * cv, prefetch, push_chunk,
                     reduce_chunk)) {
    call.close(a);
  }
}

// move_slices moves, for every peer k (rank r = k + (k >= me)), slice r
// of the chunk at vector lo (qv vectors, cut at nvec): with SCATTER from
// the input (the message's last vector zero-padded) to pad[k] + off,
// otherwise from pad[k] + off to the output. The block's threads stride
// over all the peers' vectors at once, and over those below nvec only:
// slice r starts at lo + r*qv, r grows with k, so every peer before the
// last one with data has a whole slice and the vectors to move are a
// prefix of the k-major range. (Striding over all np*qv, a small message
// in a one-block grid, whose slices are the whole push area's, spent
// 250 µs a call skipping empty vectors at world 4.)
template <uint32_t DT, int N, bool SCATTER, typename Ptr>
INTRANODE_DEVICE void move_slices(const Args& a, Ptr const (&pad)[kPeers<N>], int np, int me,
                                  uint64_t nfull, uint64_t nvec, bool aligned, uint64_t lo, uint32_t qv,
                                  uint64_t off) {
  constexpr int U = kUnroll<N>;
  const uint32_t T = port::block_threads();
  // The slices of every rank tile [lo, lo + (np + 1) * qv): the vectors
  // there below nvec, less those of this rank's own slice.
  const uint64_t have = nvec > lo ? nvec - lo : 0;
  const uint64_t mine = uint64_t(me) * qv;
  const uint32_t total =
      uint32_t(min_u64(have, uint64_t(np + 1) * qv) - (have > mine ? min_u64(have - mine, qv) : 0));
  for (uint32_t base = port::thread_index(); base < total; base += U * T) {
    V16 v[U];
    uint32_t k[U];
    uint64_t i[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint32_t t = base + u * T;
      k[u] = t / qv;
      i[u] = t < total ? lo + uint64_t(k[u] + (int(k[u]) >= me)) * qv + (t - k[u] * qv) : nvec;
      if (i[u] < nvec) {
        if constexpr (SCATTER) {
          v[u] = message_load<DT>(a, i[u], nfull, aligned);
        } else {
          v[u] = port::load16(pad[k[u]] + off + 16 * uint64_t(t - k[u] * qv));
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const uint32_t t = base + u * T;
      if (i[u] < nvec) {
        if constexpr (SCATTER) {
          port::store16(pad[k[u]] + off + 16 * uint64_t(t - k[u] * qv), v[u]);
        } else {
          message_store<DT>(a, i[u], nfull, aligned, v[u]);
        }
      }
    }
  }
}

// ScatterSlots is a block's share of the push area in the scattered
// Pipeline's layout (kernels.PipelineScatterSlot): its block region of a
// sender's part of half s and the size q of its four slots
// (kernels.PipelineSlice).
// For a message of count elements of vec elements per 16-byte vector, it
// also holds the message's vectors (nvec, nfull of them full) and the
// vectors per slot (qv).
struct ScatterSlots {
  uint64_t block_region;
  uint64_t q;
  uint32_t qv;
  uint64_t nfull;
  uint64_t nvec;

  INTRANODE_DEVICE ScatterSlots(uint32_t world, uint64_t count, uint64_t vec) {
    block_region = (push_max(world) / port::grid_blocks()) & ~uint64_t(15);
    q = (block_region / 4) & ~uint64_t(15);
    qv = uint32_t(q / 16);
    nfull = count / vec;
    nvec = (count + vec - 1) / vec;
  }

  // ok reports StatusBadArgs (thread 0) and returns false when the grid
  // leaves slots under 16 bytes.
  INTRANODE_DEVICE bool ok(const Args& a) const {
    if (q < 16 && port::thread_index() == 0) {
      report(a.status, kStatusBadArgs, 0, uint32_t(port::block_index()));
    }
    return q >= 16;
  }
};

// scatter_steps runs the scattered Pipeline's schedule (kernels/abi.go,
// "Pipeline, scattered") over block b's chunks, from vector `first` in
// strides of `step` below nvec: scatter(lo, k) writes chunk lo's slices
// into reduce-scatter slot k of their owners, own(lo, k) makes this
// rank's slice of chunk lo from slot k and writes it into all-gather slot
// k of the peers, gather(lo, k) copies the peers' slices of chunk lo out
// of all-gather slot k. Step j: wait for the peers, gather j-1, scatter
// j+1, own j, signal; then one more wait and the last gather. False when
// a link failed. The relayed broadcast runs on it too.
template <typename Scatter, typename Own, typename Gather>
INTRANODE_DEVICE bool scatter_steps(Team& team, uint64_t first, uint64_t nvec, uint64_t step, Scatter&& scatter,
                                    Own&& own, Gather&& gather) {
  if (first < nvec) {
    scatter(first, uint64_t(0));
    team.post(true);
  }
  uint64_t j = 0;
  for (uint64_t lo = first; lo < nvec; lo += step, ++j) {
    if (!team.receive(j == 0)) {
      return false;
    }
    if (j > 0) {
      gather(lo - step, (j - 1) & 1);
    }
    if (lo + step < nvec) {
      scatter(lo + step, (j + 1) & 1);
    }
    own(lo, j & 1);
    team.post(false);
  }
  if (j > 0) {
    if (!team.receive(false)) {
      return false;
    }
    gather(first + (j - 1) * step, (j - 1) & 1);
  }
  return true;
}

// Pipeline, scattered (World >= 3, kernels/abi.go): a chunked
// reduce-scatter + all-gather through four slots per block region of half
// s: scatter chunk j+1 and reduce chunk j (its result pushed to every
// peer) while the peers' results for chunk j-1 are copied out, one
// exchange of signals per step.
template <uint32_t DT, uint32_t OP, int N>
INTRANODE_DEVICE void pipeline_scattered(const Args& a, int n) {
  constexpr uint64_t E = kVecElems<DT>;
  constexpr int P = kPeers<N>;  // peers, by index k: rank k + (k >= me)
  const int me = int(a.rank);
  const int np = n - 1;
  const uint64_t grid = port::grid_blocks();
  const uint64_t b = port::block_index();
  const ScatterSlots ss(a.world, a.count, E);
  if (!ss.ok(a)) {
    return;
  }
  const uint64_t q = ss.q, nfull = ss.nfull, nvec = ss.nvec;
  const uint32_t qv = ss.qv;  // vectors per slice
  const uint64_t cv = uint64_t(qv) * uint64_t(n);
  const bool in_aligned = aligned16(a.input);
  const bool out_aligned = aligned16(a.output);
  PushCall<N> call;
  call.open(a, np, b * ss.block_region);
  Team& team = call.team;
  char* const(&dst)[P] = call.dst;        // this block's region in peer k's pad
  const char* const(&src)[P] = call.src;  // peer k's block region in my pad

  const auto scatter = [&](uint64_t lo, uint64_t k) {
    move_slices<DT, N, true>(a, dst, np, me, nfull, nvec, in_aligned, lo, qv, k * q);
  };
  const auto gather = [&](uint64_t lo, uint64_t k) {
    move_slices<DT, N, false>(a, src, np, me, nfull, nvec, out_aligned, lo, qv, (2 + k) * q);
  };
  const auto own = [&](uint64_t lo, uint64_t k) {
    const uint64_t mlo = lo + uint64_t(me) * qv;
    const uint64_t mhi = min_u64(nvec, mlo + qv);
    if (mlo < mhi) {
      const char* from[P];
      char* to[P];
#pragma unroll
      for (int p = 0; p < P; ++p) {
        from[p] = src[p] == nullptr ? nullptr : src[p] + k * q;
        to[p] = dst[p] == nullptr ? nullptr : dst[p] + (2 + k) * q;
      }
      reduce_part<DT, OP, N>(a, from, n, nfull, in_aligned, out_aligned, mlo, mhi, mlo, to);
    }
  };
  if (scatter_steps(team, b * cv, nvec, grid * cv, scatter, own, gather)) {
    call.close(a);
  }
}

// TwoShot: copy in, Barrier, reduce own slice into the output and push it
// into every peer's buffer, Barrier, copy the other slices out of my own
// buffer. Block b owns the same sub-range [jlo, jhi) of every slice. The
// input's own slice is read straight from the input in step 3 instead of
// being copied first (nobody else reads it).
template <uint32_t DT, uint32_t OP, int N>
INTRANODE_DEVICE void two_shot(const Args& a, int n) {
  constexpr uint64_t E = kVecElems<DT>;
  Team team;
  team.open(a.my_pad, a.peer_pad, a.rank, a.world, a.status, a.timeout_ns, port::block_flag(), a.call);

  const int me = int(a.rank);
  char* mine = reinterpret_cast<char*>(port::load_arg_u64(a.bufs + me));
  const bool in_aligned = aligned16(a.input);
  const bool out_aligned = aligned16(a.output);
  const bool own_from_input = a.input != mine && in_aligned;

  // Slices, as kernels.SliceRange: sv vectors each, slice s at vector s*sv.
  const uint64_t nfull = a.count / E;
  const uint64_t per = (a.count + a.world - 1) / a.world;
  const uint64_t sv = (per + E - 1) / E;
  uint64_t jlo = 0, jhi = 0;
  split(sv, port::grid_blocks(), port::block_index(), jlo, jhi);
  // The partial vector, if any: slice ts, offset tj.
  const bool has_tail = nfull * E < a.count;
  const uint64_t ts = sv == 0 ? 0 : nfull / sv;
  const uint64_t tj = nfull - ts * sv;
  const bool block_tail = has_tail && jlo <= tj && tj < jhi;

  char* buf[N];
#pragma unroll
  for (int r = 0; r < N; ++r) {
    buf[r] = r < n ? reinterpret_cast<char*>(port::load_arg_u64(a.bufs + r)) : nullptr;
  }

  // 1. Copy in every slice peers will read.
  if (a.input != mine) {
    const char* src[N];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      src[k] = a.input;
    }
    const uint32_t skip = own_from_input ? 1u << me : 0u;
    copy_vectors<DT, N, true>(src, mine, sv, nfull, skip, n, in_aligned, true, jlo, jhi);
    if (block_tail && !(ts == uint64_t(me) && own_from_input)) {
      copy_tail<DT>(a.input, mine, nfull * E, a.count);
    }
  }
  if (!team.barrier()) {
    return;
  }

  // 3. Reduce this rank's slice from every buffer; write it to the output
  // and push it to every peer.
  {
    const uint64_t off = uint64_t(me) * sv * 16;
    const char* src[N];
    const char* srco[N];
#pragma unroll
    for (int r = 0; r < N; ++r) {
      src[r] = (r == me && own_from_input) ? a.input : buf[r];
      srco[r] = src[r] + off;
    }
    const uint64_t start = uint64_t(me) * sv;
    const uint64_t full_me = start < nfull ? min_u64(nfull - start, sv) : 0;
    reduce_vectors<DT, OP, N>(Fold<OP>(a.op), srco, n, jlo, min_u64(jhi, full_me), [&](uint64_t i, V16 out) {
      store_output_vec<DT>(a.output + off + i * 16, out, out_aligned);
#pragma unroll
      for (int r = 0; r < N; ++r) {
        if (r < n && r != me) {
          port::store16(buf[r] + off + i * 16, out);
        }
      }
    });
    if (block_tail && ts == uint64_t(me)) {
      reduce_tail<DT, OP, N>(Fold<OP>(a.op), src, n, nfull * E, a.count,
                             [&](uint64_t e, typename Type<DT>::Bits out) {
                               store_elem<DT>(a.output + e, out);
#pragma unroll
                               for (int r = 0; r < N; ++r) {
                                 if (r < n && r != me) {
                                   store_elem<DT>(buf[r] + e, out);
                                 }
                               }
                             });
    }
  }
  if (!team.barrier()) {
    return;
  }

  // 5. Every other slice is in my own buffer now.
  if (a.output != mine) {
    const char* src[N];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      src[k] = mine;
    }
    copy_vectors<DT, N, false>(src, a.output, sv, nfull, 1u << me, n, true, out_aligned, jlo, jhi);
    if (block_tail && ts != uint64_t(me)) {
      copy_tail<DT>(mine, a.output, nfull * E, a.count);
    }
  }
}

// HCM (world 8): copy in, Barrier, quad partial at the partial offset,
// Barrier, output = (partial of the quad holding rank 0) op (the other
// quad's partial, read from the cross neighbour), Barrier.
template <uint32_t DT, uint32_t OP>
INTRANODE_DEVICE void hcm(const Args& a) {
  Team team;
  team.open(a.my_pad, a.peer_pad, a.rank, a.world, a.status, a.timeout_ns, port::block_flag(), a.call);

  const uint32_t me = a.rank;
  char* mine = reinterpret_cast<char*>(port::load_arg_u64(a.bufs + me));
  const uint64_t half = hcm_partial_offset(a.extra, a.count * kElemSize<DT>);

  // The quad in ascending rank order (a sorting network on four values).
  uint32_t g[4] = {me, uint32_t(a.extra & 0xff), uint32_t(a.extra >> 8 & 0xff),
                   uint32_t(a.extra >> 16 & 0xff)};
  const uint32_t cross = a.extra >> 24 & 0xff;
#define INTRANODE_SORT2(i, j)      \
  if (g[i] > g[j]) {               \
    const uint32_t t = g[i];       \
    g[i] = g[j];                   \
    g[j] = t;                      \
  }
  INTRANODE_SORT2(0, 1)
  INTRANODE_SORT2(2, 3)
  INTRANODE_SORT2(0, 2)
  INTRANODE_SORT2(1, 3)
  INTRANODE_SORT2(1, 2)
#undef INTRANODE_SORT2
  const char* quad[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    quad[k] = reinterpret_cast<const char*>(port::load_arg_u64(a.bufs + g[k]));
  }
  const char* theirs =
      reinterpret_cast<const char*>(port::load_arg_u64(a.bufs + cross)) + half;
  const char* ours = mine + half;
  const char* pair[2] = {g[0] == 0 ? ours : theirs, g[0] == 0 ? theirs : ours};

  uint64_t lo, hi, nfull;
  if (!copy_in_share<DT>(a, team, mine, lo, hi, nfull)) {
    return;
  }
  reduce_block<DT, OP, 4>(Fold<OP>(a.op), quad, 4, mine + half, true, lo, hi, nfull, a.count);
  if (!team.barrier()) {
    return;
  }
  reduce_block<DT, OP, 2>(Fold<OP>(a.op), pair, 2, a.output, aligned16(a.output), lo, hi, nfull, a.count);
  team.last_barrier();
}

// ---------------------------------------------------------------------------
// Dispatch: world 2, 4 and 8 get their own code; other worlds use the 8-wide
// code with a runtime bound.

// by_world calls f(Width<N>{}, n) with the compile-time bound N the world
// is specialised for (2, 4 and 8; 8 with n = world for any other size).
template <int N>
struct Width {
  static constexpr int value = N;
};

template <typename F>
INTRANODE_DEVICE void by_world(uint32_t world, F&& f) {
  switch (world) {
    case 2:
      f(Width<2>{}, 2);
      break;
    case 4:
      f(Width<4>{}, 4);
      break;
    case 8:
      f(Width<8>{}, 8);
      break;
    default:
      f(Width<8>{}, int(world));
      break;
  }
}

template <uint32_t DT, uint32_t OP>
INTRANODE_DEVICE void one_shot_world(const Args& a) {
  if (a.count > 0 && a.count <= push_max(a.world) / kElemSize<DT>) {
    by_world(a.world, [&](auto w, int n) { one_shot_push<DT, OP, decltype(w)::value>(a, n); });
    return;
  }
  by_world(a.world, [&](auto w, int n) { one_shot<DT, OP, decltype(w)::value>(a, n); });
}

template <uint32_t DT, uint32_t OP, LL KIND>
INTRANODE_DEVICE void ll_world(const Args& a, Algo algo) {
  by_world(a.world, [&](auto w, int n) { ll_collective<DT, OP, decltype(w)::value, KIND>(a, algo, n); });
}

template <uint32_t DT, LL KIND>
INTRANODE_DEVICE void ll_reduce(const Args& a, Algo algo) {
  if (a.op == kSum) {
    ll_world<DT, kSum, KIND>(a, algo);
  } else {
    ll_world<DT, kMinMax, KIND>(a, algo);
  }
}

template <uint32_t DT, uint32_t OP>
INTRANODE_DEVICE void pipeline_world(const Args& a) {
  by_world(a.world, [&](auto w, int n) {
    constexpr int N = decltype(w)::value;
    if constexpr (N == 2) {
      pipeline<DT, OP, N>(a, n);
    } else if (n >= 3) {  // kernels.PipelineScatters
      pipeline_scattered<DT, OP, N>(a, n);
    } else {
      pipeline<DT, OP, N>(a, n);
    }
  });
}

template <uint32_t DT, uint32_t OP>
INTRANODE_DEVICE void two_shot_world(const Args& a) {
  by_world(a.world, [&](auto w, int n) { two_shot<DT, OP, decltype(w)::value>(a, n); });
}

// ---------------------------------------------------------------------------
// Data-movement collectives (kernels/abi.go, "Reduce-scatter, all-gather,
// broadcast and all-to-all"): copy into this rank's buffer, Barrier, read
// the peers' buffers, Barrier. A block handles the same share of vectors of
// every rank's block, so every rank's copy-in of a vector and every peer's
// read of it happen in same-index blocks, across the barrier of that
// channel.

// mover_send writes vectors [lo, hi) of what each peer k needs to
// to[k] + 16*(i - skew): its block of the input (reduce-scatter,
// all-to-all) or the input (all-gather; broadcast: the root only).
template <uint32_t DT, int N>
INTRANODE_DEVICE void mover_send(const Args& a, Algo algo, char* const (&to)[kPeers<N>], int np, uint64_t stride,
                                 uint64_t nfull, uint64_t lo, uint64_t hi, uint64_t skew) {
  constexpr int P = kPeers<N>;  // peers, by index k: rank k + (k >= me)
  const int me = int(a.rank);
  if (algo == Algo::kReduceScatter || algo == Algo::kAllToAll) {
#pragma unroll
    for (int k = 0; k < P; ++k) {
      if (k < np) {
        Args blk = a;
        blk.input = a.input + uint64_t(k + (k >= me)) * stride;
        char* const one[1] = {to[k]};
        push_part<DT, 2>(blk, one, 1, nfull, aligned16(blk.input), lo, hi, skew);
      }
    }
  } else if (algo != Algo::kBroadcast || me == int(a.extra)) {
    push_part<DT, N>(a, to, np, nfull, aligned16(a.input), lo, hi, skew);
  }
}

// mover_emit writes the output's vectors [lo, hi): this rank's own part
// from its input, the others' from what peer k sent, at from[k] + 16*(i -
// skew) (reduce-scatter: the fold over all ranks, ascending).
template <uint32_t DT, uint32_t OP, int N>
INTRANODE_DEVICE void mover_emit(const Args& a, Algo algo, const char* const (&from)[kPeers<N>], int nr,
                                 uint64_t stride, uint64_t nfull, uint64_t lo, uint64_t hi, uint64_t skew) {
  constexpr int P = kPeers<N>;
  const int me = int(a.rank);
  const int root = int(a.extra);
  const bool blocked = algo == Algo::kAllGather || algo == Algo::kAllToAll;
  Args own = a;
  own.input = algo == Algo::kReduceScatter || algo == Algo::kAllToAll ? a.input + uint64_t(me) * stride : a.input;
  if (algo == Algo::kReduceScatter) {
    reduce_part<DT, OP, N>(own, from, nr, nfull, aligned16(own.input), aligned16(a.output), lo, hi, skew);
    return;
  }
#pragma unroll
  for (int k = 0; k < P; ++k) {  // static indices: from stays in registers
    const int r = k + (k >= me);
    if (k < nr - 1 && (algo != Algo::kBroadcast || r == root)) {
      copy_elems<DT, false>(from[k] - 16 * skew, blocked ? a.output + uint64_t(r) * stride : a.output, a.count, lo, hi);
    }
  }
  char* const own_out = blocked ? a.output + uint64_t(me) * stride : a.output;
  if ((algo != Algo::kBroadcast || me == root) && own.input != own_out) {
    copy_elems<DT, true>(own.input, own_out, a.count, lo, hi);
  }
}

// mover_push is the push path (kernels.MoverPath): what each peer needs
// into the peer's push slot, one barrier, the output from this rank's own
// pad and input. The slots alternate with the epoch, as the one-shot's push
// path's do.
template <uint32_t DT, uint32_t OP, int N>
INTRANODE_DEVICE void mover_push(const Args& a, Algo algo, int nr) {
  constexpr uint64_t E = kVecElems<DT>;
  PushCall<N> call;
  call.open(a, nr - 1, 0);
  const uint64_t n = a.count;
  const uint64_t stride = (algo == Algo::kBroadcast || a.extra == 0 ? n : a.extra) * kElemSize<DT>;
  const uint64_t nfull = n / E;
  uint64_t lo, hi;
  split((n + E - 1) / E, port::grid_blocks(), port::block_index(), lo, hi);
  mover_send<DT, N>(a, algo, call.dst, nr - 1, stride, nfull, lo, hi, 0);
  if (!call.team.barrier()) {
    return;
  }
  mover_emit<DT, OP, N>(a, algo, call.src, nr, stride, nfull, lo, hi, 0);
  call.close(a);
}

// mover_pipeline is the pipelined path (kMoverPipeline in Extra): the
// push path in chunks, through two chunk slots per block of the peers'
// push areas laid out as the world-2 Pipeline's (at every world), for
// blocks of any size, on the Pipeline's schedule (pipeline_steps). Input
// chunk j is read a step before output chunk j is written, so input and
// output may overlap as the ABI allows.
template <uint32_t DT, uint32_t OP, int N>
INTRANODE_DEVICE void mover_pipeline(const Args& a, Algo algo, int nr) {
  constexpr uint64_t E = kVecElems<DT>;
  constexpr int P = kPeers<N>;  // peers, by index k: rank k + (k >= me)
  const uint64_t b = port::block_index();
  const uint64_t n = a.count;
  const PipeSlots ps(a.world, n * kElemSize<DT>);  // kernels.MoverPipelineChunk
  if (!ps.ok(a)) {
    return;
  }
  const uint64_t stride = (algo == Algo::kBroadcast || a.extra == 0 ? n : a.extra) * kElemSize<DT>;
  const uint64_t nfull = n / E;
  const uint64_t nvec = (n + E - 1) / E;
  const uint64_t cv = ps.chunk / 16;  // vectors per chunk
  PushCall<N> call;
  call.open(a, nr - 1, b * ps.block_region);
  const auto push_chunk = [&](uint64_t lo, int64_t slot) {
    char* d[P];
#pragma unroll
    for (int k = 0; k < P; ++k) {
      d[k] = call.dst[k] == nullptr ? nullptr : call.dst[k] + slot;
    }
    mover_send<DT, N>(a, algo, d, nr - 1, stride, nfull, lo, min_u64(nvec, lo + cv), lo);
  };
  const auto drain_chunk = [&](uint64_t lo, int64_t slot) {
    const char* q[P];
#pragma unroll
    for (int k = 0; k < P; ++k) {
      q[k] = call.src[k] == nullptr ? nullptr : call.src[k] + slot;
    }
    mover_emit<DT, OP, N>(a, algo, q, nr, stride, nfull, lo, min_u64(nvec, lo + cv), lo);
  };
  if (pipeline_steps(call.team, ps, ps.slot1(a.world, call.epoch), b * cv, nvec, port::grid_blocks() * cv,
                     [](uint64_t) {}, push_chunk, drain_chunk)) {
    call.close(a);
  }
}

// mover_relay is the pipelined broadcast from three ranks on
// (kernels.BroadcastRelays): a chunked scatter from the root + all-gather
// among the other ranks through the scattered Pipeline's four slots per
// block region, so the root sends each chunk once, not once per peer.
// Chunks are np slices of q bytes, slice o owned by the o-th rank other
// than the root. Each step: the others copy the slices of chunk j-1 that
// their peers relayed to them out, the root scatters chunk j+1, and each
// other rank writes its slice of chunk j from the root's slot into its
// output and every other non-root peer's all-gather slot; one exchange of
// signals per step.
template <uint32_t DT, int N>
INTRANODE_DEVICE void mover_relay(const Args& a, int n) {
  constexpr uint64_t E = kVecElems<DT>;
  constexpr int U = kUnroll<N>;
  constexpr int P = kPeers<N>;  // peers, by index k: rank k + (k >= me)
  const int me = int(a.rank);
  const int root = int(a.extra);
  const int np = n - 1;
  const ScatterSlots ss(a.world, a.count, E);
  if (!ss.ok(a)) {
    return;
  }
  const uint64_t cv = uint64_t(ss.qv) * uint64_t(np);  // kernels.RelayChunk
  const uint64_t first = port::block_index() * cv;
  const uint64_t step = port::grid_blocks() * cv;
  const bool in_aligned = aligned16(a.input);
  const bool out_aligned = aligned16(a.output);
  PushCall<N> call;
  call.open(a, np, port::block_index() * ss.block_region);
  Team& team = call.team;
  const bool is_root = me == root;
  // At the root peer k owns slice k. Elsewhere, with o this rank's slice:
  // to[k] and from[k] are this block's region in, and of, the non-root
  // peer owning slice k + (k >= o) (np - 1 of them), rslot the root's
  // region in this rank's pad.
  const int o = me - (me > root);
  char* to[P];
  const char* from[P];
  const char* rslot = is_root ? nullptr : call.src[root - (root > me)];
#pragma unroll
  for (int k = 0; k < P; ++k) {
    const int s = k + (k >= o);
    const int r = s + (s >= root);
    const int kk = r - (r > me);
    const bool used = !is_root && k < np - 1;
    to[k] = used ? call.dst[kk] : nullptr;
    from[k] = used ? call.src[kk] : nullptr;
  }
  const uint32_t T = port::block_threads();
  const auto relay = [&](uint64_t lo, uint64_t slot) {
    const uint64_t mlo = lo + uint64_t(o) * ss.qv;
    const uint64_t mhi = min_u64(ss.nvec, mlo + ss.qv);
    for (uint64_t base = mlo + port::thread_index(); base < mhi; base += U * T) {
      V16 v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const uint64_t i = base + u * T;
        if (i < mhi) {
          v[u] = port::load16(rslot + slot * ss.q + 16 * (i - mlo));
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const uint64_t i = base + u * T;
        if (i < mhi) {
          message_store<DT>(a, i, ss.nfull, out_aligned, v[u]);
#pragma unroll
          for (int k = 0; k < P; ++k) {
            if (k < np - 1) {
              port::store16(to[k] + (2 + slot) * ss.q + 16 * (i - mlo), v[u]);
            }
          }
        }
      }
    }
  };
  const auto noop = [](uint64_t, uint64_t) {};
  bool ok;
  if (is_root) {
    // The root scatters np slices, none of them its own (move_slices with
    // me = np), and copies each chunk to its output.
    ok = scatter_steps(
        team, first, ss.nvec, step,
        [&](uint64_t lo, uint64_t k) {
          move_slices<DT, N, true>(a, call.dst, np, np, ss.nfull, ss.nvec, in_aligned, lo, ss.qv, k * ss.q);
        },
        [&](uint64_t lo, uint64_t) {
          if (a.output != a.input) {
            copy_elems<DT, true>(a.input, a.output, a.count, lo, min_u64(ss.nvec, lo + cv));
          }
        },
        noop);
  } else {
    ok = scatter_steps(team, first, ss.nvec, step, noop, relay, [&](uint64_t lo, uint64_t k) {
      move_slices<DT, N, false>(a, from, np - 1, o, ss.nfull, ss.nvec, out_aligned, lo, ss.qv, (2 + k) * ss.q);
    });
  }
  if (ok) {
    call.close(a);
  }
}

// mover_sync is the copy path's agreement (kernels.MoverSync): block 0's
// Barrier(all), whose first signal carries the Call and is checked; the
// other blocks and the data are left alone. After a failure (the status
// word is set: the agreement before this one timed out or found a
// mismatch) it does not signal, so that its peers fail too rather than
// pass on what this rank may no longer hold.
INTRANODE_DEVICE void mover_sync(const Args& a) {
  if (port::block_index() != 0 || (a.status != nullptr && port::load_status(a.status) != 0)) {
    return;
  }
  Team team;
  team.open(a.my_pad, a.peer_pad, a.rank, a.world, a.status, a.timeout_ns, port::block_flag(), a.call);
  team.barrier();
}

template <uint32_t DT, uint32_t OP>
INTRANODE_DEVICE void mover(const Args& a, Algo algo) {
  if ((a.extra & kMoverSync) != 0) {
    mover_sync(a);
    return;
  }
  if ((a.extra & kMoverPipeline) != 0) {
    Args p = a;
    p.extra &= ~kMoverPipeline;
    if (algo == Algo::kBroadcast && a.world >= 3) {  // kernels.BroadcastRelays
      by_world(a.world, [&](auto w, int nr) { mover_relay<DT, decltype(w)::value>(p, nr); });
      return;
    }
    by_world(a.world, [&](auto w, int nr) { mover_pipeline<DT, OP, decltype(w)::value>(p, algo, nr); });
    return;
  }
  if (a.count > 0 && a.count <= push_max(a.world) / kElemSize<DT>) {
    by_world(a.world, [&](auto w, int nr) { mover_push<DT, OP, decltype(w)::value>(a, algo, nr); });
    return;
  }
  Team team;
  team.open(a.my_pad, a.peer_pad, a.rank, a.world, a.status, a.timeout_ns, port::block_flag(), a.call);

  constexpr uint64_t size = kElemSize<DT>;
  const uint32_t me = a.rank, world = a.world;
  const uint64_t n = a.count;
  const uint64_t part = (n * size + 15) & ~uint64_t(15);  // kernels.MoverPart
  const uint64_t stride = (algo == Algo::kBroadcast || a.extra == 0 ? n : a.extra) * size;
  const uint32_t root = uint32_t(a.extra);
  char* mine = reinterpret_cast<char*>(port::load_arg_u64(a.bufs + me));
  const auto buf = [&](uint32_t r) { return reinterpret_cast<const char*>(port::load_arg_u64(a.bufs + r)); };

  const uint64_t nvec = (n + kVecElems<DT> - 1) / kVecElems<DT>;
  uint64_t lo, hi;
  split(nvec, port::grid_blocks(), port::block_index(), lo, hi);

  switch (algo) {
    case Algo::kReduceScatter:
    case Algo::kAllToAll:
      for (uint32_t r = 0; r < world; ++r) {
        if (a.input + r * stride != mine + r * part) {
          copy_elems<DT, true>(a.input + r * stride, mine + r * part, n, lo, hi);
        }
      }
      break;
    case Algo::kBroadcast:
      if (me != root) {
        break;
      }
      [[fallthrough]];
    default:
      if (a.input != mine) {
        copy_elems<DT, true>(a.input, mine, n, lo, hi);
      }
      break;
  }
  if (!team.barrier()) {
    return;
  }
  switch (algo) {
    case Algo::kReduceScatter: {
      const uint64_t nfull = n / kVecElems<DT>;
      by_world(world, [&](auto w, int nr) {
        constexpr int N = decltype(w)::value;
        const char* src[N];
#pragma unroll
        for (int r = 0; r < N; ++r) {
          src[r] = r < nr ? buf(r) + me * part : nullptr;
        }
        reduce_block<DT, OP, N>(Fold<OP>(a.op), src, nr, a.output, aligned16(a.output), lo, hi, nfull, n);
      });
      break;
    }
    case Algo::kAllGather:
      for (uint32_t r = 0; r < world; ++r) {
        copy_elems<DT, false>(buf(r), a.output + r * stride, n, lo, hi);
      }
      break;
    case Algo::kBroadcast:
      copy_elems<DT, false>(buf(root), a.output, n, lo, hi);
      break;
    default:
      for (uint32_t r = 0; r < world; ++r) {
        copy_elems<DT, false>(buf(r) + me * part, a.output + r * stride, n, lo, hi);
      }
      break;
  }
  team.last_barrier();
}

template <uint32_t DT, uint32_t OP>
INTRANODE_DEVICE void run(const Args& a, Algo algo) {
  switch (algo) {
    case Algo::kOneShot:
      one_shot_world<DT, OP>(a);
      break;
    case Algo::kTwoShot:
      two_shot_world<DT, OP>(a);
      break;
    case Algo::kHCM:
      hcm<DT, OP>(a);
      break;
    case Algo::kPipeline:
      pipeline_world<DT, OP>(a);
      break;
    default:
      mover<DT, OP>(a, algo);
      break;
  }
}

template <uint32_t DT>
INTRANODE_DEVICE void all_reduce(Args a, Algo algo) {
  // The next early launch on the stream may start now: it waits for this
  // kernel to finish before it touches memory (port::wait_dependencies).
  port::allow_dependents();
  // The LL kernels (kernels.OneShotPath and kernels.MoverPath "ll") check
  // their arguments themselves, after issuing the loads that need none of
  // check's.
  if ((algo == Algo::kOneShot || (is_mover(algo) && (a.extra & kMoverModes) == 0)) && a.count > 0 &&
      a.world >= 1 && a.world <= kMaxRanks &&
      a.count <= ll_max(a.world) / kElemSize<DT>) {
    switch (algo) {
      case Algo::kOneShot:
        ll_reduce<DT, LL::kAllReduce>(a, algo);
        break;
      case Algo::kReduceScatter:
        ll_reduce<DT, LL::kReduceScatter>(a, algo);
        break;
      case Algo::kAllToAll:
        ll_world<DT, kSum, LL::kAllToAll>(a, algo);  // no reduction: one instantiation
        break;
      default:
        ll_world<DT, kSum, LL::kGather>(a, algo);
        break;
    }
    return;
  }
  if (!check<DT>(a, algo)) {
    return;
  }
  if (is_mover(algo) && algo != Algo::kReduceScatter) {
    mover<DT, kSum>(a, algo);  // no reduction: one instantiation
  } else if (a.op == kSum) {
    run<DT, kSum>(a, algo);
  } else {
    run<DT, kMinMax>(a, algo);
  }
}

// ---------------------------------------------------------------------------
// Division (kernels.Divide): output[i] = input[i] / world, the second half
// of an average. Local memory only: no pad, no peer, no call record.

// Quotient divides in the reduction type and rounds once (int32: C's
// division, toward zero). Where world is a power of two its reciprocal is
// exact, and a times it is a / world exactly, rounded once: the same bits
// as the division (subnormal results included), for a multiplication
// instead of a division's instruction sequence, which made the kernel
// compute-bound.
struct Quotient {
  uint32_t world;
  bool pow2;
  float rf;
  double rd;
  INTRANODE_DEVICE explicit Quotient(uint32_t w)
      : world(w), pow2((w & (w - 1)) == 0), rf(1.0f / static_cast<float>(w)), rd(1.0 / static_cast<double>(w)) {}
  INTRANODE_DEVICE float operator()(float a) const {
    return pow2 ? a * rf : port::div_f32(a, static_cast<float>(world));
  }
  INTRANODE_DEVICE double operator()(double a) const {
    return pow2 ? a * rd : port::div_f64(a, static_cast<double>(world));
  }
  INTRANODE_DEVICE int32_t operator()(int32_t a) const { return a / static_cast<int32_t>(world); }
};

template <uint32_t DT>
INTRANODE_DEVICE void divide(const Args& a) {
  using T = Type<DT>;
  constexpr uint64_t size = kElemSize<DT>;
  // Launched Early, like the collective kernels: the sum ahead of it on
  // the stream must have finished before its output is read.
  port::wait_dependencies();
  port::allow_dependents();
  const bool ok = a.world >= 1 && a.world <= kMaxRanks && a.dtype == DT &&
                  (a.count == 0 || (a.input != nullptr && a.output != nullptr &&
                                    reinterpret_cast<uintptr_t>(a.input) % size == 0 &&
                                    reinterpret_cast<uintptr_t>(a.output) % size == 0));
  if (!ok) {
    if (port::block_index() == 0 && port::thread_index() == 0) {
      report(a.status, kStatusBadArgs, 0, 0);
    }
    return;
  }
  const Quotient q(a.world);
  const uint64_t stride = uint64_t(port::grid_blocks()) * port::block_threads();
  const uint64_t first = uint64_t(port::block_index()) * port::block_threads() + port::thread_index();
  uint64_t done = 0;
  if (aligned16(a.input) && aligned16(a.output)) {
    const uint64_t nvec = a.count / kVecElems<DT>;
    for (uint64_t i = first; i < nvec; i += stride) {
      Pack<DT> p;
      p.v = port::load16(a.input + i * 16);
#pragma unroll
      for (int e = 0; e < Pack<DT>::kElems; ++e) {
        p.e[e] = T::down(q(T::up(p.e[e])));
      }
      port::store16(a.output + i * 16, p.v);
    }
    done = nvec * kVecElems<DT>;
  }
  for (uint64_t e = done + first; e < a.count; e += stride) {
    const uint64_t off = e * size;
    store_elem<DT>(a.output + off, T::down(q(T::up(load_elem<DT>(a.input + off)))));
  }
}

// ---------------------------------------------------------------------------
// Signal kernels: one block; thread t serves peers t, t+blockDim, ...

INTRANODE_DEVICE bool signal_valid(const unsigned long long* pads, uint32_t rank, uint32_t world,
                                   uint32_t channel) {
  return pads != nullptr && world >= 1 && world <= kMaxRanks && rank < world &&
         channel < kNumChannels;
}

INTRANODE_DEVICE void barrier_kernel(const unsigned long long* pads, uint32_t rank, uint32_t world,
                                     uint32_t channel, uint32_t mask, uint32_t* status,
                                     uint64_t timeout_ns) {
  if (port::block_index() != 0) {
    return;
  }
  if (!signal_valid(pads, rank, world, channel) || (mask >> world) != 0) {
    if (port::thread_index() == 0) {
      report(status, kStatusBadArgs, 0, channel);
    }
    return;
  }
  const uint64_t my_pad = port::load_arg_u64(pads + rank);
  for (uint32_t p = port::thread_index(); p < world; p += port::block_threads()) {
    if (p != rank && (mask >> p & 1)) {
      Link link;
      link.open(my_pad, port::load_arg_u64(pads + p), rank, p, channel);
      link.put();
    }
  }
  for (uint32_t p = port::thread_index(); p < world; p += port::block_threads()) {
    if (p != rank && (mask >> p & 1)) {
      Link link;
      link.open(my_pad, port::load_arg_u64(pads + p), rank, p, channel);
      if (link.wait(timeout_ns) != Link::kWaitOK) {
        report(status, kStatusTimeout, p, channel);
        return;
      }
    }
  }
}

// confirm_kernel is the barrier that follows each call through the vendor
// library (kernels.ConfirmKernel): unless the comm has failed on this rank
// (status[1], kernels.FailedWord, which the host sets before it aborts the
// vendor communicator), it signals its peers and waits for theirs. A peer
// that gave up on the call and aborted never confirms it, so a rank whose
// vendor call completed on what an aborted peer's kernel posted (NCCL's
// kernels still post their steps once aborted) times out here instead of
// returning that result.
INTRANODE_DEVICE void confirm_kernel(const unsigned long long* pads, uint32_t rank, uint32_t world,
                                     uint32_t channel, uint32_t mask, uint32_t* status, uint64_t timeout_ns) {
  if (status != nullptr && port::load_status(status + 1) != 0) {
    return;
  }
  barrier_kernel(pads, rank, world, channel, mask, status, timeout_ns);
}

// single_link opens the link of a one-peer signal kernel on thread 0 of
// block 0, the only thread that works; false elsewhere and on bad
// arguments (reported).
INTRANODE_DEVICE bool single_link(Link& link, const unsigned long long* pads, uint32_t rank, uint32_t world,
                                  uint32_t peer, uint32_t channel, uint32_t* status) {
  if (port::block_index() != 0 || port::thread_index() != 0) {
    return false;
  }
  if (!signal_valid(pads, rank, world, channel) || peer >= world) {
    report(status, kStatusBadArgs, peer, channel);
    return false;
  }
  link.open(port::load_arg_u64(pads + rank), port::load_arg_u64(pads + peer), rank, peer, channel);
  return true;
}

INTRANODE_DEVICE void put_signal_kernel(const unsigned long long* pads, uint32_t rank,
                                        uint32_t world, uint32_t peer, uint32_t channel,
                                        uint32_t* status) {
  Link link;
  if (single_link(link, pads, rank, world, peer, channel, status)) {
    link.put();
  }
}

INTRANODE_DEVICE void wait_signal_kernel(const unsigned long long* pads, uint32_t rank,
                                         uint32_t world, uint32_t peer, uint32_t channel,
                                         uint32_t* status, uint64_t timeout_ns) {
  Link link;
  if (single_link(link, pads, rank, world, peer, channel, status) && link.wait(timeout_ns) != Link::kWaitOK) {
    report(status, kStatusTimeout, peer, channel);
  }
}

}  // namespace intranode
