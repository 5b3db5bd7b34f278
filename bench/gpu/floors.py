#!/usr/bin/env python3
"""The two ceilings of the card, measured through PyTorch: device-to-device copy bandwidth
(bytes read + written over 4 GiB) and the bf16 GEMM rate (8192^3, random data). Medians of
CUDA-event timings after warm-up. Prints JSON {"copy_tb_s": .., "gemm_tflop_s": ..}."""
import json
import sys

import torch


def timed(fn, reps):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def main():
    n = 4 << 30
    src = torch.empty(n // 2, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    ms = timed(lambda: dst.copy_(src), 20)
    copy = 2 * n / (ms * 1e-3) / 1e12
    del src, dst
    m = 8192
    a = torch.randn(m, m, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(m, m, dtype=torch.bfloat16, device="cuda")
    ms = timed(lambda: a @ b, 20)
    gemm = 2 * m**3 / (ms * 1e-3) / 1e12
    out = {"copy_tb_s": round(copy, 3), "gemm_tflop_s": round(gemm, 1),
           "gpu": torch.cuda.get_device_name()}
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
