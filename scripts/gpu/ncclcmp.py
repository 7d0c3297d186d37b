"""Markdown tables from a run of scripts/gpu/nccl-api.sh: nccl-tests
without and with the NCCL-API library, side by side, and PyTorch's
all_reduce times. Usage: ncclcmp.py RESULTS_DIR"""

import pathlib
import sys


def rows(path):
    """size -> (out-of-place time us, busbw, wrong, in-place time, busbw, wrong)."""
    out = {}
    for line in pathlib.Path(path).read_text().splitlines():
        f = line.split()
        if not f or line.startswith("#") or not f[0].isdigit() or len(f) < 13:
            continue
        # size count type redop root time algbw busbw #wrong time algbw busbw #wrong
        out[int(f[0])] = (float(f[5]), float(f[7]), f[8], float(f[9]), float(f[11]), f[12])
    return out


def human(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n // div} {unit}"
    return f"{n} B"


d = pathlib.Path(sys.argv[1])
for t in ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "sendrecv", "alltoall"):
    f_no, f_yes = d / f"nccltests-{t}-no.txt", d / f"nccltests-{t}-yes.txt"
    if not f_no.exists() or not f_yes.exists():
        continue
    no, yes = rows(f_no), rows(f_yes)
    if not no or not yes:
        continue
    print(f"\n{t} (bf16, out of place; busbw GB/s; #wrong out/in place)\n")
    print("| size | NCCL µs | with library µs | NCCL busbw | with library busbw | ratio | #wrong |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for size in sorted(no):
        if size not in yes:
            continue
        a, b = no[size], yes[size]
        ratio = a[0] / b[0] if b[0] else 0
        print(f"| {human(size)} | {a[0]:.2f} | {b[0]:.2f} | {a[1]:.2f} | {b[1]:.2f} | {ratio:.2f}x | {b[2]}/{b[5]} |")
p_no, p_yes = d / "torch-perf-no.txt", d / "torch-perf-yes.txt"
if p_no.exists() and p_yes.exists():
    def perf(p):
        out = {}
        for f in (l.split() for l in p.read_text().splitlines()):
            if f and f[0] == "PERF":
                op, rest = (f[1], f[2:]) if not f[1].isdigit() else ("all_reduce", f[1:])
                out.setdefault(op, {})[int(rest[0])] = (float(rest[1]), float(rest[2]))
        return out
    a, b = perf(p_no), perf(p_yes)
    for op in a:
        print(f"\ntorch.distributed {op}, bf16 (µs per call; size as nccl-tests gives it)\n")
        print("| size | NCCL graph | library graph | speed-up | NCCL eager | library eager |")
        print("| --- | --- | --- | --- | --- | --- |")
        for size in sorted(a[op]):
            x, y = a[op][size], b.get(op, {}).get(size)
            if y:
                print(f"| {human(size)} | {x[0]:.2f} | {y[0]:.2f} | {x[0] / y[0]:.2f}x | {x[1]:.2f} | {y[1]:.2f} |")
