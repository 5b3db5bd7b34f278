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
  4. speculative decoding's verify steps (num_draft): a step that brings a sequence's last token
     and d drafts samples at each of the 1 + d positions what decoding those tokens one step at a
     time samples there (position j with RNG counter output_index + j), greedy and seeded at
     temperature 1: batch 1 with K drafts (a verify graph), a batch of three with K, 2 and 0
     drafts (a verify graph of bucket 4), the same beside a prefill chunk (an eager step), each
     with graphs and eagerly (enforce_eager); every row's token is its sampler's draw from its
     own logits with its counter, its logprob (and top logprobs) those of its own logits, the
     two runs' logits agree to float noise and their tokens are equal or split by a near-tie;
     the step after a verify step (explicit tokens, FROM_PREV of a sequence without drafts)
     agrees too, and a step after a verify step whose first token is FROM_PREV equals the same
     step with the verify step's last sample written, bitwise (FROM_PREV stands for a slot's
     last sampled row). The same verify script on the CPU backend against
     CUDA (cross-check).
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
from sampler_ref import Params, cpu_sample, cuda_sample  # noqa: E402

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


K = 4  # num_speculative_tokens of the verify checks: the verify graphs' 1 + K rows a sequence


def row_refs(step, res, logits):
    """A step's sampled rows as (entry index, position j, token, logprob, top ids, top logprobs,
    logits): each sampling entry's row, then its draft rows (result rows after num_seqs, logits
    rows after the entry's own)."""
    rows, li, di = [], 0, 0
    for i, q in enumerate(step):
        if not q.get("sample", True):
            continue
        for j in range(1 + q.get("num_draft", 0)):
            if j == 0:
                r = (res["token_ids"][i], res["logprobs"][i], res["top_ids"][i],
                     res["top_logprobs"][i])
            else:
                r = (res["draft_token_ids"][di], res["draft_logprobs"][di],
                     res["draft_top_ids"][di], res["draft_top_logprobs"][di])
                di += 1
            rows.append((i, j) + r + (logits[li],))
            li += 1
    return rows


def own_draw(q, j, row, sampler):
    """Problems of one row against its own logits: the token its sampler draws there with RNG
    counter output_index + j (Params of the row), its logprob and top logprobs."""
    tok, lp, top_ids, top_lps, lg = row
    prm = Params.from_row(dict(q, output_index=q.get("output_index", 0) + j))
    d = sampler(lg, prm, [])
    bad = []
    if tok not in (d.possible if sampler is cuda_sample else [d.token]) and not d.notes:
        bad.append(f"token {tok}, its logits draw {d.possible} ({d.why_not(tok)})")
    x = lg.astype(np.float64)
    lse = float(np.log(np.exp(x - x.max()).sum()) + x.max())
    if abs(lp - (x[tok] - lse)) > 1e-3:
        bad.append(f"logprob {lp:.5f} vs its logits' {x[tok] - lse:.5f}")
    want = [int(t) for t in np.lexsort((np.arange(len(x)), -x))[:len(top_ids)]]
    if top_ids != want or any(abs(a - (x[t] - lse)) > 1e-3 for a, t in zip(top_lps, top_ids)):
        bad.append(f"top ids {top_ids} vs its logits' {want}")
    return bad


