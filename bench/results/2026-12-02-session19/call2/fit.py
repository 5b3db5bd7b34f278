#!/usr/bin/env python3
"""The fixed part and the per-CTA copy rate of cuBLASLt's O-shaped GEMM at 256 rows (round 25).

    python3 bench/results/2026-12-02-session19/call2/fit.py bench/results/2026-12-02-session19/call2/lt.txt

Reads lt_algos_bench's RESULT lines for shapes kK (N 2048, K = K) at m 256, whose first choice is
the 64 x 64-tile kernel: 128 CTAs, one an SM, each copying (64 + 64) x K x 2 bytes. Fits
time = fixed + bytes / rate over K 1024-4096 (least squares) and prints both, and the line's
prediction at K 8192 against the measurement."""
import re
import sys

import numpy as np

times = {}
for line in open(sys.argv[1]):
    m = re.match(r"RESULT shape=k(\d+) m=256 cand=0 ms=([0-9.]+)", line)
    if m:
        times[int(m.group(1))] = float(m.group(2)) * 1000.0  # us
ks = [k for k in (1024, 2048, 4096) if k in times]
kib = np.array([(64 + 64) * k * 2 / 1024 for k in ks])
slope, fixed = np.polyfit(kib, np.array([times[k] for k in ks]), 1)
print(f"points (K: us): {', '.join(f'{k}: {times[k]:.2f}' for k in ks)}")
print(f"fixed {fixed:.2f} us, rate {1024 / slope / 1000:.0f} GB/s a CTA")
if 8192 in times:
    print(f"K 8192: line {slope * (64 + 64) * 8192 * 2 / 1024 + fixed:.2f} us, "
          f"measured {times[8192]:.2f}")
