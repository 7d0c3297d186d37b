#!/usr/bin/env bash
# ncclAlltoAll through the library: nccl-tests alltoall and PyTorch all_to_all_single, without and with it.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
O=/tmp/r3; rm -rf $O; mkdir -p $O $OUT
pack() { tar czf $OUT/r3.tgz -C /tmp r3; }
step() { echo; echo "=== $1 ($(date -u +%T))"; }
LIB=$PWD/.gpu/libintranode-nccl.so
NCCL_DIR=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null || python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])')
export LD_LIBRARY_PATH=$NCCL_DIR/lib:${LD_LIBRARY_PATH:-}
step info
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv; python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
  TL=$(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib","libtorch_cuda.so"))'); echo "libtorch_cuda NCCL all-to-all imports:"; nm -D "$TL" | grep -i "alltoall"; } 2>&1 | tee $O/info.txt
mkdir -p /tmp/ncclhome/lib && ln -sf "$NCCL_DIR/include" /tmp/ncclhome/include && ln -sf "$NCCL_DIR/lib/libnccl.so.2" /tmp/ncclhome/lib/libnccl.so
B=/tmp/nt
( cd .gpu/nccl-tests/src && timeout 300 make -j16 BUILDDIR=$B NCCL_HOME=/tmp/ncclhome CUDA_HOME=/usr/local/cuda \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" $B/alltoall_perf ) > $O/nt-build.txt 2>&1 &
step torch-perf
for with in no yes; do
  pre=""; [ $with = yes ] && pre=$LIB
  LD_PRELOAD=$pre INTRANODE_NCCL_DEBUG=INFO MODE=perf PERF_OPS=all_to_all timeout 120 torchrun --standalone --nproc-per-node 2 scripts/gpu/nccl_api_torch.py > $O/torch-perf-$with.txt 2>&1
  echo "lib=$with exit $? accelerated=$(grep -c 'msg=accelerated' $O/torch-perf-$with.txt)"
done
grep PERF $O/torch-perf-no.txt > $O/p-no; grep PERF $O/torch-perf-yes.txt > $O/p-yes
paste $O/p-no $O/p-yes | awk '{printf "%-12s %10d graph nccl %8s lib %8s (%.2fx)  eager nccl %8s lib %8s\n", $2, $3, $4, $11, $4/$11, $5, $12}'
pack
wait
step nccl-tests
for with in no yes; do
  pre=""; [ $with = yes ] && pre=$LIB
  LD_PRELOAD=$pre INTRANODE_NCCL_DEBUG=INFO timeout 90 $B/alltoall_perf -b 1K -e 256M -f 4 -c 1 -t 2 -g 1 -d bfloat16 -w 20 -n 100 > $O/nt-alltoall-$with.txt 2>&1
  echo "alltoall $with exit $?: $(grep -E '^ +[0-9]+ ' $O/nt-alltoall-$with.txt | awk '{printf "%s/%s/%s/%s ", $1, $6, $9, $10}') $(grep -E 'Out of bounds' $O/nt-alltoall-$with.txt) acc=$(grep -c 'msg=accelerated' $O/nt-alltoall-$with.txt)"
done
pack
step torch-correct
RAW=/tmp/r3raw WITH=yes STEPS=torch TORCH_TIMEOUT=${TC:-200} bash scripts/gpu/nccl-api.sh 2>&1 | tail -8
cp /tmp/r3raw/r/torch-correct-yes.txt $O/ 2>/dev/null
pack
