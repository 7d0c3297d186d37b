#!/usr/bin/env python3
"""Compare two ptxas -v logs of the CUDA kernel image (make -C kernels/cuda
resources, or nvcc -cubin -Xptxas -v) and print a Markdown table row per
entry point whose stack frame, spill stores, spill loads or registers
differ: python3 scripts/gpu/resources.py BEFORE.txt AFTER.txt

Only an entry point's own "Function properties" line counts (the lines of
the non-inlined functions it calls follow it and are skipped).

It also reads `cuobjdump -res-usage -arch sm_90 IMAGE` output, which has
no spill counts: there the columns are stack, local memory, shared
memory and registers; and the HIP image's metadata, `llvm-readelf --notes
ARCH.co` of one architecture's code object (clang-offload-bundler
--unbundle takes it out of kernels/hip/collectives.hsaco): there the
columns are scratch bytes, VGPR spills, SGPR spills (kept in VGPR lanes,
not memory) and VGPRs."""
import re
import sys


PTXAS = "stack, spill stores, spill loads; registers"
RES_USAGE = "stack, local, shared; registers"
AMDGPU = "scratch, VGPR spills, SGPR spills; VGPRs"


def parse(path):
    """Map entry point -> its four columns, and the columns' names."""
    props, cur = {}, None
    lines = open(path).read().splitlines()
    if any(line.startswith("Resource usage:") for line in lines):
        return parse_res_usage(lines), RES_USAGE
    if any(".vgpr_count:" in line for line in lines):
        return parse_amdgpu_notes(lines), AMDGPU
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
    return props, PTXAS


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


def parse_amdgpu_notes(lines):
    """Map entry point -> (scratch, VGPR spills, SGPR spills, VGPRs) from
    the AMDGPU metadata llvm-readelf --notes prints, one map per kernel
    whose keys come in any order."""
    props, cur, fields = {}, None, {}
    keys = ("private_segment_fixed_size", "vgpr_spill_count", "sgpr_spill_count", "vgpr_count")

    def close():
        if cur and all(k in fields for k in keys):
            props[cur] = [fields[k] for k in keys]

    for line in lines:
        m = re.match(r"\s*-?\s*\.(\w+):\s+(\S+)", line)
        if not m:
            continue
        key, value = m.groups()
        if key == "name" and value.startswith("intranode_"):
            close()
            cur, fields = value, {}
        elif key in keys and cur:
            fields[key] = value
    close()
    return props


def main():
    (before, _), (after, columns) = parse(sys.argv[1]), parse(sys.argv[2])
    print(f"| kernel | before ({columns}) | after |")
    print("|---|---|---|")
    for k in sorted(set(before) | set(after)):
        a, b = before.get(k), after.get(k)
        if a != b:
            fmt = lambda p: "absent" if p is None else f"{p[0]}, {p[1]}, {p[2]}; {p[3]}"
            print(f"| {k} | {fmt(a)} | {fmt(b)} |")
    print(f"\n{len(before)} entry points before, {len(after)} after")


if __name__ == "__main__":
    main()
