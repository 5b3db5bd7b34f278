#!/usr/bin/env python3
"""The engine half of issue 38 on the CUDA backend, against the CPU backend's sampler, through
step_driver scripts on the fixture model (the same fixture and criterion as
bench/gpu/check_cuda.py's check 6: compare_tokens replays each backend's tokens through a port of
its own sampler on its own logits, and accepts a divergence only where the logits differ by
noise).

    check_api_engine.py STEP_DRIVER FIXTURE_DIR OUT_DIR [BACKEND]

BACKEND (default cuda) is the one held to the CPU backend; "cpu" runs the script against itself,
which checks the script on a machine without a GPU.

Checks:
  1. n = 8 samples of one 45-token prompt as the scheduler plans them: sample 0 prefills the whole
     prompt, samples 1-7 point at its two full KV blocks in the same step and prefill only the
     13-token tail into blocks of their own (what the prefix cache hands out), then 20 decode
     steps fed on the device, each sample with its own seed. CPU vs CUDA tokens; on each backend
     the shared layout against every sample prefilling the whole prompt alone (CPU: equal tokens,
     bitwise; CUDA: compare_tokens, the batch shapes differ); and the prefill work (prompt tokens
     the step computed) of the two layouts.
  2. logit_bias on a batch of 5 sequences: +100 on one token at temperature 1 (every token must be
     it, logprob ~0, on both backends), a ban (-inf, as min_tokens bans EOS) on the greedy token
     of the unbiased run, -100 on the unbiased run's top 5 with top-k sampling, a bias on some
     steps only (decode steps with a bias sample eagerly after their graph's forward, the others
     replay the whole step), and no bias.
     CPU vs CUDA tokens (the reported logits include the bias on both backends, so the sampler
     ports apply unchanged), and the CUDA run against itself without graphs (enforce_eager),
     bitwise.
  3. structured outputs' masks (step_driver's "allowed") on a batch of 4: one allowed token (every
     token must be it), 40 allowed with top-k sampling, 3000 allowed at temperature 1 on every
     other step only (masked steps sample eagerly after their graph's forward), and no mask. CPU
     vs CUDA tokens (the reported logits carry the mask on both backends), every masked token
     among the allowed, the CUDA run against itself without graphs, bitwise, and with the masks
     handed over after launch (the worker's masks_later, with and without a step ahead), bitwise.
Prints one line per check (PASS/FAIL, figures) and exits 1 if any failed.

On the GPU machine, with the bundle built as for check_cuda.py (bench/gpu/check_and_time.sh makes
/tmp/fx the same way):
    python3 tests/fixtures/make_tiny_model.py /tmp/fx --layers 2 \\
        --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 --seed 3
    LD_LIBRARY_PATH=bundle/lib python3 tests/gpu/check_api_engine.py bundle/bin/step_driver \\
        /tmp/fx /tmp/api-engine"""
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "gpu"))
import check_cuda  # noqa: E402
from check_cuda import FROM_PREV, Driver, check, compare_tokens, prompt, seq  # noqa: E402

SAMPLED = dict(temperature=0.8, top_k=50, top_p=0.95)


class Backend(Driver):
    """check_cuda's Driver, whose default backend (the one held to "cpu") is chosen."""

    def __init__(self, exe, out_dir, backend):
        super().__init__(exe, out_dir)
        self.backend = backend

    def run(self, model, steps, vocab, paths=None, **opts):
        opts.setdefault("backend", self.backend)
        return super().run(model, steps, vocab, paths=paths, **opts)


def finite(logits):
    """A ban's -inf as -1e30 (as banned to the sampler ports), so that the rms of two backends'
    logit difference stays a number."""
    return [np.where(np.isneginf(x), np.float32(-1e30), x) for x in logits]


def tokens_of(res, i):
    return [r["token_ids"][i] for r in res]


