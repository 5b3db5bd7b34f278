#!/usr/bin/env python3
"""A GGUF's weights kept packed on the CUDA worker (issue 55) against the same file's weights
as the bf16 copy (cuda_paths gguf_bf16) and against the CPU backend's f32 reference (cpu-ref),
through step_driver (tests/gpu/check_gguf_packed.sh passes the fixture of
tests/fixtures/make_gguf_packed.py twice: a layer of each packed type, Q4_0, Q4_1, Q8_0, Q4_K,
Q6_K, and one mixing them with an F16 tensor; then every projection Q4_0, whose decode steps
take the fused GEMV path on the regrouped blocks).

    check_gguf_packed.py STEP_DRIVER MODEL.gguf WORK_DIR [--cpu]

--cpu (a step_driver built without CUDA): only the two CPU runs, and each kind's rows' distance
of the fast path from cpu-ref with the ill-conditioned ones named; no checks.

Every run sees the same tokens (teacher forcing): 4 prompts prefilled in one step (~110 rows:
the widened copy and the bf16 GEMM), then DECODE steps of the 4 (4 rows: the packed GEMV, or
the fused one), and one prompt alone (1 row). The runs:
  cpu-ref            the f32 reference (every weight decoded exactly, f32 activations)
  cuda-bf16          the bf16 copy the CUDA worker made before (weights rounded to bf16)
  cuda-packed        the engine's paths: the packed GEMV for decode, decode steps as graphs
  cuda-packed-eager  the same without graphs
  cuda-packed-dq     every product on the widened copy (gemv_max_rows -1)
  cpu                the CPU backend's fast path (packed dot products, reduced-precision
                     activations): where it sits ILL times its median distance from cpu-ref,
                     the row is ill-conditioned (a random fixture's step where rounding anywhere
                     is amplified: every path, the bf16 copy's included, is off there), printed
                     and left out of the checks
Printed per comparison: centered relative L2 of the logits (median, max over rows) and top-1
agreement. Checks (exit 1 if any fails): each packed run within 1.5x of cuda-bf16's own
distance from cpu-ref plus ABS_TOL (the packed path rounds only the activations to bf16, the
copy the weights too, so it should sit no further from the exact weights), its top-1 agreement
with cpu-ref no worse than cuda-bf16's less TOP1_SLACK, and graphs equal to eager within
PATH_TOL (the same kernels).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
from forced_logits import compare, row_errors, run, scripts  # noqa: E402

DECODE = 12
ABS_TOL = 0.01
TOP1_SLACK = 0.05
PATH_TOL = 1e-3
ILL = 10


RUNS = {
    "cpu-ref": {"backend": "cpu-ref"},
    "cuda-bf16": {"backend": "cuda", "cuda_paths": {"gguf_bf16": True}},
    "cuda-packed": {"backend": "cuda"},
    "cuda-packed-eager": {"backend": "cuda", "enforce_eager": True},
    "cuda-packed-dq": {"backend": "cuda", "cuda_paths": {"gemv_max_rows": -1}},
    "cpu": {"backend": "cpu"},
}
PACKED = ("cuda-packed", "cuda-packed-eager", "cuda-packed-dq")


def vocab_of(model):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
    from gguf_metadata import read_gguf_metadata
    return len(read_gguf_metadata(model)["tokenizer.ggml.tokens"])


def main():
    step_driver, model, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    cpu_only = sys.argv[4:] == ["--cpu"]
    work.mkdir(parents=True, exist_ok=True)
    vocab = vocab_of(model)
    failed = False
    for kind, steps in scripts(vocab, DECODE).items():
        got = {}
        for name in ("cpu-ref", "cpu") if cpu_only else RUNS:
            got[name], log = run(step_driver, model, work, name, kind, steps, vocab, RUNS[name])
            if name == "cuda-packed":
                print("\n".join(f"log: {x}" for x in log.splitlines() if "gguf:" in x))
        fast = row_errors(got["cpu"], got["cpu-ref"])
        keep = fast <= ILL * np.median(fast)
        for w in np.flatnonzero(~keep):
            there = [f"{n} {row_errors(got[n], got['cpu-ref'])[w]:.4f}" for n in got
                     if n.startswith("cuda")]
            print(f"ill-conditioned row {w} (left out): cpu {fast[w]:.4f} (median "
                  f"{np.median(fast):.4f})" + "".join(f"; {x}" for x in there))
        if cpu_only:
            print(f"{model.name} {kind}: cpu vs cpu-ref rel L2 median {np.median(fast):.4f} max "
                  f"{fast.max():.4f}, {int((~keep).sum())} of {len(keep)} rows ill-conditioned")
            continue
        got = {n: np.asarray(v).reshape(len(keep), -1)[keep] for n, v in got.items()}
        floor = compare(got["cuda-bf16"], got["cpu-ref"])
        print(f"{model.name} {kind}: cuda-bf16 vs cpu-ref rel L2 median {floor[0]:.5f} max "
              f"{floor[1]:.5f} top1 {floor[2]:.3f}")
        for name in PACKED:
            r = compare(got[name], got["cpu-ref"])
            q = compare(got[name], got["cuda-bf16"])
            ok = r[1] <= 1.5 * floor[1] + ABS_TOL and r[2] >= floor[2] - TOP1_SLACK
            failed |= not ok
            if not ok:  # the worst row, to find the step and the block type behind it
                e = row_errors(got[name], got["cpu-ref"])
                w = int(e.argmax())
                print(f"worst row {np.flatnonzero(keep)[w]} of {len(keep)}: {e[w]:.4f} (cuda-bf16 "
                      f"{row_errors(got['cuda-bf16'], got['cpu-ref'])[w]:.4f}); rows by step "
                      f"{[sum(1 + e.get('num_draft', 0) for e in st) for st in steps]}")
            print(f"{'PASS' if ok else 'FAIL'} {model.name} {kind} {name}: vs cpu-ref rel L2 "
                  f"median {r[0]:.5f} max {r[1]:.5f} top1 {r[2]:.3f}; vs cuda-bf16 median "
                  f"{q[0]:.5f} max {q[1]:.5f} top1 {q[2]:.3f}")
        p = compare(got["cuda-packed"], got["cuda-packed-eager"])
        ok = p[1] < PATH_TOL
        failed |= not ok
        print(f"{'PASS' if ok else 'FAIL'} {model.name} {kind} graphs vs eager: rel L2 max "
              f"{p[1]:.2e} top1 {p[2]:.3f}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
