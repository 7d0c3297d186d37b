// Kernels used by the CUDA backend's GPU tests. Regenerate the PTX with
//
//	nvcc -ptx -arch=compute_80 -ccbin g++-11 -o testkernels.ptx testkernels.cu
//
// PTX for compute_80 is JIT-compiled by the driver for any newer GPU.

// add_one adds 1 to each of n 32-bit words.
extern "C" __global__ void add_one(unsigned int *p, unsigned long long n) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

// fill_u32 stores v into each of n words. Its argument list (pointer, 4-byte
// value, 8-byte count) checks that arguments are packed with C alignment.
extern "C" __global__ void fill_u32(unsigned int *p, unsigned int v, unsigned long long n) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}

// spin_until waits until *flag (host-mapped memory) becomes non-zero, then
// stores the value it saw into *out.
extern "C" __global__ void spin_until(volatile unsigned int *flag, unsigned int *out) {
  unsigned int v;
  while ((v = *flag) == 0) {
  }
  *out = v;
}
