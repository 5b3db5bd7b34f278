#!/usr/bin/env python3
"""Per-kernel summary of an Nsight Compute CSV (ncu --csv --metrics
gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum) of STEPS
decode steps: for each kernel, launches per step, microseconds per step, mean
microseconds per launch and DRAM bandwidth; then the sum per step, which set
against the step's wall time shows what the gaps between kernels cost.

    python3 bench/gpu/ncu_summary.py profile.csv STEPS [LABEL]
"""
import csv
import re
import sys
from collections import OrderedDict


def short_name(name):
    """'void gemv_kernel<1, false>(void *, ...)' -> 'gemv_kernel<1, false>'."""
    name = re.sub(r"^void ", "", name.strip())
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            name = name[:i]
            break
    return name if len(name) <= 70 else name[:67] + "..."


def main():
    path, steps = sys.argv[1], int(sys.argv[2])
    label = sys.argv[3] if len(sys.argv) > 3 else path
    lines = open(path, errors="replace").read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        print(f"{label}: no ncu CSV rows in {path}")
        return 1
    kernels = OrderedDict()  # id -> {name, metrics}
    for row in csv.DictReader(lines[start:]):
        k = kernels.setdefault(row["ID"], {"name": short_name(row["Kernel Name"]), "m": {}})
        try:
            k["m"][row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
        except ValueError:
            pass
    agg = OrderedDict()
    for k in kernels.values():
        a = agg.setdefault(k["name"], [0, 0.0, 0.0])
        a[0] += 1
        a[1] += k["m"].get("gpu__time_duration.sum", 0.0)
        a[2] += k["m"].get("dram__bytes_read.sum", 0.0) + k["m"].get("dram__bytes_write.sum", 0.0)
    total_ns = sum(a[1] for a in agg.values())
    print(f"== {label}: {len(kernels)} kernels over {steps} steps, "
          f"{len(kernels) / steps:.0f} per step, kernel time {total_ns / steps / 1e3:.1f} us per step")
    print(f"{'kernel':70s} {'n/step':>6s} {'us/step':>8s} {'us each':>8s} {'GB/s':>7s}")
    for name, (n, ns, by) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:70s} {n / steps:6.1f} {ns / steps / 1e3:8.1f} {ns / n / 1e3:8.2f} "
              f"{by / ns if ns else 0:7.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
