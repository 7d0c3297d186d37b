#!/usr/bin/env python3
"""Compare two ptxas -v logs of the CUDA kernel image (make -C kernels/cuda
resources, or nvcc -cubin -Xptxas -v) and print a Markdown table row per
entry point whose stack frame, spill stores, spill loads or registers
differ: python3 scripts/gpu/resources.py BEFORE.txt AFTER.txt

Only an entry point's own "Function properties" line counts (the lines of
the non-inlined functions it calls follow it and are skipped).

It also reads `cuobjdump -res-usage -arch sm_90 IMAGE` output, which has
no spill counts: there the columns are stack, local memory, shared
memory and registers."""
import re
import sys


def parse(path):
    """Map entry point -> (stack, spill stores, spill loads, registers)."""
    props, cur = {}, None
    lines = open(path).read().splitlines()
    if any(line.startswith("Resource usage:") for line in lines):
        return parse_res_usage(lines)
    for i, line in enumerate(lines):
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            cur = m.group(1)
            continue
        m = re.search(r"Function properties for (\w+)", line)
        if m and m.group(1) == cur and cur not in props:
            s = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", lines[i + 1])
            props[cur] = [s.group(1), s.group(2), s.group(3), None]
        m = re.search(r"Used (\d+) registers", line)
        if m and cur in props and props[cur][3] is None:
            props[cur][3] = m.group(1)
    return props


def parse_res_usage(lines):
    """Map entry point -> (stack, local, shared, registers) from
    cuobjdump -res-usage."""
    props, cur = {}, None
    for line in lines:
        m = re.match(r"\s*Function (\w+):", line)
        if m:
            cur = m.group(1)
            continue
        if cur and "REG:" in line:
            f = dict(re.findall(r"(\w+):(\d+)", line))
            props[cur] = [f["STACK"], f["LOCAL"], f["SHARED"], f["REG"]]
            cur = None
    return props


def main():
    before, after = parse(sys.argv[1]), parse(sys.argv[2])
    print("| kernel | before (stack, spill stores, spill loads; registers) | after |")
    print("|---|---|---|")
    for k in sorted(set(before) | set(after)):
        a, b = before.get(k), after.get(k)
        if a != b:
            fmt = lambda p: "absent" if p is None else f"{p[0]}, {p[1]}, {p[2]}; {p[3]}"
            print(f"| {k} | {fmt(a)} | {fmt(b)} |")
    print(f"\n{len(before)} entry points before, {len(after)} after")


if __name__ == "__main__":
    main()
