#!/usr/bin/env python3
"""`--quantization fp8` on the CUDA worker against the CPU backend's emulation of it and against
bf16 (issue 55), through step_driver, on a model directory (tests/gpu/check_fp8.sh passes the
fixture /tmp/fx and the TinyLlama-shaped /tmp/tl).

    check_fp8.py STEP_DRIVER MODEL_DIR WORK_DIR

Every run sees the same tokens (teacher forcing): 4 prompts prefilled in one step (a cuBLASLt
FP8 step of ~100 rows), then DECODE steps of the 4 (4 rows) and one prompt alone (1 row): the
GEMV path on the e4m3 weights by default up to 2 rows (cuBLASLt's FP8 GEMM from 3), the GEMV
for all 4 with gemv_max_rows 4 (FOLIO_K_GEMV_QUANT_MAX_ROWS), cuBLASLt for all with -1. The runs:
  cpu-fp8   the CPU backend's emulation (the same e4m3 codes of the same weights; f32 between
            the products where CUDA rounds to bf16)
  cuda-fp8  the engine's paths; cuda-fp8-lt every product on cuBLASLt; cuda-fp8-gemv4 every
            decode product on the GEMV; cuda-fp8-eager the engine's paths without graphs
  cuda-bf16 and cpu-ref (f32): the unquantized yardsticks
Printed per comparison: centered relative L2 of the logits (median, max over rows) and top-1
agreement. The yardstick is FP8's own error, the emulation's distance from f32 (cpu-fp8 vs
cpu-ref): on a deep random model (TinyLlama's 22 layers) it is about 0.15, and two correct FP8
implementations that round their activations at different places (CUDA in bf16 between the
products, the emulation in f32) each carry their own share of it, so they sit about 0.1 apart.
Checks (exit 1 if any fails): every cuda-fp8 variant no further from cpu-fp8 than the emulation
is from f32 plus SLACK (max over rows), no further from cuda-bf16 than that (median) plus SLACK,
and the cuda-fp8 paths closer to each other than the emulation is to f32. A wrong code,
scale or path is an error of order 1.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from forced_logits import compare, run, scripts  # noqa: E402

DECODE = 12
SLACK = 0.02


RUNS = {
    "cpu-ref": {"backend": "cpu-ref"},
    "cpu-fp8": {"backend": "cpu", "quantization": "fp8"},
    "cuda-bf16": {"backend": "cuda"},
    "cuda-fp8": {"backend": "cuda", "quantization": "fp8"},
    "cuda-fp8-lt": {"backend": "cuda", "quantization": "fp8",
                    "cuda_paths": {"gemv_max_rows": -1}},
    "cuda-fp8-gemv4": {"backend": "cuda", "quantization": "fp8",
                       "cuda_paths": {"gemv_max_rows": 4}},
    "cuda-fp8-eager": {"backend": "cuda", "quantization": "fp8", "enforce_eager": True},
}


def main():
    step_driver, model, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    work.mkdir(parents=True, exist_ok=True)
    vocab = json.loads((model / "config.json").read_text())["vocab_size"]
    failed = False
    for kind, steps in scripts(vocab, DECODE).items():
        got = {}
        for name in RUNS:
            got[name], log = run(step_driver, model, work, name, kind, steps, vocab, RUNS[name])
            if name == "cuda-fp8" and "outer-vector" in log:
                print(f"note: {log.strip().splitlines()[-1]}")
        floor = compare(got["cuda-bf16"], got["cpu-ref"])
        emul = compare(got["cpu-fp8"], got["cpu-ref"])
        print(f"{model.name} {kind}: cuda-bf16 vs cpu-ref rel L2 median {floor[0]:.4f} max "
              f"{floor[1]:.4f} top1 {floor[2]:.3f}; cpu-fp8 vs cpu-ref median {emul[0]:.4f} "
              f"max {emul[1]:.4f} top1 {emul[2]:.3f}")
        for name in ("cuda-fp8", "cuda-fp8-lt", "cuda-fp8-gemv4", "cuda-fp8-eager"):
            c = compare(got[name], got["cpu-fp8"])
            q = compare(got[name], got["cuda-bf16"])
            ok = c[1] < emul[1] + SLACK and q[0] < emul[0] + floor[0] + SLACK
            failed |= not ok
            print(f"{'PASS' if ok else 'FAIL'} {model.name} {kind} {name}: vs cpu-fp8 rel L2 "
                  f"median {c[0]:.4f} max {c[1]:.4f} top1 {c[2]:.3f}; vs cuda-bf16 median "
                  f"{q[0]:.4f} max {q[1]:.4f} top1 {q[2]:.3f}")
        for name in ("cuda-fp8-lt", "cuda-fp8-gemv4", "cuda-fp8-eager"):
            p = compare(got[name], got["cuda-fp8"])
            ok = p[1] < emul[1]
            failed |= not ok
            print(f"{'PASS' if ok else 'FAIL'} {model.name} {kind} {name} vs cuda-fp8: rel L2 "
                  f"max {p[1]:.5f} top1 {p[2]:.3f}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
