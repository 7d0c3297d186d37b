import sys
p=sys.argv[1]
s=open(p).read()
anchor='template <uint32_t DT, uint32_t OP, int N>\nINTRANODE_DEVICE void pipeline(const Args& a, int n) {\n'
assert anchor in s
helpers='''__device__ unsigned int intranode_trace_calls[128];
struct PipeTrace {
  bool on = false;
  int k = 0;
  long long c[40];
  unsigned long long g0 = 0, g1 = 0;
  __device__ void start(uint64_t bytes, uint64_t b) {
    if (threadIdx.x == 0 && bytes == TRACE_BYTES && (b == 0 || b == 1 || b == 64 || b == 127)) {
      unsigned int n = atomicAdd(&intranode_trace_calls[b], 1u);
      on = n == TRACE_CALL;
      if (on) { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0)); c[k++] = clock64(); }
    }
  }
  __device__ void mark() { if (on && k < 40) c[k++] = clock64(); }
  __device__ void done(uint32_t rank, uint64_t b) {
    if (!on) return;
    c[k++] = clock64();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
    double nsPer = double(g1 - g0) / double(c[k - 1] - c[0]);
    printf("TRACE r%u b%llu g0=%llu total=%llu nsPerClk=%.4f n=%d\\n", rank, (unsigned long long)b, g0, g1 - g0, nsPer, k - 1);
    int m[40];
    for (int i = 0; i < 40; ++i) m[i] = i + 1 < k ? int(double(c[i + 1] - c[0]) * nsPer) : -1;
    for (int i = 0; i < 40; i += 10)
      printf("MARKS r%u b%llu i%d: %d %d %d %d %d %d %d %d %d %d\\n", rank, (unsigned long long)b, i, m[i], m[i + 1], m[i + 2],
             m[i + 3], m[i + 4], m[i + 5], m[i + 6], m[i + 7], m[i + 8], m[i + 9]);
  }
};
'''
s=s.replace(anchor, helpers+anchor)
body_start=s.index(anchor)+len(anchor)
s=s[:body_start]+'  PipeTrace tr;\n  tr.start(a.count * kElemSize<DT>, port::block_index());\n'+s[body_start:]
def rep(old,new):
    global s
    i=s.index(anchor)
    j=s.index('epoch_count_out(a.my_pad, epoch, ticket);\n}', i)
    seg=s[i:j]
    assert seg.count(old)==1,(old,seg.count(old))
    s=s[:i]+seg.replace(old,new)+s[j:]
rep('  const uint32_t ticket = epoch_count_in(a.my_pad, epoch);\n','  const uint32_t ticket = epoch_count_in(a.my_pad, epoch);\n  tr.mark();\n')
rep('    push_chunk(b * cv, 0);\n    team.post(true);\n','    push_chunk(b * cv, 0);\n    tr.mark();\n    team.post(true);\n    tr.mark();\n')
rep('    if (!team.receive(lo == b * cv)) {\n      return;\n    }\n','    if (!team.receive(lo == b * cv)) {\n      return;\n    }\n    tr.mark();\n')
rep('      push_chunk(lo + step, odd ? 0 : slot1);\n    }\n','      push_chunk(lo + step, odd ? 0 : slot1);\n    }\n    tr.mark();\n')
rep('reduce_part<DT, OP, N>(a, q, n, nfull, in_aligned, out_aligned, lo, min_u64(nvec, lo + cv), lo);\n    if (more) {\n      team.post(false);\n    }','reduce_part<DT, OP, N>(a, q, n, nfull, in_aligned, out_aligned, lo, min_u64(nvec, lo + cv), lo);\n    tr.mark();\n    if (more) {\n      team.post(false);\n      tr.mark();\n    }')
i=s.index(anchor); j=s.index('epoch_count_out(a.my_pad, epoch, ticket);\n}', i)
s=s[:j]+'tr.done(a.rank, port::block_index());\n  '+s[j:]
open(p,'w').write(s)
