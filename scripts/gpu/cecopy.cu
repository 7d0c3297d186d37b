// cecopy.cu: what the copy engines and SM stores move between two GPUs of
// one host, one way and both ways at once (GB/s, 10^9 bytes/s). Two GPUs
// in one process with peer access; each figure is the median of 5 timed
// repetitions after 2 warm-ups. Build and run on the GPU host:
//   nvcc -O3 -std=c++17 -o .gpu/cecopy scripts/gpu/cecopy.cu && .gpu/cecopy [graph]
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); return 1; } } while (0)

// store_copy: every thread copies 16-byte vectors, grid-strided.
__global__ void store_copy(const int4* __restrict__ src, int4* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    dst[i] = src[i];
  }
}

// empty stands in for a one-block launch between copies.
__global__ void empty() {}

int main(int argc, char** argv) {
  // "graph": only the graphs of pulls at the end.
  const bool graph_only = argc > 1 && std::string(argv[1]) == "graph";
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  if (n < 2) { std::printf("needs two GPUs, found %d\n", n); return 1; }
  for (int d = 0; d < 2; ++d) { CK(cudaSetDevice(d)); CK(cudaDeviceEnablePeerAccess(1 - d, 0)); }
  const size_t sizes[] = {size_t(16) << 20, size_t(64) << 20, size_t(256) << 20};
  void* a[2]; void* b[2]; void* c[2]; cudaStream_t s[2], s2[2]; cudaEvent_t e0[2], e1[2], e2[2];
  for (int d = 0; d < 2; ++d) {
    CK(cudaSetDevice(d)); CK(cudaMalloc(&a[d], sizes[2])); CK(cudaMalloc(&b[d], sizes[2]));
    CK(cudaMalloc(&c[d], sizes[2]));
    CK(cudaMemset(a[d], d + 1, sizes[2])); CK(cudaStreamCreateWithFlags(&s[d], cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2[d], cudaStreamNonBlocking));
    CK(cudaEventCreate(&e0[d])); CK(cudaEventCreate(&e1[d])); CK(cudaEventCreate(&e2[d]));
  }
  // mode: 0 CE pull (the receiver's engine reads the peer), 1 CE push (the
  // sender's engine writes the peer), 2 SM stores to the peer (132 blocks),
  // 3 SM loads from the peer, 4 CE pull with a local copy of the same size
  // on a second stream of the receiver at the same time (an all-gather's
  // own part beside its peer's).
  const char* names[] = {"ce-pull", "ce-push", "sm-store", "sm-load", "ce-pull+local"};
  for (size_t bytes : sizes) {
    for (int mode = 0; mode < 5 && !graph_only; ++mode) {
      for (int both = 0; both < 2; ++both) {
        std::vector<float> gbs;
        for (int rep = 0; rep < 7; ++rep) {
          float worst = 0;
          for (int d = 0; d < 2; ++d) { CK(cudaSetDevice(d)); CK(cudaDeviceSynchronize()); }
          for (int d = 0; d < 1 + both; ++d) {
            // Direction d: data moves from GPU 1-d to GPU d.
            const int rx = d, tx = 1 - d;
            const int eng = (mode == 0 || mode == 3 || mode == 4) ? rx : tx;
            CK(cudaSetDevice(eng));
            CK(cudaEventRecord(e0[eng], s[eng]));
            if (mode == 4) {  // the local copy on s2, joined back into s
              CK(cudaStreamWaitEvent(s2[eng], e0[eng], 0));
              CK(cudaMemcpyAsync(c[rx], a[rx], bytes, cudaMemcpyDeviceToDevice, s2[eng]));
              CK(cudaEventRecord(e2[eng], s2[eng]));
            }
            if (mode <= 1 || mode == 4) {
              CK(cudaMemcpyAsync(b[rx], a[tx], bytes, cudaMemcpyDeviceToDevice, s[eng]));
              if (mode == 4) CK(cudaStreamWaitEvent(s[eng], e2[eng], 0));
            } else {
              store_copy<<<132, 512, 0, s[eng]>>>(static_cast<const int4*>(a[tx]), static_cast<int4*>(b[rx]), bytes / 16);
            }
            CK(cudaEventRecord(e1[eng], s[eng]));
          }
          for (int d = 0; d < 1 + both; ++d) {
            const int eng = (mode == 0 || mode == 3 || mode == 4) ? d : 1 - d;
            CK(cudaSetDevice(eng)); CK(cudaEventSynchronize(e1[eng]));
            float ms = 0; CK(cudaEventElapsedTime(&ms, e0[eng], e1[eng]));
            worst = std::max(worst, ms);
          }
          if (rep >= 2) gbs.push_back(bytes / (worst * 1e-3f) / 1e9f);
        }
        std::sort(gbs.begin(), gbs.end());
        std::printf("%-9s %-9s %4zu MiB  %6.1f GB/s per direction (min %.1f, max %.1f)\n", names[mode],
                    both ? "both-ways" : "one-way", bytes >> 20, gbs[gbs.size() / 2], gbs.front(), gbs.back());
      }
    }
  }
  // What a call of the copy path pays around its pull: a graph of 20
  // one-way pulls captured alone, and the same with an empty one-block
  // kernel before and after each pull (the copy path's two agreement
  // launches, without their signals). Median of 5 replays, per pull.
  for (size_t bytes : sizes) {
    for (int kern = 0; kern < 2; ++kern) {
      CK(cudaSetDevice(0));
      cudaGraph_t g; cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(s[0], cudaStreamCaptureModeGlobal));
      for (int i = 0; i < 20; ++i) {
        if (kern) empty<<<1, 32, 0, s[0]>>>();
        CK(cudaMemcpyAsync(b[0], a[1], bytes, cudaMemcpyDeviceToDevice, s[0]));
        if (kern) empty<<<1, 32, 0, s[0]>>>();
      }
      CK(cudaStreamEndCapture(s[0], &g));
      CK(cudaGraphInstantiate(&ge, g, 0));
      std::vector<float> us;
      for (int rep = 0; rep < 7; ++rep) {
        CK(cudaEventRecord(e0[0], s[0])); CK(cudaGraphLaunch(ge, s[0])); CK(cudaEventRecord(e1[0], s[0]));
        CK(cudaEventSynchronize(e1[0]));
        float ms = 0; CK(cudaEventElapsedTime(&ms, e0[0], e1[0]));
        if (rep >= 2) us.push_back(ms * 1e3f / 20);
      }
      std::sort(us.begin(), us.end());
      std::printf("graph     %-13s %4zu MiB  %8.2f us a pull (%.1f GB/s)\n", kern ? "kernel+pull+kernel" : "pull", bytes >> 20,
                  us[us.size() / 2], bytes / (us[us.size() / 2] * 1e-6f) / 1e9f);
      CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
    }
  }
  return 0;
}

