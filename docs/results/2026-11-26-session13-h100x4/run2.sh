#!/usr/bin/env bash
# Thirteenth session, 4-GPU host: the failed trial of faults/mismatched-movers
# in run 1 (trial 0, victim rank 3, ErrMismatch after 40.1 s on ranks 0-2),
# again: trial 0 alone five times with debug logs, then ten trials.
set -u
gunzip -c .gpu/k/intranode.gz > .gpu/intranode
chmod +x .gpu/intranode
O=${OUT:-/tmp/out}
for i in 1 2 3 4 5; do
  timeout 100 .gpu/intranode conformance --backend cuda --world 4 --faults --trials 1 --run '^faults/mismatched-movers$' -v \
    > "$O/trial0-$i.txt" 2>&1
  echo "trial 0 run $i: $(grep -E 'passed|failed' "$O/trial0-$i.txt" | tail -1)"
done
timeout 200 .gpu/intranode conformance --backend cuda --world 4 --faults --trials 10 --run '^faults/mismatched-movers$' \
  > "$O/trials10.txt" 2>&1
tail -4 "$O/trials10.txt"