def n_samples(drv, fx, vocab):
    """1. n = 8 samples of one prompt sharing its full KV blocks."""
    n, n_dec, plen = 8, 20, 100
    full = plen // 16  # 6 full blocks; the 4-token tail goes into each sample's own block
    p = prompt(plen, 77, vocab)
    shared_blocks, tail = list(range(full)), p[full * 16:]
    own = [[full + 2 * j, full + 2 * j + 1] for j in range(n)]  # positions 96..127
    alone_blocks = [[40 + full * j + b for b in range(full)] for j in range(n)]
    kw = [dict(SAMPLED, seed=100 + j, num_logprobs=2) for j in range(n)]
    shared = [[seq(0, p, plen, shared_blocks + own[0], **kw[0])] +
              [seq(j, tail, plen, shared_blocks + own[j], **kw[j]) for j in range(1, n)]]
    alone = [[seq(j, p, plen, alone_blocks[j] + own[j], **kw[j]) for j in range(n)]]
    for d in range(n_dec):
        shared.append([seq(j, [FROM_PREV], plen + 1 + d, shared_blocks + own[j],
                           output_index=d + 1, **kw[j]) for j in range(n)])
        alone.append([seq(j, [FROM_PREV], plen + 1 + d, alone_blocks[j] + own[j],
                          output_index=d + 1, **kw[j]) for j in range(n)])
    opts = dict(max_num_tokens=1024, num_kv_blocks=96)
    rc, lc = drv.run(fx, shared, vocab, backend="cpu-ref", threads=4, **opts)
    rg, lg = drv.run(fx, shared, vocab, paths={"keep_logits": True}, **opts)
    compare_tokens("n=8 sharing the prompt's blocks: CPU vs CUDA", shared, rc, lc, rg, lg)
    rc1, lc1 = drv.run(fx, alone, vocab, backend="cpu-ref", threads=4, **opts)
    same = [tokens_of(rc, j) == tokens_of(rc1, j) for j in range(n)]
    check("n=8 on the CPU backend: shared blocks == each sample prefilling alone", all(same),
          f"{sum(same)}/{n} samples equal, bitwise")
    rg1, lg1 = drv.run(fx, alone, vocab, paths={"keep_logits": True}, **opts)
    compare_tokens("n=8, each sample alone: CPU vs CUDA", alone, rc1, lc1, rg1, lg1)
    equal = sum(tokens_of(rg, j) == tokens_of(rg1, j) for j in range(n))
    distinct = len({tuple(tokens_of(rg, j)) for j in range(n)})
    check("n=8 on the CUDA backend: samples differ by seed", distinct == n,
          f"{distinct}/{n} distinct token sequences; {equal}/{n} equal to the unshared layout")
    work_shared = sum(len(q["tokens"]) for q in shared[0])
    work_alone = sum(len(q["tokens"]) for q in alone[0])
    check("n=8 prefill work", work_shared < 2 * plen,
          f"shared layout computes {work_shared} prompt tokens, each alone {work_alone} "
          f"({work_shared / plen:.2f}x and {work_alone / plen:.2f}x n=1)")


def logit_bias(drv, fx, vocab):
    """2. logit_bias and bans, CPU vs CUDA, graphs vs eager."""
    n_dec, forced = 12, 1000
    lens = (5, 21, 40, 17, 9)
    ps = [prompt(m, 300 + m, vocab) for m in lens]
    tabs = [[4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3] for i in range(len(ps))]
    opts = dict(max_num_tokens=256, num_kv_blocks=64)

    def script(rows):
        st = [[seq(i, q, len(q), tabs[i], **rows[i](0)) for i, q in enumerate(ps)]]
        for d in range(n_dec):
            st.append([seq(i, [FROM_PREV], len(q) + d + 1, tabs[i], output_index=d + 1,
                           **rows[i](d + 1)) for i, q in enumerate(ps)])
        return st

    plain = script([lambda d: dict(seed=5, num_logprobs=5)] * len(ps))
    r0, _ = drv.run(fx, plain, vocab, backend="cpu-ref", threads=4, **opts)
    greedy1 = r0[0]["token_ids"][1]
    top5 = r0[0]["top_ids"][2][:5]
    rows = [lambda d: dict(temperature=1.0, seed=11, num_logprobs=1,
                           logit_bias=[[forced, 100]]),
            lambda d: dict(seed=12, num_logprobs=1, logit_bias=[[greedy1, None]]),
            lambda d: dict(SAMPLED, seed=13, num_logprobs=3,
                           logit_bias=[[t, -100] for t in top5]),
            lambda d: dict(SAMPLED, seed=14, num_logprobs=1,
                           **({"logit_bias": [[forced, 100]]} if d % 4 == 0 else {})),
            lambda d: dict(SAMPLED, seed=15, num_logprobs=1)]
    st = script(rows)
    rc, lc = drv.run(fx, st, vocab, backend="cpu-ref", threads=4, **opts)
    rg, lg = drv.run(fx, st, vocab, paths={"keep_logits": True}, **opts)
    compare_tokens("logit_bias: CPU vs CUDA", st, rc, finite(lc), rg, finite(lg))
    for name, res in (("CPU", rc), ("CUDA", rg)):
        f = tokens_of(res, 0)
        lp = [r["logprobs"][0] for r in res]
        check(f"logit_bias +100 forces the token ({name})",
              all(t == forced for t in f) and min(lp) > -1e-3,
              f"tokens {f[:6]}..., min logprob {min(lp):.2e}")
        b = tokens_of(res, 1)
        check(f"a -inf ban keeps the greedy token out ({name})", greedy1 not in b,
              f"banned {greedy1}; tokens {b[:6]}... (unbiased greedy {tokens_of(r0, 1)[:6]})")
        t = tokens_of(res, 2)
        check(f"-100 on the top 5 keeps them out ({name})", not set(t) & set(top5),
              f"banned {top5}; tokens {t[:6]}...")
        s = tokens_of(res, 3)
        check(f"a bias on every 4th step forces it there ({name})",
              all(s[d] == forced for d in range(0, n_dec + 1, 4)), f"tokens {s}")
    re, _ = drv.run(fx, st, vocab, enforce_eager=True, **opts)
    check("logit_bias on CUDA: graphs and eager steps mixed == all eager",
          [r["token_ids"] for r in re] == [r["token_ids"] for r in rg],
          f"tokens equal: {[r['token_ids'] for r in re] == [r['token_ids'] for r in rg]}")


