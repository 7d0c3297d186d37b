#!/usr/bin/env bash
# Session 5 on one H100: `intranode bench --share-device` (every rank on
# device 0) at worlds 2, 4 and 8, every algorithm, results checked on
# every iteration (#wrong): a correctness run, not a performance figure.
set -u
gunzip -c .gpu/new.gz > /tmp/new; chmod +x /tmp/new
for w in 2 4 8; do
  echo "=== world $w ($(date -u +%T))"
  TEST_INTRA_NODE_COMM=1 timeout 150 /tmp/new bench --backend cuda --share-device --world $w -b 1K -e 64M -f 8 \
    --algo oneshot,twoshot,pipeline,auto --iters 5 --warmup 2 --replays 1 2>&1 | tee $OUT/bench-world$w.txt | grep -E '^ +[0-9]|Out of bounds|error' | cut -c1-110
done
