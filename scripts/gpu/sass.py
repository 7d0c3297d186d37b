#!/usr/bin/env python3
"""Compare the machine code of two CUDA kernel images, entry point by entry
point: python3 scripts/gpu/sass.py BEFORE.sass AFTER.sass, each the output
of `cuobjdump -sass IMAGE` (a cubin or fatbin; only the sm_90 sections are
read). It prints how many entry points are the same instruction for
instruction, and names the ones that differ with their instruction counts,
so a change meant to leave some kernels alone can be shown to."""
import re
import sys


def parse(path, arch="sm_90"):
    """Map function -> its instructions, addresses and encodings dropped."""
    funcs, cur, keep = {}, None, False
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*arch = (\w+)", line)
            if m:
                keep = m.group(1) == arch
                continue
            m = re.match(r"\s*Function : (\S+)", line)
            if m:
                cur = m.group(1) if keep else None
                if cur is not None:
                    funcs[cur] = []
                continue
            if cur is None:
                continue
            ins = re.sub(r"/\*.*?\*/", "", line).strip()
            if ins and ins not in ("{", "}") and not ins.startswith("."):
                funcs[cur].append(ins)
    return funcs


def main():
    before, after = parse(sys.argv[1]), parse(sys.argv[2])
    names = sorted(set(before) | set(after))
    differ = [n for n in names if before.get(n) != after.get(n)]
    print(f"{len(names) - len(differ)} of {len(names)} entry points identical (sm_90)")
    for n in differ:
        a, b = before.get(n), after.get(n)
        print(f"differs: {n}: {'absent' if a is None else len(a)} -> {'absent' if b is None else len(b)} instructions")
    if not names:
        sys.exit("no sm_90 function found")


if __name__ == "__main__":
    main()