def agree(name, pairs, sampler_a, sampler_b, rel_tol):
    """pairs: (what, q, j, row a, row b). Each row is its own sampler's draw from its own logits
    (own_draw); the logits agree within rel_tol (relative l2); tokens are equal, or a greedy row's
    margin is under 4x the rms of the logit difference and a sampled row's tokens are both their
    logits' draws (a race near-tie); logprobs within 1e-3 + 4x that rms."""
    bad, worst_rel, worst_lp, equal = [], 0.0, 0.0, 0
    for what, q, j, a, b in pairs:
        for tag, r, smp in (("a", a, sampler_a), ("b", b, sampler_b)):
            bad += [f"{what} ({tag}): {p}" for p in own_draw(q, j, r[2:], smp)]
        la, lb = a[6].astype(np.float64), b[6].astype(np.float64)
        rel = float(np.linalg.norm(la - lb) / np.linalg.norm(lb))
        rms = float(np.sqrt(np.mean((la - lb) ** 2)))
        worst_rel = max(worst_rel, rel)
        if rel > rel_tol:
            bad.append(f"{what}: logits differ by {rel:.2e} (relative), beyond {rel_tol:g}")
        if a[2] == b[2]:
            equal += 1
            worst_lp = max(worst_lp, abs(a[3] - b[3]))
            if abs(a[3] - b[3]) > 1e-3 + 4 * rms:
                bad.append(f"{what}: logprobs {a[3]:.5f} vs {b[3]:.5f}")
        elif q.get("temperature", 0) == 0 and abs(lb[b[2]] - lb[a[2]]) >= 4 * rms:
            bad.append(f"{what}: tokens {a[2]} vs {b[2]}, margin {lb[b[2]] - lb[a[2]]:.4f} "
                       f"beyond 4x the logits' rms difference {rms:.4f}")
    check(name, not bad and pairs,
          f"{equal}/{len(pairs)} positions equal, logits within {worst_rel:.1e} (relative), "
          f"logprobs within {worst_lp:.1e}" + (f"; WRONG: {bad[:6]}" if bad else ""))


