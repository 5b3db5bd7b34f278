"""NumPy ports of Folio's two token samplers, to tell a sampler or penalty bug from a divergence
of the forward pass when the CPU and CUDA backends pick different tokens.

cpu_sample() is worker/sampler.c (with common/rng.h) operation for operation: the penalties in
float32 in the C order, logits / T in float32, top-k (ties with the k-th kept), top-p and min-p in
double with libm's exp in the C loop order, and the exponential race in float32 with libm's expf
and logf (called through ctypes, so they are the very functions the CPU backend links on this
host; without libm, float32 of the double result, which can differ by an ulp, so then race
scores within a few ulps are reported as a float boundary). It must reproduce every CPU token.

cuda_sample() follows kernels/sample.cu's definitions: s = logit * (1/T) in float32, greedy when
T <= 0 or top_k == 1 (where the CPU is greedy only below T = 1e-5 and divides by T), the top-k
threshold by count (exact), the top-p threshold by mass (the GPU sums __expf in float32 in an
arbitrary atomic order), min-p as s >= s_max + logf(min_p), and the race with CUDA's expf/logf
(whose arguments nvcc may contract into an FMA). Those are not reproducible to the bit, so it
computes them in float64 and returns every token the GPU could pick: a token within NEAR
(relative) of a top-p or min-p boundary may be kept or not, and race scores within NEAR of the
winner's are ties. The penalized logits themselves are exact (sample.cu rounds step by step with
__fdiv_rn etc., as the C code does)."""
import ctypes
import ctypes.util
import math
from dataclasses import dataclass, field

import numpy as np

GREEDY_TEMPERATURE = np.float32(1e-5)  # worker/sampler.c FOLIO_GREEDY_TEMPERATURE
NEAR = 2e-5  # relative distance to a GPU filter boundary or race tie that float error can cross
ULP_BOUNDARY = 4 * 2.0 ** -24  # race scores this close (relative) are a float boundary on the CPU

KEPT, TOP_K, TOP_P, MIN_P, NEG_INF = 0, 1, 2, 3, 4
STAGE_NAMES = {TOP_K: "top-k", TOP_P: "top-p", MIN_P: "min-p", NEG_INF: "a -inf logit"}


def _load_libm():
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        for name in ("expf", "logf"):
            f = getattr(lib, name)
            f.restype, f.argtypes = ctypes.c_float, [ctypes.c_float]
        return lib
    except (OSError, AttributeError):
        return None


_LIBM = _load_libm()
LIBM_EXACT = _LIBM is not None


def _expf(x):
    x = np.asarray(x, np.float32)
    if _LIBM is None:
        with np.errstate(over="ignore", under="ignore"):
            return np.exp(x.astype(np.float64)).astype(np.float32)
    f = _LIBM.expf
    return np.array([f(float(v)) for v in x], np.float32)


def _logf(x):
    x = np.asarray(x, np.float32)
    if _LIBM is None:
        return np.log(x.astype(np.float64)).astype(np.float32)
    f = _LIBM.logf
    return np.array([f(float(v)) for v in x], np.float32)


def _splitmix64(x):
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def rng_uniform(seed, output_index, ids):
    """common/rng.h folio_rng_uniform for each id: float32 in (0, 1], exact."""
    ids = np.atleast_1d(np.asarray(ids, np.int64)).astype(np.uint64)
    with np.errstate(over="ignore"):
        inner = _splitmix64((np.uint64(output_index & 0xFFFFFFFF) << np.uint64(32)) | ids)
        h = _splitmix64(np.uint64(seed & 0xFFFFFFFFFFFFFFFF) ^ inner)
    return ((h >> np.uint64(40)) + np.uint64(1)).astype(np.float32) * np.float32(1.0 / 16777216.0)


@dataclass
class Params:
    """folio_sampling_params as step_driver reads a script row (doubles cast to float)."""
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int = 0
    output_index: int = 0
    rep: float = 1.0
    freq: float = 0.0
    pres: float = 0.0

    @classmethod
    def from_row(cls, q):
        return cls(temperature=q.get("temperature", 0), top_k=int(q.get("top_k", 0)),
                   top_p=q.get("top_p", 1), min_p=q.get("min_p", 0), seed=int(q.get("seed", 0)),
                   output_index=int(q.get("output_index", 0)),
                   rep=q.get("repetition_penalty", 1), freq=q.get("frequency_penalty", 0),
                   pres=q.get("presence_penalty", 0))

    def f32(self, name):
        return np.float32(getattr(self, name))

    def has_penalties(self):
        return self.f32("rep") != 1 or self.f32("freq") != 0 or self.f32("pres") != 0


