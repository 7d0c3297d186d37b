#!/usr/bin/env bash
# With the rebuilt image (LL poll backoff): W2 conformance in processes, the enqueue skew bench,
# bench chained/eager, nccl-tests with and without the library.
set -u
export NCCL_NVLS_ENABLE=0
O=/tmp/r2; rm -rf $O; mkdir -p $O $OUT
pack() { tar czf $OUT/r2.tgz -C /tmp r2; }
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step info
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv; git log -1 --format=%h 2>/dev/null; } | tee $O/info.txt
NCCL_DIR=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null || python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])')
export LD_LIBRARY_PATH=$NCCL_DIR/lib:${LD_LIBRARY_PATH:-}
mkdir -p /tmp/ncclhome/lib && ln -sf "$NCCL_DIR/include" /tmp/ncclhome/include && ln -sf "$NCCL_DIR/lib/libnccl.so.2" /tmp/ncclhome/lib/libnccl.so
B=/tmp/nt
if [ ! -x $B/broadcast_perf ] || [ ! -x $B/reduce_scatter_perf ] || [ ! -x $B/all_reduce_perf ] || [ ! -x $B/all_gather_perf ]; then
( cd .gpu/nccl-tests/src && timeout 300 make -j8 BUILDDIR=$B NCCL_HOME=/tmp/ncclhome CUDA_HOME=/usr/local/cuda \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" $B/all_reduce_perf $B/all_gather_perf $B/reduce_scatter_perf $B/broadcast_perf ) > $O/nt-build.txt 2>&1 &
fi
step conformance
timeout 200 .gpu/intranode conformance --backend cuda --world 2 --timeout 60s > $O/conformance.txt 2>&1; echo "rc=$?" >> $O/conformance.txt
grep -v '^pass' $O/conformance.txt | tail -4
pack
wait
step enqueue
timeout 120 .gpu/cuda.test -test.run '^$' -test.bench 'GPUEnqueue/(oneshot|twoshot|allgather-direct)/(1|64|256)KiB$' -test.benchtime 1280x -test.count 3 > $O/enqueue.txt 2>&1
grep -E "ns/op|FAIL|panic" $O/enqueue.txt | awk '{print $1, $3, $4, $5, $6}'
pack
step bench
timeout 90 .gpu/intranode bench --backend cuda --world 2 --graph --op all_reduce,reduce_scatter,all_gather,broadcast,alltoall --algo auto,nccl -b 1K -e 1M -f 4 --iters 30 --warmup 5 > $O/bench-graph.txt 2>&1
timeout 90 .gpu/intranode bench --backend cuda --world 2 --op all_reduce,reduce_scatter,all_gather,broadcast --algo auto,nccl -b 1K -e 1M -f 4 --iters 50 --warmup 10 > $O/bench-eager.txt 2>&1
grep -E "^ +[0-9]|^# [a-z_]+$" $O/bench-graph.txt | awk '/^#/{printf "\n%s ", $2; next} {printf "%s/%s/%s ", $1, $5, $7} END {print ""}'
grep -E "^ +[0-9]|^# [a-z_]+$" $O/bench-eager.txt | awk '/^#/{printf "\n%s ", $2; next} {printf "%s/%s/%s ", $1, $5, $7} END {print ""}'
pack
step nccl-tests
NT="-b 1K -e 1M -f 4 -c 1 -t 2 -g 1 -d bfloat16 -w 20 -n 200"
for t in all_reduce reduce_scatter all_gather broadcast; do
  for with in no yes; do
    pre=""; [ $with = yes ] && pre=$PWD/.gpu/libintranode-nccl.so
    LD_PRELOAD=$pre INTRANODE_NCCL_DEBUG=INFO timeout 60 $B/${t}_perf $NT > $O/nt-$t-$with.txt 2>&1
    echo "$t $with: $(grep -E '^ +[0-9]+ ' $O/nt-$t-$with.txt | awk '{printf "%s/%s/%s ", $1, $6, $10}') acc=$(grep -c 'msg=accelerated' $O/nt-$t-$with.txt)"
  done
done
pack
