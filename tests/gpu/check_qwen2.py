#!/usr/bin/env python3
"""The CUDA backend on a Qwen2 model (biases on Q, K and V) against transformers, on the GPU.

    check_qwen2.py STEP_DRIVER QWEN2_DIR OUT_DIR

QWEN2_DIR: a Qwen2 checkpoint (bench/make_checkpoint.py --config tests/gpu/qwen2_small.json).
Checks, each against transformers float32 on the same bf16 weights with check_cuda.py's
tolerance (rel L2 < 1e-2, or within 1.5x of transformers-bf16's own error):
  1. prefill of 1..600 tokens, each alone (the cuBLASLt path, and the GEMV path for 1-2 tokens);
  2. a batch of 8 prompts prefilled together, then greedy decode steps fed on the GPU, on each
     decode path: the TMA GEMM (default), the GEMV (gemv_max_rows 8), cuBLASLt with norm
     kernels (no_tma_gemm) and cuBLASLt with O and down unsplit (where a Llama model would
     take the fused path, which a bias rules out).
A bias left out or added twice moves the logits far past the tolerance.
Prints one line per check (PASS/FAIL, figures) and exits 1 if any failed."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_cuda import (Driver, check, decode_script, hf_logits, ok_vs, prompt,  # noqa: E402
                        rel, results, seq, vs_transformers)

PATHS = (("TMA GEMM", {}),
         ("GEMV", {"gemv_max_rows": 8}),
         ("cuBLASLt", {"no_tma_gemm": True}),
         ("cuBLASLt, O and down unsplit",
          {"no_tma_gemm": True, "splitk_o": 1, "splitk_down": 1}))


def load(model_dir, dtype):
    from transformers import AutoModelForCausalLM
    try:
        return AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).cuda().eval()
    except TypeError:  # transformers before the dtype keyword
        return AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=dtype).cuda().eval()


def main():
    exe, model_dir, out_dir = sys.argv[1:4]
    drv = Driver(exe, out_dir)
    hf, hf32 = load(model_dir, torch.bfloat16), load(model_dir, torch.float32)
    if not any(m.bias is not None for m in (hf32.model.layers[0].self_attn.q_proj,)):
        print("FAIL qwen2: the checkpoint has no Q bias; not a Qwen2 model")
        return 1
    vocab = hf.config.vocab_size

    lens = [1, 2, 17, 100, 600]
    steps, used = [], 0
    for i, n in enumerate(lens):
        nb = (n + 15) // 16
        steps.append([seq(i, prompt(n, 700 + i, vocab), n, list(range(used, used + nb)))])
        used += nb
    _, lg = drv.run(model_dir, steps, vocab)
    errs, hf_errs = {}, {}
    for i, n in enumerate(lens):
        ref = hf_logits(hf32, steps[i][0]["tokens"])[-1]
        errs[n] = rel(lg[i][0], ref)
        hf_errs[n] = rel(hf_logits(hf, steps[i][0]["tokens"])[-1], ref)
    check("qwen2: prefill vs transformers fp32", all(ok_vs(errs[n], hf_errs[n]) for n in lens),
          "folio rel L2 " + ", ".join(f"{n}: {e:.2e}" for n, e in errs.items()) +
          "; transformers-bf16 " + ", ".join(f"{n}: {e:.2e}" for n, e in hf_errs.items()))

    prompts = [prompt(n, 800 + i, vocab) for i, n in enumerate([3, 17, 33, 64, 100, 250, 400,
                                                                511])]
    n_dec = 5
    steps = decode_script(prompts, n_dec)
    for name, forced in PATHS:
        res, lgs = drv.run(model_dir, steps, vocab, paths=forced)
        pre, dec, hfe, flips = vs_transformers(hf32, hf, prompts, res, lgs, n_dec)
        check(f"qwen2: decode at batch 8 on {name} vs transformers fp32",
              ok_vs(max(pre, dec), hfe),
              f"prefill max rel L2 {pre:.2e}, decode max {dec:.2e}; transformers-bf16 max "
              f"{hfe:.2e}; greedy flips {flips}/{8 * (n_dec + 1)}")

    failed = [n for n, ok, _ in results if not ok]
    print(f"qwen2: {len(results) - len(failed)}/{len(results)} passed" +
          (f"; failed: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
