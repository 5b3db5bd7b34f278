#!/usr/bin/env python3
"""Whether the kernels of two PTX files compile to the same instructions.

A change that must leave some kernels as they were (a new template form beside old ones, a
helper factored out) is checked without the GPU: compile the file at both revisions, e.g.

    git archive REV kernels common | tar -x -C /tmp/old
    (cd /tmp/old && nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -O3 -ptx \\
        kernels/attention_decode.cu -Ikernels -Icommon -o /tmp/old.ptx)
    nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -O3 -ptx \\
        kernels/attention_decode.cu -Ikernels -Icommon -o /tmp/new.ptx
    python3 bench/ptx_same.py /tmp/old.ptx /tmp/new.ptx --map Lb0E=Li0E --map Lb1E=Li1E \\
        --map decode_argsPKj=decode_argsPKj16folio_k_row_norm

Each entry of OLD is compared with NEW's entry of the same mangled name (after the --map
substring replacements, for renamed template arguments or added parameters). Bodies only: the
parameter lists are left out, and register numbers, labels and mangled names are normalized
away. One line per entry; exit status 1 if any entry differs or has no counterpart.
"""
import argparse
import difflib
import re
import sys


def entries(path):
    text = open(path).read()
    out = {}
    for part in re.split(r"\n(?=\.visible \.entry )", text)[1:]:
        name = re.match(r"\.visible \.entry (\S+)\(", part).group(1)
        out[name] = part[part.index("{"):]
    return out


def normalized(body):
    body = re.sub(r"_Z\w+", "SYM", body)
    body = re.sub(r"%(r|rd|f|fd|p|rs|h|hh)\d+", r"%\1N", body)
    body = re.sub(r"\$L__\w+", "LBL", body)
    # declarations of globals and the .globl comments between entries
    body = re.sub(r"^\s*(\.(global|shared|extern)\b.*|// \.globl.*)$", "", body, flags=re.M)
    return [line for line in body.splitlines() if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--map", action="append", default=[], metavar="OLD=NEW",
                    help="replace OLD by NEW in the old file's entry names")
    args = ap.parse_args()
    old, new = entries(args.old), entries(args.new)
    maps = [m.split("=", 1) for m in args.map]
    bad = 0
    for name, body in old.items():
        target = name
        for a, b in maps:
            target = target.replace(a, b)
        if target not in new:
            print(f"MISSING {name}")
            bad += 1
            continue
        a, b = normalized(body), normalized(new[target])
        diff = [d for d in difflib.unified_diff(a, b, lineterm="", n=0)
                if d[:1] in "+-" and d[:3] not in ("+++", "---")]
        print(f"{'SAME' if not diff else 'DIFFERS'} {name} ({len(a)} lines"
              f"{', ' + str(len(diff)) + ' differing' if diff else ''})")
        bad += bool(diff)
    print(f"ptx_same: {len(old) - bad} of {len(old)} entries the same")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
