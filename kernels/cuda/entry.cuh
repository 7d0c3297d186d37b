// entry.cuh: the extern "C" entry points of the kernel ABI (kernels/abi.go).
//
// Included after a port header and intranode.cuh. Parameter lists follow
// AllReduceArgs.Args() and SignalArgs.Args() member for member; the host
// marshals them as a C struct with natural alignment (backend.MarshalArgs):
//
//   all-reduce: bufs@0 pads@8 input@16 output@24 count@32 rank@40 world@44
//               dtype@48 op@52 status@56 timeout_ns@64 extra@72 call@80 (88 bytes)
//   signal:     pads@0 rank@8 world@12 peer@16 channel@20 mask@24
//               status@32 timeout_ns@40 (48 bytes)
//
// Recommended launches (block sizes above INTRANODE_MAX_THREADS = 512 fail;
// every rank must use the same grid for the same call; grid <= 128,
// kernels.KernelChannels; collective.LaunchConfig is the reference):
//
//   one_shot:  block 512; grid = clamp(ceil(bytes / per), 1, 128) with per
//              16 KiB on the LL path below 16 KiB and 2 KiB above it,
//              8 KiB on the push path, 16 KiB on the classic path
//              (kernels.OneShotPath picks the path).
//   two_shot:  block 512, grid = clamp(ceil(bytes / world / (512 * 16)), 1, 128)
//   hcm:       block 512, grid = clamp(ceil(bytes / (512 * 16 * 2)), 1, 32)
//   pipeline:  block 512, any grid <= 128 that leaves kernels.PipelineChunk
//              >= 16 bytes (collective.LaunchConfig: up to 128 blocks)
//   reduce_scatter, all_gather, broadcast, all_to_all (AllReduceArgs too):
//              block 512, any grid <= 128 (collective's moverLaunchConfig:
//              on the LL path the one-shot LL's grid for a rank's block,
//              else a block per 32 KiB read and written, up to 64)
//   divide:    block 512, any grid (kernels.Divide; collective's divideConfig:
//              a block per 8 KiB, up to 1024)
//   barrier, put_signal, wait_signal: grid 1, block 32.
//
// A kernel that finds bad arguments or times out stores its status word (CAS
// from 0) and returns; it never traps.
#pragma once

// INTRANODE_ARGS_ENTRY defines entry point NAME with AllReduceArgs'
// parameter list; its body runs CALL on the intranode::Args a.
#define INTRANODE_ARGS_ENTRY(NAME, CALL)                                                         \
  INTRANODE_KERNEL NAME(const unsigned long long* bufs, const unsigned long long* pads,          \
                        const void* input, void* output, unsigned long long count,               \
                        unsigned int rank, unsigned int world, unsigned int dtype,               \
                        unsigned int op, unsigned int* status, unsigned long long timeout_ns,    \
                        unsigned long long extra, unsigned long long call) {                     \
    const intranode::Args a = {bufs,  pads, static_cast<const char*>(input),                     \
                               static_cast<char*>(output), count, rank, world, dtype, op,        \
                               status, timeout_ns, extra, call};                                 \
    CALL;                                                                                        \
  }

// INTRANODE_FOR_TYPES expands ENTRY(type name, type, ...) for every
// element type; INTRANODE_TRIAL_BF16 builds bf16 alone, a trial image made
// in a fraction of the time (scripts/gpu/ktrial.sh).
#ifdef INTRANODE_TRIAL_BF16
#define INTRANODE_FOR_TYPES(ENTRY, ...) ENTRY(bf16, intranode::kBF16, __VA_ARGS__)
#else
#define INTRANODE_FOR_TYPES(ENTRY, ...)        \
  ENTRY(f32, intranode::kF32, __VA_ARGS__)     \
  ENTRY(f16, intranode::kF16, __VA_ARGS__)     \
  ENTRY(bf16, intranode::kBF16, __VA_ARGS__)   \
  ENTRY(f64, intranode::kF64, __VA_ARGS__)     \
  ENTRY(i32, intranode::kI32, __VA_ARGS__)
#endif

#define INTRANODE_ALL_REDUCE(DTYPE_NAME, DTYPE, ALGO_NAME, ALGO) \
  INTRANODE_ARGS_ENTRY(intranode_##ALGO_NAME##_##DTYPE_NAME, intranode::all_reduce<DTYPE>(a, ALGO))

#define INTRANODE_DIVIDE(DTYPE_NAME, DTYPE, ...) \
  INTRANODE_ARGS_ENTRY(intranode_divide_##DTYPE_NAME, intranode::divide<DTYPE>(a))

INTRANODE_FOR_TYPES(INTRANODE_ALL_REDUCE, one_shot, intranode::Algo::kOneShot)
INTRANODE_FOR_TYPES(INTRANODE_ALL_REDUCE, two_shot, intranode::Algo::kTwoShot)
INTRANODE_FOR_TYPES(INTRANODE_ALL_REDUCE, hcm, intranode::Algo::kHCM)
INTRANODE_FOR_TYPES(INTRANODE_ALL_REDUCE, pipeline, intranode::Algo::kPipeline)
INTRANODE_FOR_TYPES(INTRANODE_ALL_REDUCE, reduce_scatter, intranode::Algo::kReduceScatter)
INTRANODE_FOR_TYPES(INTRANODE_ALL_REDUCE, all_gather, intranode::Algo::kAllGather)
INTRANODE_FOR_TYPES(INTRANODE_ALL_REDUCE, broadcast, intranode::Algo::kBroadcast)
INTRANODE_FOR_TYPES(INTRANODE_ALL_REDUCE, all_to_all, intranode::Algo::kAllToAll)
INTRANODE_FOR_TYPES(INTRANODE_DIVIDE, divide)

#undef INTRANODE_DIVIDE
#undef INTRANODE_ALL_REDUCE
#undef INTRANODE_FOR_TYPES
#undef INTRANODE_ARGS_ENTRY

INTRANODE_KERNEL intranode_barrier(const unsigned long long* pads, unsigned int rank,
                                   unsigned int world, unsigned int peer, unsigned int channel,
                                   unsigned int mask, unsigned int* status,
                                   unsigned long long timeout_ns) {
  (void)peer;
  intranode::barrier_kernel(pads, rank, world, channel, mask, status, timeout_ns);
}

INTRANODE_KERNEL intranode_confirm(const unsigned long long* pads, unsigned int rank,
                                   unsigned int world, unsigned int peer, unsigned int channel,
                                   unsigned int mask, unsigned int* status,
                                   unsigned long long timeout_ns) {
  (void)peer;
  intranode::confirm_kernel(pads, rank, world, channel, mask, status, timeout_ns);
}

INTRANODE_KERNEL intranode_put_signal(const unsigned long long* pads, unsigned int rank,
                                      unsigned int world, unsigned int peer, unsigned int channel,
                                      unsigned int mask, unsigned int* status,
                                      unsigned long long timeout_ns) {
  (void)mask;
  (void)timeout_ns;
  intranode::put_signal_kernel(pads, rank, world, peer, channel, status);
}

INTRANODE_KERNEL intranode_wait_signal(const unsigned long long* pads, unsigned int rank,
                                       unsigned int world, unsigned int peer, unsigned int channel,
                                       unsigned int mask, unsigned int* status,
                                       unsigned long long timeout_ns) {
  (void)mask;
  intranode::wait_signal_kernel(pads, rank, world, peer, channel, status, timeout_ns);
}
