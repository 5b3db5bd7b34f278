"""What the weight- and cache-format GPU checks (check_fp8.py, check_kv_fp8.py,
check_gguf_packed.py) share: step_driver scripts whose tokens are fixed (teacher forcing, so one
early difference does not change every later context), a run of one script under one setting,
and the comparison of two runs' logits (centered relative L2 per row, top-1 agreement)."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np


def row_errors(a, b):
    """Each row's centered L2 error against the larger of its own centered norm and the median
    row's (see compare)."""
    a, b = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    ac = np.asarray(a, np.float64) - np.mean(a, axis=-1, keepdims=True)
    bc = np.asarray(b, np.float64) - np.mean(b, axis=-1, keepdims=True)
    norms = np.linalg.norm(bc, axis=-1)
    return np.linalg.norm(ac - bc, axis=-1) / np.maximum(norms, np.median(norms))


def compare(a, b):
    """(median, max) of the rows' centered relative L2, and top-1 agreement. A row's error is
    taken against the larger of its own centered norm and the median row's: a row of nearly flat
    logits (a random fixture has some) would otherwise turn rounding into an error of order 1."""
    a, b = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
    errs = row_errors(a, b)
    return float(np.median(errs)), float(errs.max()), float(np.mean(a.argmax(-1) == b.argmax(-1)))


def scripts(vocab, decode, k=0):
    """4 prompts prefilled in one step then `decode` steps of the 4 ("batch"), the longest alone
    ("single"), and with k > 0 the 4 in verify steps of 1 + k tokens each ("verify")."""
    rng = np.random.default_rng(5)
    prompts = [rng.integers(3, vocab, n).tolist() for n in (23, 31, 17, 40)]
    feed = rng.integers(3, vocab, (len(prompts), decode * (1 + k))).tolist()
    blocks = 8

    def entry(j, i, tokens, ctx, out_index, ndraft):
        e = {"slot": j, "tokens": tokens, "context_len": ctx, "output_index": out_index,
             "block_table": list(range(blocks * j, blocks * (j + 1)))}
        if ndraft:
            e["num_draft"] = ndraft
        return e

    def steps(idx, per_step):
        out = [[entry(j, i, prompts[i], len(prompts[i]), 0, 0) for j, i in enumerate(idx)]]
        for s in range(decode):
            out.append([entry(j, i, feed[i][s * per_step:(s + 1) * per_step],
                              len(prompts[i]) + (s + 1) * per_step, s + 1, per_step - 1)
                        for j, i in enumerate(idx)])
        return out
    out = {"batch": steps([0, 1, 2, 3], 1), "single": steps([3], 1)}
    if k > 0:
        out["verify"] = steps([0, 1, 2, 3], 1 + k)
    return out


def run(step_driver, model, work, name, kind, steps, vocab, fields, timeout=600):
    """step_driver over `steps` with the script fields `fields`: (logits [rows, vocab], stderr)."""
    script = dict(fields, model=str(model), steps=steps, max_seqs=8, max_num_tokens=512,
                  num_kv_blocks=64, threads=8)
    sp, lp = Path(work) / f"{name}-{kind}.json", Path(work) / f"{name}-{kind}.bin"
    sp.write_text(json.dumps(script))
    p = subprocess.run([str(step_driver), str(sp), str(lp)], capture_output=True, text=True,
                       timeout=timeout)
    if p.returncode != 0:
        sys.exit(f"step_driver {name} {kind} failed: {p.stderr[-3000:]}")
    logits = np.fromfile(lp, dtype=np.float32).reshape(-1, vocab)
    lp.unlink()
    return logits, p.stderr