def verify_drafts(drv, fx, vocab):
    """4. verify steps (num_draft) against decoding the same tokens one step at a time."""
    sampler = cuda_sample if drv.backend == "cuda" else cpu_sample
    opts = dict(max_num_tokens=256, num_kv_blocks=64, num_speculative_tokens=K)
    lens, chunk = (21, 40, 9, 30), 16
    ps = [prompt(m, 900 + m, vocab) for m in lens]
    tabs = [[4 * i + b for b in range(4)] for i in range(len(ps))]
    rng = np.random.default_rng(5)
    for mode, kw in (("greedy", lambda i: dict(seed=40 + i, num_logprobs=2 * (i == 1))),
                     ("seeded t=1", lambda i: dict(temperature=1.0, seed=40 + i,
                                                   num_logprobs=2 * (i == 1)))):
        # Sequences 0-2 decode (0 drafts its own continuation, 1 random drafts, 2 none), 3 is a
        # prompt whose second chunk shares the verify step.
        pre = [seq(i, ps[i], lens[i], tabs[i], **kw(i)) for i in range(3)] + \
              [seq(3, ps[3][:chunk], chunk, tabs[3], sample=False)]
        r0, _ = drv.run(fx, [pre] + [[seq(0, [FROM_PREV], lens[0] + 1 + d, tabs[0],
                                         output_index=1 + d, **kw(0))] for d in range(K)],
                        vocab, **opts)
        toks = [[r["token_ids"][0] for r in r0],
                [r0[0]["token_ids"][1]] + [int(t) for t in rng.integers(3, vocab, 2)],
                [r0[0]["token_ids"][2]]]

        def entries(n, with_chunk):
            es = [seq(i, toks[i], lens[i] + len(toks[i]), tabs[i], output_index=1,
                      num_draft=len(toks[i]) - 1, **kw(i)) for i in range(n)]
            return es + ([seq(3, ps[3][chunk:], lens[3], tabs[3], **kw(3))] if with_chunk else [])

        def sequential(n, with_chunk):
            st = []
            for j in range(K + 1):
                es = [seq(i, [toks[i][j]], lens[i] + 1 + j, tabs[i], output_index=1 + j, **kw(i))
                      for i in range(n) if j < len(toks[i])]
                st.append(es + ([seq(3, ps[3][chunk:], lens[3], tabs[3], **kw(3))]
                                if with_chunk and j == 0 else []))
            return st

        for n, with_chunk, what in ((1, False, "batch 1, K drafts"),
                                    (3, False, "batch of 3 with K, 2 and 0 drafts"),
                                    (3, True, "the batch of 3 beside a prefill chunk")):
            pre_n = pre[:n] + ([pre[3]] if with_chunk else [])
            # After the verify step: sequence 0 goes on from its last sample, explicitly; 2 (no
            # drafts) by FROM_PREV.
            after = lambda last: [seq(0, [last], lens[0] + K + 2, tabs[0], output_index=K + 2,
                                      **kw(0))] + ([seq(2, [FROM_PREV], lens[2] + 2, tabs[2],
                                                        output_index=2, **kw(2))] if n == 3 else [])
            sq = [pre_n] + sequential(n, with_chunk)
            rs, ls = drv.run(fx, sq, vocab, paths={"keep_logits": True}, **opts)
            last = rs[K + 1]["token_ids"][0]
            sq.append(after(last))
            rs, ls = drv.run(fx, sq, vocab, paths={"keep_logits": True}, **opts)
            for eager in (False, True):
                vs = [pre_n, entries(n, with_chunk), after(last)]
                rv, lv = drv.run(fx, vs, vocab, paths={"keep_logits": True}, enforce_eager=eager,
                                 **opts)
                pairs, srows = [], [row_refs(sq[k], rs[k], ls[k]) for k in range(len(sq))]
                for i, j, *row in row_refs(vs[1], rv[1], lv[1]):
                    q = vs[1][i]
                    k = 1 + j  # the sequential step of position j, and its row of sequence i
                    ref = next(r for r in srows[k] if sq[k][r[0]]["slot"] == q["slot"])
                    pairs.append((f"slot {q['slot']} position {j}", q, j, (i, j, *row), ref))
                for (i, j, *row), ref in zip(row_refs(vs[2], rv[2], lv[2]), srows[-1]):
                    pairs.append((f"slot {vs[2][i]['slot']} after the verify step", vs[2][i], 0,
                                  (i, j, *row), ref))
                agree(f"verify steps ({mode}, {what}, {'eager' if eager else 'graphs'}) == one "
                      f"step at a time", pairs, sampler, sampler,
                      0 if drv.backend != "cuda" else 2e-2)
        def from_prev_as_written(what, steps_with, written, at, eager):
            """Step `at` of steps_with(first) gives the same tokens and logits with first =
            FROM_PREV as with the token it stands for written."""
            runs = []
            for first in (written, FROM_PREV):
                r, lg = drv.run(fx, steps_with(first), vocab, paths={"keep_logits": True},
                                enforce_eager=eager, **opts)
                runs.append((r[at], lg[at]))
            (ra, la), (rb, lb) = runs
            check(f"{what} ({mode}, {'eager' if eager else 'graphs'})",
                  ra["token_ids"] == rb["token_ids"] and np.array_equal(la, lb),
                  f"tokens {ra['token_ids']} vs {rb['token_ids']}")

        for eager in (False, True):
            # Drafts behind a step in flight: the verify step's first token is FROM_PREV (the
            # prefill's sample).
            from_prev_as_written(
                "verify step whose first token is FROM_PREV == written",
                lambda first: [pre[:1], [seq(0, [first] + toks[0][1:], lens[0] + K + 1, tabs[0],
                                             output_index=1, num_draft=K, **kw(0))]],
                toks[0][0], 1, eager)
            # After a verify step FROM_PREV stands for its last row's sample, the one after its
            # last draft (the worker's contract; the scheduler holds the next step for the
            # verify step's samples instead of planning on it).
            verify = [seq(0, toks[0], lens[0] + K + 1, tabs[0], output_index=1, num_draft=K,
                          **kw(0))]
            rv, _ = drv.run(fx, [pre[:1], verify], vocab, enforce_eager=eager, **opts)
            from_prev_as_written(
                "FROM_PREV after a verify step == its last sample written",
                lambda first: [pre[:1], verify, [seq(0, [first], lens[0] + K + 2, tabs[0],
                                                     output_index=K + 1, **kw(0))]],
                rv[1]["draft_token_ids"][K - 1], 2, eager)
        if drv.backend == "cuda":  # the same verify script on the CPU backend
            vs = [pre, entries(3, True)]
            rc, lc = drv.run(fx, vs, vocab, backend="cpu-ref", threads=4, **opts)
            rg, lg = drv.run(fx, vs, vocab, paths={"keep_logits": True}, **opts)
            pairs = [(f"slot {vs[1][i]['slot']} position {j}", vs[1][i], j, (i, j, *c), g)
                     for (i, j, *c), g in zip(row_refs(vs[1], rc[1], lc[1]),
                                              row_refs(vs[1], rg[1], lg[1]))]
            agree(f"verify step ({mode}): CPU vs CUDA", pairs, cpu_sample, cuda_sample, 5e-2)


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
    verify_drafts(drv, fx, vocab)
    failed = [r for r in check_cuda.results if not r[1]]
    print(f"{len(check_cuda.results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