def penalized(logits, history, num_output, rep=1.0, freq=0.0, pres=0.0):
    """worker/sampler.c apply_penalties in float32: the repetition penalty (divide a positive
    logit, multiply a negative one) once per token of history, then count * freq + pres off each
    token of its last num_output entries (one rounding per operation, no FMA). kernels/sample.cu
    work_logit computes the same values from the slot's state."""
    out = np.array(logits, np.float32)
    vocab = out.shape[0]
    rep, freq, pres = np.float32(rep), np.float32(freq), np.float32(pres)
    for t in sorted(set(int(t) for t in history if 0 <= int(t) < vocab)):
        out[t] = out[t] / rep if out[t] > 0 else out[t] * rep
    n_out = min(int(num_output), len(history))
    counts = {}
    for t in history[len(history) - n_out:]:
        if 0 <= int(t) < vocab:
            counts[int(t)] = counts.get(int(t), 0) + 1
    for t, c in counts.items():
        out[t] = out[t] - (np.float32(c) * freq + pres)
    return out


def work_logits(logits, p, history):
    if not p.has_penalties():
        return np.asarray(logits, np.float32)
    return penalized(logits, history, p.output_index, p.rep, p.freq, p.pres)


@dataclass
class Draw:
    token: int
    possible: list  # every token the sampler could pick (one for the exact CPU port)
    greedy: bool
    stage: np.ndarray = None  # per token: KEPT, or the filter that removed it
    scores: np.ndarray = None  # race score per token (-inf where removed); None if greedy
    work: np.ndarray = None  # the (penalized) logits the draw saw
    notes: list = field(default_factory=list)  # where a decision sat on a float boundary

    def why_not(self, t):
        """Why token t was not drawn here, in words."""
        if self.greedy:
            return f"greedy margin {float(self.work[self.token]) - float(self.work[t]):.4f}"
        if self.stage[t] != KEPT:
            return f"removed by {STAGE_NAMES[int(self.stage[t])]}"
        a, b = float(self.scores[self.token]), float(self.scores[t])
        return f"race log-score gap {math.log(a / b) if a > 0 and b > 0 else float('inf'):.4f}"


def _desc_order(vals, ids):
    """ids by value descending, ties lowest id first (worker/sampler.c by_value_desc)."""
    return ids[np.lexsort((ids, -vals[ids]))]


def cpu_sample(logits, p, history):
    """worker/sampler.c folio_sample's token for logits[vocab] (float32)."""
    work = work_logits(logits, p, history)
    vocab = work.shape[0]
    temp = p.f32("temperature")
    if temp < GREEDY_TEMPERATURE:
        tok = int(np.argmax(work))  # first maximum: the lowest id
        return Draw(tok, [tok], True, work=work)
    scaled = work / temp
    stage = np.where(scaled == -np.inf, NEG_INF, KEPT).astype(np.int8)  # sort_kept skips -inf
    notes = []
    kept = np.flatnonzero(stage == KEPT)
    if 0 < p.top_k < vocab:
        order = _desc_order(scaled, kept)
        if p.top_k < len(order):
            kth = scaled[order[p.top_k - 1]]
            drop = order[p.top_k:][scaled[order[p.top_k:]] < kth]
            stage[drop] = TOP_K
            kept = np.flatnonzero(stage == KEPT)
    top_p = p.f32("top_p")
    if top_p < 1:
        order = _desc_order(scaled, kept)
        vals = [float(v) for v in scaled[order]]
        mx, total = vals[0], 0.0
        for v in vals:
            total += math.exp(v - mx)
        cum, limit = 0.0, 1.0 - float(top_p)
        for j in range(len(order) - 1, 0, -1):
            cum += math.exp(vals[j] - mx) / total
            if abs(cum - limit) <= 1e-12:
                notes.append(f"top-p: cumulative mass at token {int(order[j])} is {cum!r}, "
                             f"limit {limit!r}")
            if cum > limit:
                break
            stage[order[j]] = TOP_P
        kept = np.flatnonzero(stage == KEPT)
    min_p = p.f32("min_p")
    if min_p > 0:
        best = kept[np.argmax(scaled[kept])]
        mx = float(scaled[best])
        for i in kept:
            r = math.exp(float(scaled[i]) - mx)
            if abs(r - float(min_p)) <= 1e-12:
                notes.append(f"min-p: token {int(i)} at ratio {r!r} vs {float(min_p)!r}")
            if r < float(min_p):
                stage[i] = MIN_P
        kept = np.flatnonzero(stage == KEPT)
    smax = scaled[kept[np.argmax(scaled[kept])]]
    e = -_logf(rng_uniform(p.seed, p.output_index, kept))
    with np.errstate(divide="ignore", over="ignore", under="ignore"):
        sc = _expf(scaled[kept] - smax) / e  # u == 1 gives e = -0: score -inf, never drawn
    scores = np.full(vocab, -np.inf, np.float32)
    scores[kept] = sc
    j = int(np.argmax(sc))  # strictly greater replaces: the lowest id among equal scores
    tok = int(kept[j])
    if not LIBM_EXACT and len(sc) > 1:
        second = np.partition(sc, -2)[-2]
        if sc[j] > 0 and (sc[j] - second) <= ULP_BOUNDARY * sc[j]:
            notes.append(f"race: top two scores {float(sc[j])!r} and {float(second)!r} within "
                         f"{ULP_BOUNDARY:.1e} (expf/logf not from libm)")
    return Draw(tok, [tok], False, stage, scores, work, notes)


