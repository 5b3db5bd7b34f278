#!/usr/bin/env python3
"""`--kv-cache-dtype fp8` on the CUDA worker against the CPU backend's emulation of it and against
the bf16 cache (issue 55), through step_driver, on a model directory (tests/gpu/check_kv_fp8.sh
passes the fixture /tmp/fx).

    check_kv_fp8.py STEP_DRIVER MODEL_DIR WORK_DIR

Every run sees the same tokens (teacher forcing). Three scripts: "batch", 4 prompts prefilled in
one step (the prefill tile kernel reading the e4m3 cache) then DECODE decode steps of the 4 (the
split-KV decode kernel; decode graphs unless eager); "single", one prompt alone (the GEMV path);
"verify", the 4 prompts then verify steps of 1 + K tokens a sequence (num_draft K: the verify
graphs). The runs:
  cpu-kv8     the CPU reference (f32 between the products) with the e4m3 cache: the emulation
  cpu-ref     the same with its f32 cache; cuda-bf16: the CUDA backend's bf16 cache
  cuda-kv8    the engine's paths and graphs; cuda-kv8-eager with --enforce-eager;
              cuda-kv8-lt every step on cuBLASLt (no GEMV, no TMA GEMM)
  cuda-w8-kv8 --quantization fp8 as well (PATH_FP8), against cpu-w8-kv8 (the fast CPU path with
              both emulated)
Printed per comparison: centered relative L2 of the logits (median, max over rows) and top-1
agreement. Checks (exit 1 if any fails): each cuda-kv8 run within KV_TOL + 1.5x cuda-bf16's own
distance from cpu-ref of cpu-kv8; cuda-kv8 against cuda-bf16 no further than 1.5x cpu-kv8's
distance from cpu-ref plus KV_TOL; graphs and eager within PATH_TOL of each other; and with
num_kv_blocks 0 the fp8 pool holds at least 1.95x the bf16 pool's blocks.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from forced_logits import compare, run, scripts  # noqa: E402

DECODE = 12
K = 3  # drafts a sequence in the verify steps (num_speculative_tokens)
KV_TOL = 0.05
PATH_TOL = 0.02


RUNS = {
    "cpu-ref": {"backend": "cpu-ref"},
    "cpu-kv8": {"backend": "cpu-ref", "kv_cache_dtype": "fp8"},
    "cuda-bf16": {"backend": "cuda"},
    "cuda-kv8": {"backend": "cuda", "kv_cache_dtype": "fp8"},
    "cuda-kv8-eager": {"backend": "cuda", "kv_cache_dtype": "fp8", "enforce_eager": True},
    "cuda-kv8-lt": {"backend": "cuda", "kv_cache_dtype": "fp8",
                    "cuda_paths": {"gemv_max_rows": -1, "no_tma_gemm": True}},
    "cpu-w8-kv8": {"backend": "cpu", "quantization": "fp8", "kv_cache_dtype": "fp8"},
    "cuda-w8-kv8": {"backend": "cuda", "quantization": "fp8", "kv_cache_dtype": "fp8"},
}


def pool_blocks(step_driver, model, work, dtype):
    """The blocks of a pool sized from memory (gpu_memory_utilization 0.3)."""
    script = {"model": str(model), "backend": "cuda", "steps": [], "max_seqs": 8,
              "max_num_tokens": 512, "num_kv_blocks": 0, "gpu_memory_utilization": 0.3,
              "kv_cache_dtype": dtype, "enforce_eager": True}
    sp = Path(work) / f"pool-{dtype}.json"
    sp.write_text(json.dumps(script))
    p = subprocess.run([str(step_driver), str(sp)], capture_output=True, text=True, timeout=120)
    m = re.search(r"step_driver: (\d+) KV blocks", p.stderr)
    if p.returncode != 0 or not m:
        sys.exit(f"step_driver pool {dtype} failed: {p.stderr[-3000:]}")
    return int(m.group(1))


def main():
    step_driver, model, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    work.mkdir(parents=True, exist_ok=True)
    vocab = json.loads((model / "config.json").read_text())["vocab_size"]
    failed = False

    def verdict(ok, text):
        nonlocal failed
        failed |= not ok
        print(f"{'PASS' if ok else 'FAIL'} {model.name} {text}")

    for kind, steps in scripts(vocab, DECODE, K).items():
        got = {name: run(step_driver, model, work, name, kind, steps, vocab,
                         dict(RUNS[name], num_speculative_tokens=K), timeout=300)[0]
               for name in RUNS}
        floor = compare(got["cuda-bf16"], got["cpu-ref"])
        emul = compare(got["cpu-kv8"], got["cpu-ref"])
        print(f"{model.name} {kind} ({len(got['cpu-ref'])} rows): cuda-bf16 vs cpu-ref rel L2 "
              f"median {floor[0]:.4f} max {floor[1]:.4f} top1 {floor[2]:.3f}; cpu-kv8 vs cpu-ref "
              f"median {emul[0]:.4f} max {emul[1]:.4f} top1 {emul[2]:.3f}")
        for name in ("cuda-kv8", "cuda-kv8-eager", "cuda-kv8-lt"):
            c = compare(got[name], got["cpu-kv8"])
            q = compare(got[name], got["cuda-bf16"])
            verdict(c[1] < KV_TOL + 1.5 * floor[1] and q[0] < 1.5 * emul[0] + KV_TOL,
                    f"{kind} {name}: vs cpu-kv8 rel L2 median {c[0]:.4f} max {c[1]:.4f} top1 "
                    f"{c[2]:.3f}; vs cuda-bf16 median {q[0]:.4f} max {q[1]:.4f} top1 {q[2]:.3f}")
        p = compare(got["cuda-kv8-eager"], got["cuda-kv8"])
        verdict(p[1] < PATH_TOL, f"{kind} graphs vs eager: rel L2 max {p[1]:.5f} top1 {p[2]:.3f}")
        w = compare(got["cuda-w8-kv8"], got["cpu-w8-kv8"])
        verdict(w[1] < 0.08 + 1.5 * floor[1],
                f"{kind} cuda-w8-kv8 vs cpu-w8-kv8: rel L2 median {w[0]:.4f} max {w[1]:.4f} "
                f"top1 {w[2]:.3f}")
    auto, fp8 = (pool_blocks(step_driver, model, work, d) for d in ("auto", "fp8"))
    verdict(fp8 >= 1.95 * auto, f"KV pool at gpu_memory_utilization 0.3: {auto} blocks bf16, "
            f"{fp8} fp8 ({fp8 / auto:.3f}x)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
