#!/usr/bin/env bash
# LL poll backoff trial, 2 GPUs: trial images + enqueue skew bench + chained/eager bench + nccl-tests.
set -u
export NCCL_NVLS_ENABLE=0
O=$OUT
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info
nvidia-smi --query-gpu=index,name,driver_version --format=csv | tee $O/info.txt
NCCL_DIR=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null || python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])')
export LD_LIBRARY_PATH=$NCCL_DIR/lib:${LD_LIBRARY_PATH:-}
step build
VARIANTS="${VARIANTS:-base:-DINTRANODE_LL_SLEEP_MAX=0 s1k: s256:-DINTRANODE_LL_SLEEP_MAX=256 s4k:-DINTRANODE_LL_SLEEP_MAX=4096}"
VARIANTS="$VARIANTS" bash scripts/gpu/ktrial.sh > $O/ktrial.txt 2>&1 &
mkdir -p /tmp/ncclhome/lib && ln -sf "$NCCL_DIR/include" /tmp/ncclhome/include && ln -sf "$NCCL_DIR/lib/libnccl.so.2" /tmp/ncclhome/lib/libnccl.so
B=/tmp/nt
( cd .gpu/nccl-tests/src && timeout 300 make -j8 BUILDDIR=$B NCCL_HOME=/tmp/ncclhome CUDA_HOME=/usr/local/cuda \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" $B/all_reduce_perf $B/all_gather_perf ) > $O/nt-build.txt 2>&1 &
wait
cat $O/ktrial.txt; tail -2 $O/nt-build.txt; ls $B
NT="-b 1K -e 1M -f 4 -c 1 -t 2 -g 1 -d bfloat16 -w 20 -n 200"
for t in all_reduce all_gather; do timeout 60 $B/${t}_perf $NT > $O/nt-$t-nccl.txt 2>&1; done
for img in committed ${IMAGES:-base s1k s256 s4k}; do
  step "image $img"
  if [ $img = committed ]; then unset INTRANODE_CUDA_KERNELS; else export INTRANODE_CUDA_KERNELS=/tmp/ktrial/$img.fatbin; fi
  timeout 90 .gpu/cuda.test -test.run '^$' -test.bench 'GPUEnqueue/(oneshot/(1|64|256)KiB|twoshot/256KiB|allgather-direct)' -test.benchtime 1280x > $O/enqueue-$img.txt 2>&1
  grep -E "ns/op|FAIL|panic" $O/enqueue-$img.txt | awk '{print $1, $3, $4, $5, $6}'
  timeout 60 .gpu/intranode bench --backend cuda --world 2 --graph --op all_reduce,all_gather --algo auto -b 1K -e 1M -f 4 --iters 30 --warmup 5 > $O/bench-graph-$img.txt 2>&1
  timeout 60 .gpu/intranode bench --backend cuda --world 2 --op all_reduce,all_gather --algo auto -b 1K -e 1M -f 4 --iters 50 --warmup 10 > $O/bench-eager-$img.txt 2>&1
  grep -E "^ +[0-9]" $O/bench-graph-$img.txt | awk '{printf "%s/%s ", $1, $7} END {print " graph"}'
  grep -E "^ +[0-9]" $O/bench-eager-$img.txt | awk '{printf "%s/%s ", $1, $7} END {print " eager"}'
  for t in all_reduce all_gather; do
    LD_PRELOAD=$PWD/.gpu/libintranode-nccl.so timeout 60 $B/${t}_perf $NT > $O/nt-$t-$img.txt 2>&1
  done
done
step nccl-tests
for t in all_reduce all_gather; do
  for f in $O/nt-$t-*.txt; do echo "$f: $(grep -E '^ +[0-9]+ ' $f | awk '{printf "%s/%s ", $1, $6}')"; done
done
