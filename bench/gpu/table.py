#!/usr/bin/env python3
"""Sets decode_bench's RESULT lines against their floors and prints the table.

    table.py FLOORS_JSON TIMINGS_LOG

Floor: the larger of the bytes that must move / measured copy bandwidth and the FLOPs / measured
bf16 GEMM rate (a decode step or attention is bytes, a prefill FLOPs, a mixed step either).
'of floor' is floor / measured (1.0 = at the floor)."""
import json
import re
import sys

TARGETS = {"decode_b1_ctx512": "<= 0.8 ms", "decode_b64_ctx512": "<= 1.2 ms",
           "decode_b256_ctx512": "<= 2.0 ms", "prefill_4096": ">= 50% of GEMM rate",
           "attention": ">= 70% of copy bw"}


def main():
    floors = json.load(open(sys.argv[1]))
    bw, rate = floors["copy_tb_s"] * 1e12, floors["gemm_tflop_s"] * 1e12
    print(f"GPU {floors.get('gpu')}: copy {floors['copy_tb_s']} TB/s, bf16 GEMM "
          f"{floors['gemm_tflop_s']} TFLOP/s")
    print(f"{'what':<30}{'ms':>10}{'floor ms':>10}{'of floor':>10}  target")
    for line in open(sys.argv[2]):
        if not line.startswith("RESULT"):
            continue
        f = dict(kv.split("=", 1) for kv in line.split()[1:])
        name, ms = f["name"], float(f["median_ms"] if "median_ms" in f else f["ms"])
        if name.startswith(("decode", "mixed")):
            ms = float(f["ms"])  # steady-state mean per pipelined step
        flops, nbytes = float(f["flops"]), float(f["bytes"])
        floor = max(flops / rate, nbytes / bw) * 1e3
        target = TARGETS.get(name, TARGETS["attention"] if name.startswith("attention") else "")
        print(f"{name:<30}{ms:>10.4f}{floor:>10.4f}{floor / ms:>10.2f}  {target}")


if __name__ == "__main__":
    main()