def cuda_sample(logits, p, history):
    """kernels/sample.cu's token for logits[vocab], as the set of tokens its float error allows
    (see the module docstring); Draw.token is the float64 answer."""
    work = work_logits(logits, p, history)
    vocab = work.shape[0]
    temp = p.f32("temperature")
    if not (temp > 0 and p.top_k != 1):
        tok = int(np.argmax(work))
        return Draw(tok, [tok], True, work=work)
    inv_t = np.float32(1) / temp
    s = work * inv_t
    s_max = np.float32(work.max() * inv_t)
    stage = np.zeros(vocab, np.int8)
    uncertain = np.zeros(vocab, bool)
    notes = []
    floor = -np.inf
    if 0 < p.top_k < vocab:
        floor = np.partition(s, vocab - p.top_k)[vocab - p.top_k]  # the k-th largest: exact
        stage[s < floor] = TOP_K
    cand = np.flatnonzero(stage == KEPT)
    sd = s.astype(np.float64)
    top_p = p.f32("top_p")
    if top_p < 1:
        w = np.exp(sd[cand] - float(s_max))
        z = w.sum()
        target = float(top_p) * z
        desc = np.argsort(-sd[cand], kind="stable")
        csum = np.concatenate(([0.0], np.cumsum(w[desc])))
        asc = np.sort(sd[cand])
        n_greater = len(cand) - np.searchsorted(asc, sd[cand], side="right")
        above = csum[n_greater]  # mass of strictly larger s: kept iff it is below the target
        stage[cand[above >= target]] = TOP_P
        near = np.abs(above - target) <= NEAR * z
        uncertain[cand[near]] = True
        for t in cand[near]:
            notes.append(f"token {int(t)} within {NEAR:g} of the top-p mass boundary")
    min_p = p.f32("min_p")
    if min_p > 0:
        fl = np.float32(s_max + np.float32(np.log(np.float64(min_p))))
        live = np.flatnonzero(stage == KEPT)
        stage[live[s[live] < fl]] = MIN_P
        scale = max(1.0, abs(float(fl)))
        near = np.flatnonzero((stage == KEPT) | (stage == MIN_P))
        near = near[np.abs(sd[near] - float(fl)) <= NEAR * scale]
        uncertain[near] = True
        for t in near:
            notes.append(f"token {int(t)} within {NEAR:g} of the min-p boundary")
    # Candidates: kept, or removed only uncertainly (by a filter decision float error can flip).
    cands = np.flatnonzero((stage == KEPT) | uncertain)
    u = rng_uniform(p.seed, p.output_index, cands).astype(np.float64)
    with np.errstate(divide="ignore", over="ignore", under="ignore"):
        sc = np.exp(sd[cands] - float(s_max)) / -np.log(u)
    scores = np.full(vocab, -np.inf)
    scores[cands] = sc
    order = cands[np.lexsort((cands, -sc))]
    possible, anchor = [], None
    for t in order:
        if anchor is not None and not scores[t] >= anchor * (1 - NEAR):
            break
        if scores[t] == -np.inf and possible:
            break
        possible.append(int(t))
        if anchor is None and not uncertain[t]:
            anchor = scores[t]
    if anchor is not None and len([t for t in possible if not uncertain[t]]) > 1:
        notes.append(f"race scores of {possible} within {NEAR:g} of each other")
    kept = [int(t) for t in order if stage[t] == KEPT]  # the float64 answer's kept set
    tok = kept[0] if kept else -1
    return Draw(tok, possible, False, stage, scores, work, notes)
