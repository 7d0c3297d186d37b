"""Markdown tables from intranode bench outputs (the nccl-tests-style text
tables `intranode bench` prints), so that a published table is made, not
retyped. Each FILE is one bench run; its header line says how it timed
(chained graph replay, one call per graph launch, eager chained, eager one
at a time). For every collective, one table: a row per size, a column per
(timing, algorithm) found, and for each timing the speed-up of `auto` over
`nccl` when both were measured in that run.

Usage: tables.py FILE [FILE ...] > tables.md
"""

import collections
import re
import sys


def human(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def parse(path):
    """(timing, {coll: {(size, algo): (time_us, busbw, wrong)}})"""
    timing, coll, rows = "?", None, collections.defaultdict(dict)
    for line in open(path, encoding="utf-8", errors="replace"):
        m = re.match(r"# intranode bench: .*?\), ([^,]+(?:, [a-z ]+)?), iters", line)
        if m:
            timing = m.group(1)
            continue
        m = re.match(r"^# ([a-z_]+)$", line.strip())
        if m:
            coll = m.group(1)
            continue
        f = line.split()
        if coll and len(f) == 10 and f[0].isdigit() and f[5] == "out" and f[6] != "n/a":
            rows[coll][(int(f[0]), f[4])] = (float(f[6]), float(f[8]), int(f[9]))
    return timing, rows


def main(paths):
    runs = [parse(p) for p in paths]
    colls = []
    for _, rows in runs:
        colls += [c for c in rows if c not in colls]
    for coll in colls:
        cols, sizes = [], set()
        for timing, rows in runs:
            for size, algo in rows.get(coll, {}):
                sizes.add(size)
                if (timing, algo) not in cols:
                    cols.append((timing, algo))
        head = [f"{algo} µs ({timing})" for timing, algo in cols]
        speedups = [t for t in dict.fromkeys(t for t, _ in cols) if (t, "auto") in cols and (t, "nccl") in cols]
        head += [f"auto vs NCCL ({t})" for t in speedups]
        print(f"\n{coll} (out of place; #wrong 0 in every row unless marked)\n")
        print("| size | " + " | ".join(head) + " |")
        print("| --- |" + " --- |" * len(head))
        for size in sorted(sizes):
            cells = []
            for timing, algo in cols:
                v = next((rows[coll].get((size, algo)) for t, rows in runs if t == timing and (size, algo) in rows.get(coll, {})), None)
                cells.append("" if v is None else f"{v[0]:.2f}" + (f" ({v[2]} wrong)" if v[2] else ""))
            for t in speedups:
                a = next((rows[coll].get((size, "auto")) for tt, rows in runs if tt == t and (size, "auto") in rows.get(coll, {})), None)
                n = next((rows[coll].get((size, "nccl")) for tt, rows in runs if tt == t and (size, "nccl") in rows.get(coll, {})), None)
                cells.append(f"{n[0] / a[0]:.2f}x" if a and n and a[0] else "")
            print(f"| {human(size)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
