#!/usr/bin/env bash
# Session 6, run C on nvidia-h100-x2: the first CUDA build of the
# reduce-scatter, all-gather, broadcast and all-to-all kernels. Builds the
# fatbin with nvcc here (sm_80, sm_90, compute_90), compares every kernel's
# registers and spills with the committed image, then with the new image
# (INTRANODE_CUDA_KERNELS): conformance at world 2 in processes, the four
# collectives at worlds 4 and 8 with ranks sharing GPU 0, and the graph
# sweep of every collective with NCCL in the same run.
set -u
export NCCL_NVLS_ENABLE=0
gunzip -c .gpu/new.gz > /tmp/new; chmod +x /tmp/new
R=$OUT/r; mkdir -p $R
step() { echo; echo "=== $1 ($(date -u +%T))"; }
step build
cp kernels/cuda/collectives.fatbin /tmp/old.fatbin
nvcc --version | tail -1
time make -C kernels/cuda NVCCFLAGS="-O3 -std=c++17 --threads 0" all 2>&1 | tail -5
cp kernels/cuda/collectives.fatbin kernels/cuda/collectives.fatbin.sha256 $OUT/
export INTRANODE_CUDA_KERNELS=$PWD/kernels/cuda/collectives.fatbin
step resources
res() { cuobjdump -res-usage -arch sm_90 "$1" 2>&1 | awk '/Function/{fn=$2; sub(":","",fn)} /REG:/{print fn, $1, $2, $4}' | sort; }
res /tmp/old.fatbin > $R/res-old.txt; res kernels/cuda/collectives.fatbin > $R/res-new.txt
diff $R/res-old.txt <(grep -v "reduce_scatter\|all_gather\|broadcast\|all_to_all" $R/res-new.txt) && echo "registers, stack and local memory of the $(wc -l < $R/res-old.txt) all-reduce and signal kernels: unchanged"
grep "reduce_scatter\|all_gather\|broadcast\|all_to_all" $R/res-new.txt | head -20
step conformance
timeout 200 /tmp/new conformance --backend cuda --world 2 --timeout 60s > $R/conformance.txt 2>&1
grep -vE '^pass' $R/conformance.txt | tail -12
step shared-device
TEST_INTRA_NODE_COMM=1 timeout 120 /tmp/new conformance --backend cuda --share-device --world 4,8 --timeout 30s --run 'reduce_scatter|all_gather|broadcast|alltoall|movers' > $R/shared.txt 2>&1
grep -vE '^pass' $R/shared.txt | tail -8
step bench-graph
timeout 200 /tmp/new bench --backend cuda --world 2 --graph --op all -b 1K -e 256M -f 4 --iters 30 --warmup 5 --algo direct,nccl,auto --plot $R/bench.svg > $R/bench-graph.txt 2>&1
grep -E '^# [a-z_]+$|direct|nccl|auto' $R/bench-graph.txt | grep -v "^# time\|^# output\|^# (n" 
step done
tar czf $OUT/runC.tgz -C $OUT r && rm -rf $R
