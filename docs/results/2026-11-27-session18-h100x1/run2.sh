#!/usr/bin/env bash
# Eighteenth session, one H100, second call: run1.sh with the binding of
# 0c7c290 (its wrappers return the slot by value, so it does not escape),
# results in r2/ and four alternations; this writes that script and runs it.
# Run from the repository root.
sed -e 's/^R=\$OUT\/r1;/R=$OUT\/r2;/' -e 's/for i in 1 2 3; do/for i in 1 2 3 4; do/' \
  -e 's/tar czf \$OUT\/r1.tgz -C \$OUT r1/tar czf $OUT\/r2.tgz -C $OUT r2/' \
  -e 's/^# cgo binding of the runtime shims (4e4df04), the suite/# cgo binding of the runtime shims (0c7c290: its wrappers return the slot\n# by value, so it does not escape), the suite/' \
  -e 's/alternated three times/alternated four times/' \
  docs/results/2026-11-27-session18-h100x1/run1.sh > /tmp/run2.sh && bash /tmp/run2.sh
