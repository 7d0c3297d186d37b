#!/usr/bin/env bash
# Session 9, second call on nvidia-h200-x4 (binary of 3b64d5d: the kernel
# module loads beside the rendezvous's exchanges): the first Rendezvous's
# phases at world 4, three times, then the collectives across 2 simulated
# hosts of 2 GPUs (the hosts/* cases: the LL path inside each host).
set -u
export NCCL_NVLS_ENABLE=0
R=$OUT/r; mkdir -p $R
for i in 1 2 3; do
  timeout 60 .gpu/intranode bench --backend cuda --world 4 -b 1K -e 1K --iters 5 --warmup 1 -v > $R/rendezvous-$i.txt 2>&1
  grep -h "first Rendezvous" $R/rendezvous-$i.txt
  grep -h '"symmetric rendezvous phases"' $R/rendezvous-$i.txt | sed 's/.*phases="\([^"]*\)" total=\(.*\)/\1 total=\2/'
done
timeout 150 .gpu/intranode conformance --backend cuda --hosts 2 --world 4 --timeout 60s --run '^hosts/' > $R/hosts-conformance.txt 2>&1
tail -2 $R/hosts-conformance.txt
tar czf $OUT/results.tgz -C $OUT r