def token_masks(drv, fx, vocab):
    """3. structured outputs' masks, CPU vs CUDA, graphs vs eager."""
    n_dec = 12
    lens = (6, 19, 33, 11)
    ps = [prompt(m, 500 + m, vocab) for m in lens]
    tabs = [[4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3] for i in range(len(ps))]
    opts = dict(max_num_tokens=256, num_kv_blocks=64)
    rng = np.random.default_rng(7)
    allowed = [sorted(int(t) for t in rng.choice(vocab, size=k, replace=False))
               for k in (1, 40, 3000)]
    rows = [lambda d: dict(seed=21, num_logprobs=1, allowed=allowed[0]),
            lambda d: dict(SAMPLED, seed=22, num_logprobs=3, allowed=allowed[1]),
            lambda d: dict(temperature=1.0, seed=23, num_logprobs=1,
                           **({"allowed": allowed[2]} if d % 2 == 0 else {})),
            lambda d: dict(SAMPLED, seed=24, num_logprobs=1)]
    st = [[seq(i, q, len(q), tabs[i], **rows[i](0)) for i, q in enumerate(ps)]]
    for d in range(n_dec):
        st.append([seq(i, [FROM_PREV], len(q) + d + 1, tabs[i], output_index=d + 1,
                       **rows[i](d + 1)) for i, q in enumerate(ps)])
    rc, lc = drv.run(fx, st, vocab, backend="cpu-ref", threads=4, **opts)
    rg, lg = drv.run(fx, st, vocab, paths={"keep_logits": True}, **opts)
    compare_tokens("token masks: CPU vs CUDA", st, rc, finite(lc), rg, finite(lg))
    for name, res in (("CPU", rc), ("CUDA", rg)):
        f = tokens_of(res, 0)
        check(f"a mask of one token forces it ({name})", all(t == allowed[0][0] for t in f),
              f"tokens {f[:6]}..., allowed {allowed[0]}")
        t = tokens_of(res, 1)
        check(f"top-k sampling stays inside a mask of 40 ({name})",
              all(x in set(allowed[1]) for x in t), f"tokens {t[:6]}...")
        e = tokens_of(res, 2)
        check(f"a mask on every other step holds there ({name})",
              all(e[d] in set(allowed[2]) for d in range(0, n_dec + 1, 2)), f"tokens {e}")
    re, _ = drv.run(fx, st, vocab, enforce_eager=True, **opts)
    check("token masks on CUDA: graphs and eager steps mixed == all eager",
          [r["token_ids"] for r in re] == [r["token_ids"] for r in rg],
          f"tokens equal: {[r['token_ids'] for r in re] == [r['token_ids'] for r in rg]}")
    for ahead in (False, True) if drv.backend == "cuda" else ():  # the CPU takes masks at launch
        rl, _ = drv.run(fx, st, vocab, masks_later=True, launch_ahead=ahead, **opts)
        check(f"token masks on CUDA handed over after launch (launch_ahead {ahead}) == at launch",
              [r["token_ids"] for r in rl] == [r["token_ids"] for r in rg] and
              [r["logprobs"] for r in rl] == [r["logprobs"] for r in rg],
              f"tokens equal: {[r['token_ids'] for r in rl] == [r['token_ids'] for r in rg]}")


def main():
    if len(sys.argv) not in (4, 5):
        print(__doc__)
        return 2
    exe, fx, out = sys.argv[1:4]
    Path(out).mkdir(parents=True, exist_ok=True)
    drv = Backend(exe, out, sys.argv[4] if len(sys.argv) == 5 else "cuda")
    vocab = json.loads(Path(fx, "config.json").read_text())["vocab_size"]
    n_samples(drv, fx, vocab)
    logit_bias(drv, fx, vocab)
    token_masks(drv, fx, vocab)
    failed = [r for r in check_cuda.results if not r[1]]
    print(f"{len(check_cuda.results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
