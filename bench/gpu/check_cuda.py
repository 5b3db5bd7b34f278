#!/usr/bin/env python3
"""Correctness of the CUDA backend on the GPU machine (issue 4), through step_driver scripts.

    check_cuda.py STEP_DRIVER TINYLLAMA_DIR FIXTURE_DIR OUT_DIR

Metric: relative L2 error of the full logit vector, ||folio - ref|| / ||ref||, in float64. The
reference is transformers in float32 on the same (bf16) weights; transformers' own bf16 run is
measured against it too, and sets the noise floor of bf16 arithmetic on this checkpoint (random
22-layer networks amplify rounding). A check passes at rel L2 < 1e-2, or within 1.5x of
transformers-bf16's own error where that floor is above 1e-2.
Checks:
  1. prefill of 1..2048 tokens, each alone, against Hugging Face transformers (bf16, same
     checkpoint): rel L2 < 1e-2;
  2. a mixed batch (8 sequences of different context lengths prefilled together in one step, then
     greedy decode steps fed on the GPU) against transformers on prompt + generated tokens;
  3. chunked prefill (chunks of 128, of 13, and one-by-one for a short prompt) against one go;
  4. CUDA-graph replay against eager (FOLIO_CUDA_GRAPHS=0): bitwise at a bucket size (8), close
     at a padded size (5);
  5. the pipeline (launch_ahead: step N+1 queued before N is collected) against step by step;
  6. CPU backend vs CUDA backend on the fixture model: greedy tokens, and seeded sampling tokens.
Prints one line per check (PASS/FAIL, figures) and exits 1 if any failed."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

TOL = 1e-2
FROM_PREV = -1
results = []


def check(name, ok, detail):
    results.append((name, bool(ok), detail))
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def seq(slot, tokens, ctx, blocks, sample=True, **kw):
    d = {"slot": slot, "tokens": [int(t) for t in tokens], "context_len": int(ctx),
         "block_table": [int(b) for b in blocks], "sample": sample}
    d.update(kw)
    return d


class Driver:
    def __init__(self, exe, out_dir):
        self.exe, self.out, self.n = exe, Path(out_dir), 0

    def run(self, model, steps, vocab, env=None, **opts):
        self.n += 1
        script = {"model": str(model), "backend": "cuda", "steps": steps, "max_seqs": 16,
                  "max_num_tokens": 2048, "num_kv_blocks": 2048}
        script.update(opts)
        sp, lp = self.out / f"script{self.n}.json", self.out / f"logits{self.n}.bin"
        sp.write_text(json.dumps(script))
        e = dict(os.environ)
        e.update(env or {})
        p = subprocess.run([self.exe, str(sp), str(lp)], capture_output=True, text=True, env=e,
                           timeout=300)
        if p.returncode != 0:
            raise RuntimeError(f"step_driver ({script['backend']}) failed: {p.stderr[-2000:]}")
        res = [json.loads(line) for line in p.stdout.splitlines()]
        flat = np.fromfile(lp, dtype=np.float32).reshape(-1, vocab)
        logits, i = [], 0
        for st in steps:
            n = sum(1 for s in st if s.get("sample", True))
            logits.append(flat[i:i + n])
            i += n
        lp.unlink()
        return res, logits


def prompt(n, seed, vocab):
    rng = np.random.default_rng(seed)
    return [1] + [int(t) for t in rng.integers(3, vocab, n - 1)]


def hf_logits(model, ids):
    """float32 logits [len(ids), vocab] of one sequence."""
    with torch.no_grad():
        x = torch.tensor([ids], device="cuda")
        return model(x).logits[0].float().cpu().numpy()


def ok_vs(folio_err, hf_err):
    return folio_err < TOL or folio_err <= 1.5 * hf_err


def main():
    exe, tl_dir, fx_dir, out_dir = sys.argv[1:5]
    drv = Driver(exe, out_dir)
    from transformers import LlamaForCausalLM

    try:
        hf = LlamaForCausalLM.from_pretrained(tl_dir, dtype=torch.bfloat16).cuda().eval()
    except TypeError:
        hf = LlamaForCausalLM.from_pretrained(tl_dir, torch_dtype=torch.bfloat16).cuda().eval()
    vocab = hf.config.vocab_size
    try:
        hf32 = LlamaForCausalLM.from_pretrained(tl_dir, dtype=torch.float32).cuda().eval()
    except TypeError:
        hf32 = LlamaForCausalLM.from_pretrained(tl_dir, torch_dtype=torch.float32).cuda().eval()

    # 1. Prefill of 1..2048 tokens, each alone (one step each, fresh slot and blocks).
    lens = [1, 2, 15, 16, 17, 100, 511, 1024, 2048]
    steps, blocks_used = [], 0
    for i, n in enumerate(lens):
        nb = (n + 15) // 16
        blocks = list(range(blocks_used + nb - 1, blocks_used - 1, -1))  # reversed order
        blocks_used += nb
        steps.append([seq(i % 16, prompt(n, 100 + i, vocab), n, blocks)])
    res, lg = drv.run(tl_dir, steps, vocab)
    errs, hf_errs, vs_bf16 = {}, {}, {}
    for i, n in enumerate(lens):
        ref = hf_logits(hf32, steps[i][0]["tokens"])[-1]
        ref16 = hf_logits(hf, steps[i][0]["tokens"])[-1]
        errs[n], hf_errs[n], vs_bf16[n] = rel(lg[i][0], ref), rel(ref16, ref), rel(lg[i][0], ref16)
        logits_std = float(ref.std())
    noise = max(hf_errs.values())
    check("prefill vs transformers fp32", all(ok_vs(errs[n], hf_errs[n]) for n in lens),
          "folio rel L2 " + ", ".join(f"{n}: {e:.2e}" for n, e in errs.items()) +
          "; transformers-bf16 rel L2 " + ", ".join(f"{n}: {e:.2e}" for n, e in hf_errs.items()) +
          "; folio vs transformers-bf16 " + ", ".join(f"{n}: {e:.2e}" for n, e in vs_bf16.items()) +
          f" (ref logits std {logits_std:.2f})")

    # 2. Mixed batch: 8 prompts prefilled in one step, then 6 greedy decode steps from the GPU.
    ctxs = [3, 17, 33, 64, 100, 250, 511, 990]
    prompts = [prompt(n, 200 + i, vocab) for i, n in enumerate(ctxs)]
    n_dec = 6
    tables, nxt = [], 0
    for n in ctxs:
        nb = (n + n_dec + 15) // 16
        tables.append(list(range(nxt, nxt + nb))[::-1])
        nxt += nb
    steps = [[seq(i, p, len(p), tables[i], output_index=0) for i, p in enumerate(prompts)]]
    for d in range(n_dec):
        steps.append([seq(i, [FROM_PREV], len(p) + d + 1, tables[i], output_index=d + 1)
                      for i, p in enumerate(prompts)])
    res_g, lg_g = drv.run(tl_dir, steps, vocab)
    worst_pre, worst_dec, worst_hf, flips = 0.0, 0.0, 0.0, 0
    for i, p in enumerate(prompts):
        gen = [r["token_ids"][i] for r in res_g]
        ref = hf_logits(hf32, p + gen[:-1])
        ref16 = hf_logits(hf, p + gen[:-1])
        for d in range(n_dec + 1):
            e = rel(lg_g[d][i], ref[len(p) - 1 + d])
            worst_hf = max(worst_hf, rel(ref16[len(p) - 1 + d], ref[len(p) - 1 + d]))
            if d == 0:
                worst_pre = max(worst_pre, e)
            else:
                worst_dec = max(worst_dec, e)
        flips += sum(int(np.argmax(ref[len(p) - 1 + d])) != gen[d] for d in range(n_dec + 1))
    check("mixed batch + decode vs transformers fp32",
          ok_vs(max(worst_pre, worst_dec), worst_hf),
          f"prefill max rel L2 {worst_pre:.2e}, decode (batch 8, ctx 3..996) max {worst_dec:.2e}; "
          f"transformers-bf16 max {worst_hf:.2e}; greedy tokens differing from the fp32 argmax "
          f"(teacher-forced): {flips}/{8 * (n_dec + 1)}")

    # 4. Graph replay vs eager on the same script (bucket 8 exact), and a padded batch of 5.
    res_e, lg_e = drv.run(tl_dir, steps, vocab, env={"FOLIO_CUDA_GRAPHS": "0"})
    same = all(np.array_equal(a, b) for a, b in zip(lg_g, lg_e))
    check("graph replay == eager (batch 8)", same and res_g == res_e,
          f"bitwise equal logits: {same}; max rel diff "
          f"{max(rel(a, b) for a, b in zip(lg_g, lg_e)):.2e}")
    five = [[s for s in st if s["slot"] < 5] for st in steps]
    res5g, lg5g = drv.run(tl_dir, five, vocab)
    res5e, lg5e = drv.run(tl_dir, five, vocab, env={"FOLIO_CUDA_GRAPHS": "0"})
    d5 = max(rel(a, b) for a, b in zip(lg5g, lg5e))
    check("graph replay ~ eager (batch 5 padded to 8)", d5 < 1e-2,
          f"max rel diff {d5:.2e}, tokens equal: "
          f"{[r['token_ids'] for r in res5g] == [r['token_ids'] for r in res5e]}")

    # 5. Pipeline: launch ahead gives the same tokens and logits.
    res_a, lg_a = drv.run(tl_dir, steps, vocab, launch_ahead=True,
                          env={"FOLIO_CUDA_KEEP_LOGITS": "1"})
    same = all(np.array_equal(a, b) for a, b in zip(lg_g, lg_a))
    check("launch-ahead pipeline == step by step", same and res_a == res_g,
          f"bitwise equal logits: {same}")

    # 3. Chunked prefill vs one go (700 tokens in 128s and 13s; 40 tokens one by one).
    p = prompt(700, 300, vocab)
    blocks = list(range(44))[::-1]
    one, _ = None, None
    res1, lg1 = drv.run(tl_dir, [[seq(0, p, 700, blocks)]], vocab)
    worst = 0.0
    for c in (128, 13):
        st = [[seq(0, p[k:k + c], min(k + c, 700), blocks, sample=k + c >= 700)]
              for k in range(0, 700, c)]
        _, lgc = drv.run(tl_dir, st, vocab)
        worst = max(worst, rel(lgc[-1][0], lg1[0][0]))
    p40 = prompt(40, 301, vocab)
    st = [[seq(0, [t], k + 1, blocks[:3], sample=k == 39)] for k, t in enumerate(p40)]
    _, lgt = drv.run(tl_dir, st, vocab)
    _, lg40 = drv.run(tl_dir, [[seq(0, p40, 40, blocks[:3])]], vocab)
    worst = max(worst, rel(lgt[-1][0], lg40[0][0]))
    ref700 = hf_logits(hf, p)[-1]
    check("chunked prefill == one go", worst < max(2e-3, 1.5 * noise),
          f"max rel diff {worst:.2e} (chunks 128, 13, 1); one go vs transformers "
          f"{rel(lg1[0][0], ref700):.2e}")
    del hf, hf32
    torch.cuda.empty_cache()

    # 6. CPU vs CUDA on the fixture model: greedy, then seeded sampling (temperature, top-k,
    # top-p, min-p), 3 sequences, 24 steps fed on the device.
    fx_vocab = json.loads(Path(fx_dir, "config.json").read_text())["vocab_size"]
    for label, kw in (("greedy", {}),
                      ("sampled", dict(temperature=0.8, top_k=50, top_p=0.9, min_p=0.02))):
        ps = [prompt(n, 400 + n, fx_vocab) for n in (5, 30, 61)]
        tabs = [[3 * i + 2, 3 * i + 1, 3 * i, 40 + i, 50 + i, 60 + i] for i in range(3)]
        st = [[seq(i, q, len(q), tabs[i], seed=7 + i, num_logprobs=5, **kw)
               for i, q in enumerate(ps)]]
        for d in range(24):
            st.append([seq(i, [FROM_PREV], len(q) + d + 1, tabs[i], output_index=d + 1,
                           seed=7 + i, num_logprobs=5, **kw) for i, q in enumerate(ps)])
        rc, lc = drv.run(fx_dir, st, fx_vocab, backend="cpu", threads=4, max_num_tokens=256,
                         num_kv_blocks=128)
        rg, lgg = drv.run(fx_dir, st, fx_vocab, max_num_tokens=256, num_kv_blocks=128)
        tc = [r["token_ids"] for r in rc]
        tg = [r["token_ids"] for r in rg]
        agree = sum(a == b for x, y in zip(tc, tg) for a, b in zip(x, y))
        total = sum(len(x) for x in tc)
        e0 = max(rel(lgg[0][i], lc[0][i]) for i in range(3))
        # Where a sequence's tokens first differ, was it a near-tie? The CPU's margin between its
        # token and the CUDA one, against the typical logit difference between the backends.
        ties, hard = [], []
        for i in range(3):
            d = next((k for k in range(len(tc)) if tc[k][i] != tg[k][i]), None)
            if d is None:
                continue
            c, g = lc[d][i], lgg[d][i]
            margin = float(c[tc[d][i]] - c[tg[d][i]])
            scale = float(np.sqrt(np.mean((c.astype(np.float64) - g) ** 2)))
            (ties if margin < 4 * scale else hard).append(f"seq {i} step {d}: margin {margin:.3f}"
                                                         f" vs diff rms {scale:.3f}")
        check(f"CPU vs CUDA {label} tokens (fixture)", not hard,
              f"{agree}/{total} tokens equal; first-step logits rel L2 {e0:.2e}; divergences at "
              f"near-ties: {ties or 'none'}; not near-ties: {hard or 'none'}")

    failed = [n for n, ok, _ in results if not ok]
    print(f"correctness: {len(results) - len(failed)}/{len(results)} passed" +
          (f"; failed: {failed}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
