#!/usr/bin/env python3
"""SmolLM2-135M-Instruct (Q4_1 GGUF) on Folio's CUDA worker against Hugging Face transformers
loading the same GGUF file (transformers reads GGUF through the gguf package), on the H200.

    check_gguf_cuda.py STEP_DRIVER FILE.gguf OUT_DIR

Folio dequantizes the file to f32 at load and the CUDA worker uploads bf16; transformers
dequantizes it to float32. The 4 prompts of tests/fixtures/smollm2_prompts.py run batched through
step_driver (backend cuda): a prefill, then 15 greedy decode steps fed on the device. The
reference is transformers in float32 on the GPU, one prompt at a time, greedy; transformers in
bf16 is measured against it too, as the noise floor of bf16 arithmetic on this model.
Checks (one row per prompt, exit 1 if any fails):
  - logits: relative L2 of Folio's first-step logits against float32 transformers below 1e-2,
    or within 1.5x of transformers-bf16's own error where that is higher;
  - tokens: the 16 greedy tokens equal, except after a near-tie: at the first divergence the
    reference's logit of Folio's token must be within NEAR_TIE_RMS times the logits' RMS
    difference (Folio vs reference, that step) of the reference's best.
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
from smollm2_prompts import PROMPTS, batched_greedy_steps  # noqa: E402

NEW_TOKENS = 16
TOL = 1e-2
NEAR_TIE_RMS = 4.0


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def run_folio(step_driver, gguf, out_dir, prompts, vocab):
    """Greedy tokens [prompt][step] and logits [prompt][step][vocab] from the CUDA worker."""
    steps = batched_greedy_steps(prompts, NEW_TOKENS, 8)
    script = {"model": str(gguf), "backend": "cuda", "steps": steps, "max_seqs": 8,
              "max_num_tokens": 512, "num_kv_blocks": 256}
    sp, lp = Path(out_dir) / "gguf_script.json", Path(out_dir) / "gguf_logits.bin"
    sp.write_text(json.dumps(script))
    p = subprocess.run([str(step_driver), str(sp), str(lp)], capture_output=True, text=True,
                       timeout=600)
    if p.returncode != 0:
        sys.exit(f"step_driver (cuda) failed: {p.stderr[-3000:]}")
    res = [json.loads(line) for line in p.stdout.splitlines()]
    logits = np.fromfile(lp, dtype=np.float32).reshape(NEW_TOKENS, len(prompts), vocab)
    lp.unlink()
    tokens = [[r["token_ids"][i] for r in res] for i in range(len(prompts))]
    return tokens, [logits[:, i] for i in range(len(prompts))]


def hf_greedy(model, ids):
    """Greedy tokens and float32 logits [NEW_TOKENS, vocab], recomputing the whole sequence each
    step (no cache: the plainest reference)."""
    seq, toks, logits = list(ids), [], []
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            out = model(torch.tensor([seq], device="cuda")).logits[0, -1].float().cpu().numpy()
            tok = int(np.argmax(out))
            toks.append(tok)
            logits.append(out)
            seq.append(tok)
    return toks, np.array(logits)


def load_hf(gguf, dtype):
    kw = {"gguf_file": gguf.name}
    try:
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), dtype=dtype, **kw)
    except TypeError:  # transformers before "dtype" replaced "torch_dtype"
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), torch_dtype=dtype, **kw)
    return model.to("cuda").eval()


def compare_tokens(folio_toks, folio_logits, ref_toks, ref_logits):
    """(ok, note) for one prompt's greedy tokens."""
    for s in range(NEW_TOKENS):
        if folio_toks[s] == ref_toks[s]:
            continue
        noise = float(np.sqrt(np.mean((folio_logits[s].astype(np.float64) - ref_logits[s]) ** 2)))
        deficit = float(ref_logits[s][ref_toks[s]] - ref_logits[s][folio_toks[s]])
        ok = deficit <= NEAR_TIE_RMS * noise
        return ok, (f"diverged at step {s}: ref logit gap {deficit:.3f} vs noise RMS {noise:.3f}"
                    f" ({'near-tie' if ok else 'NOT a near-tie'})")
    return True, "all 16 equal"


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[1])
    step_driver, gguf, out_dir = Path(sys.argv[1]), Path(sys.argv[2]).resolve(), Path(sys.argv[3])
    out_dir.mkdir(parents=True, exist_ok=True)
    names = list(PROMPTS)
    hf32 = load_hf(gguf, torch.float32)
    vocab = hf32.config.vocab_size
    ref = {n: hf_greedy(hf32, PROMPTS[n]) for n in names}
    del hf32
    hf16 = load_hf(gguf, torch.bfloat16)
    bf16_err = {n: rel(hf_greedy(hf16, PROMPTS[n][:])[1][0], ref[n][1][0]) for n in names}
    del hf16
    torch.cuda.empty_cache()
    folio_toks, folio_logits = run_folio(step_driver, gguf, out_dir, [PROMPTS[n] for n in names],
                                         vocab)
    rows, all_ok = [], True
    for i, n in enumerate(names):
        err = rel(folio_logits[i][0], ref[n][1][0])
        logits_ok = err < TOL or err <= 1.5 * bf16_err[n]
        toks_ok, note = compare_tokens(folio_toks[i], folio_logits[i], *ref[n])
        ok = logits_ok and toks_ok
        all_ok &= ok
        rows.append((n, err, bf16_err[n], note, ok))
        print(f"  {n}: folio {folio_toks[i]}\n  {'':{len(n)}}  ref   {ref[n][0]}", flush=True)
    print(f"\n{'prompt':<20} {'folio-cuda rel L2':>18} {'hf-bf16 rel L2':>15}  tokens")
    for n, err, b, note, ok in rows:
        print(f"{n:<20} {err:>18.2e} {b:>15.2e}  {note}  {'PASS' if ok else 'FAIL'}")
    print("PASS" if all_ok else "FAIL")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
