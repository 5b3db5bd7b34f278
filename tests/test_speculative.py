"""Speculative decoding (--speculative-config, n-gram drafts) on the CPU backend with SmolLM2: the
output is the output without it, and it is refused at start where it cannot be honoured.

Exactness is by construction (each position is sampled as a plain decode step would sample it,
with the same RNG counter, and the drafts are kept up to the first sample that differs), so
greedy and seeded outputs are compared token for token with a server that runs without it, and
the distribution at a position that drafts reach is compared with an unseeded two-sample
chi-square test."""

import math
import re
import subprocess
from collections import Counter

import httpx
import pytest

from conftest import BUILD, bin_path, smollm2_gguf
from test_serve_e2e import Server, free_port

SPEC = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'

# Prompts that quote or rework themselves (drafts are accepted) and one that does not.
PROMPTS = [
    "Repeat this list exactly: apple, banana, cherry, date, elderberry, fig, grape.\n"
    "The list again: apple, banana,",
    "def add(a, b):\n    return a + b\n\ndef add3(a, b, c):\n",
    "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. "
    "The quick brown",
    "Question: What is the capital of France?\nAnswer:",
    "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,",
]


def start(*extra):
    cache = BUILD / "CMakeCache.txt"
    if cache.exists() and "FOLIO_SANITIZE:BOOL=ON" in cache.read_text():
        pytest.skip("SmolLM2 under a sanitizer is too slow for these comparisons")
    smollm2_gguf()  # fails, saying how to fetch it, when the model is missing
    server = Server(None, free_port(), *extra)  # no --model: SmolLM2
    try:
        server.wait_health(200)
    except BaseException:
        server.stop()
        raise
    return server


@pytest.fixture(scope="module")
def spec():
    server = start("--speculative-config", SPEC)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def base():
    server = start()
    yield server
    server.stop()


def complete(server, prompt, **kw):
    body = {"prompt": prompt, "max_tokens": 48, "temperature": 0, **kw}
    r = httpx.post(server.base + "/v1/completions", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()


def spec_counters(server):
    text = httpx.get(server.base + "/metrics", timeout=5).text

    def total(name):
        m = re.search(rf"^{name}\{{[^}}]*\}} (\S+)$", text, re.M)
        assert m, f"{name} missing from /metrics"
        return float(m.group(1))

    per_pos = [float(v) for v in re.findall(
        r'^vllm:spec_decode_num_accepted_tokens_per_pos\{[^}]*position="\d+"\} (\S+)$', text,
        re.M)]
    return {"drafts": total("vllm:spec_decode_num_drafts_total"),
            "draft_tokens": total("vllm:spec_decode_num_draft_tokens_total"),
            "accepted": total("vllm:spec_decode_num_accepted_tokens_total"),
            "per_pos": per_pos,
            "seqs_disabled": server.metric("folio_spec_decode_seqs_disabled_total"),
            "batch_off": server.metric("folio_spec_decode_steps_batch_off_total")}


def choices(resp):
    return [(c["text"], c["finish_reason"],
             c["logprobs"]["tokens"] if c.get("logprobs") else None)
            for c in sorted(resp["choices"], key=lambda c: c["index"])]


def logprob_lists(resp):
    return [c["logprobs"]["token_logprobs"] for c in sorted(resp["choices"],
                                                           key=lambda c: c["index"])]


def test_greedy_output_is_identical_and_drafts_are_accepted(spec, base):
    before = spec_counters(spec)
    for prompt in PROMPTS:
        got, want = complete(spec, prompt, logprobs=2), complete(base, prompt, logprobs=2)
        assert choices(got) == choices(want), prompt
        assert got["usage"] == want["usage"], prompt
        for a, b in zip(logprob_lists(got), logprob_lists(want)):
            assert a == pytest.approx(b, abs=1e-4)
    after = spec_counters(spec)
    assert after["drafts"] > before["drafts"]
    assert after["accepted"] > before["accepted"]
    assert after["draft_tokens"] >= after["accepted"]
    assert len(after["per_pos"]) == 4 and sum(after["per_pos"]) == after["accepted"]
    # acceptance falls off with the position: a draft is kept only after every one before it
    assert all(a >= b for a, b in zip(after["per_pos"], after["per_pos"][1:]))
    assert spec_counters(base)["drafts"] == 0


def test_seeded_sampling_logprobs_and_n_are_identical(spec, base):
    # Each position draws with the RNG counter of its output index, so a seeded request samples
    # the very tokens it samples without drafts.
    for prompt in PROMPTS[:3]:
        kw = dict(temperature=1.0, top_p=0.95, seed=1234, n=3, logprobs=3, max_tokens=40)
        got, want = complete(spec, prompt, **kw), complete(base, prompt, **kw)
        assert choices(got) == choices(want), prompt
        for a, b in zip(logprob_lists(got), logprob_lists(want)):
            assert a == pytest.approx(b, abs=1e-4)


@pytest.mark.parametrize("kw", [
    dict(stop=["fig"]),                      # a stop string inside an accepted run of drafts
    dict(stop=["cherry, date"], max_tokens=30),
    dict(max_tokens=7),                      # max_tokens inside a run
    dict(max_tokens=1),
    dict(min_tokens=12, max_tokens=20),      # min_tokens' EOS ban: no drafts until it is met
    dict(temperature=0.7, seed=5, stop=["grape"], max_tokens=40),
    dict(stop_token_ids=[28]),               # "," in SmolLM2's vocabulary: a stop id mid-run
])
def test_stops_and_limits_are_unchanged(spec, base, kw):
    prompt = PROMPTS[0]
    got, want = complete(spec, prompt, **kw), complete(base, prompt, **kw)
    assert choices(got) == choices(want)
    assert got["usage"] == want["usage"]


def test_requests_that_cannot_draft_are_unchanged(spec, base):
    # penalties, a logit bias and a grammar turn drafting off for the sequence; its output is
    # still the plain one
    before = spec_counters(spec)
    for kw in (dict(repetition_penalty=1.3), dict(frequency_penalty=0.5),
               dict(logit_bias={"28": -100}),
               dict(response_format={"type": "json_object"}, max_tokens=20)):
        got, want = complete(spec, PROMPTS[0], **kw), complete(base, PROMPTS[0], **kw)
        assert choices(got) == choices(want), kw
    assert spec_counters(spec)["drafts"] == before["drafts"]


def chi2_sf(x, k):
    """P(chi-square with k degrees of freedom > x): the regularized upper incomplete gamma
    Q(k/2, x/2), by its series below a + 1 and its continued fraction above."""
    a, x = k / 2.0, x / 2.0
    if x <= 0:
        return 1.0
    lg = math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        n = a
        while term > total * 1e-15:
            n += 1
            term *= x / n
            total += term
        return max(0.0, 1.0 - total * math.exp(-x + a * math.log(x) - lg))
    b, c, d = x + 1 - a, 1e300, 1 / (x + 1 - a)
    h = d
    for i in range(1, 10000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return math.exp(-x + a * math.log(x) - lg) * h


def homogeneity_p(xs, ys):
    """Two-sample chi-square test of the samples xs and ys (equal sizes): categories whose
    pooled count is under 10 are merged into one, so every expected count is at least 5."""
    cx, cy = Counter(xs), Counter(ys)
    cats, rest = [], (0, 0)
    for t in set(cx) | set(cy):
        if cx[t] + cy[t] >= 10:
            cats.append((cx[t], cy[t]))
        else:
            rest = (rest[0] + cx[t], rest[1] + cy[t])
    if sum(rest) >= 10:
        cats.append(rest)
    if len(cats) < 2:
        return 1.0
    nx, ny = len(xs), len(ys)
    stat = 0.0
    for a, b in cats:
        ea, eb = (a + b) * nx / (nx + ny), (a + b) * ny / (nx + ny)
        stat += (a - ea) ** 2 / ea + (b - eb) ** 2 / eb
    return chi2_sf(stat, len(cats) - 1)


def test_chi2_sf_matches_known_quantiles():
    assert chi2_sf(3.841458820694124, 1) == pytest.approx(0.05, rel=1e-6)
    assert chi2_sf(23.209251158954356, 10) == pytest.approx(0.01, rel=1e-6)
    assert chi2_sf(11.0705, 5) == pytest.approx(0.05, rel=1e-4)


# The distribution test: the token at output position POSITION (0-based) of a prompt that
# repeats a pattern, so that drafts reach it; SAMPLES a side, at temperature 1.
POSITION = 5
SAMPLES = 320
BOUND = 1e-6  # a correct engine fails it one run in a million
DIST_PROMPT = ("a b c d e f g h i j k l m n o p q r s t u v w x y z\n"
               "a b c d e f g h i j k l m n o p q r s t u v w x y z\na b c d e f g")


def samples_at(server, temperature, seed0):
    out = []
    for r in range(SAMPLES // 8):
        resp = complete(server, DIST_PROMPT, temperature=temperature, n=8, seed=seed0 + 8 * r,
                        max_tokens=POSITION + 1, logprobs=0, ignore_eos=True)
        for c in resp["choices"]:
            out.append(c["logprobs"]["tokens"][POSITION])
    return out


def test_sampling_distribution_matches_without_speculation(spec, base):
    before = spec_counters(spec)
    # Different seeds on the two sides: the samples are independent, so only the
    # distributions can agree.
    with_spec = samples_at(spec, 1.0, 1)
    without = samples_at(base, 1.0, 10_000_001)
    after = spec_counters(spec)
    # most samples went through verify steps before the position (prefill and the first decode
    # step never draft)
    assert after["drafts"] - before["drafts"] >= SAMPLES // 2, "drafts did not reach the position"
    assert after["accepted"] - before["accepted"] >= SAMPLES // 2
    assert len(set(without)) >= 3, "the position's distribution is too narrow to test"
    p_same = homogeneity_p(with_spec, without)
    # The same test tells a shifted distribution apart at this size: temperature 0.5 at the
    # same position, as an acceptance that kept drafts too often would shift it towards them.
    p_shifted = homogeneity_p(samples_at(base, 0.5, 20_000_001), without)
    print(f"spec vs plain p = {p_same:.3g}; temperature 0.5 vs 1 p = {p_shifted:.3g}; "
          f"{Counter(without).most_common(4)}")
    assert p_same > BOUND
    assert p_shifted < BOUND


@pytest.mark.parametrize("config,field", [
    ('{"method": "ngram"', "not a JSON object"),
    ('{"method": "ngram"}', "num_speculative_tokens"),
    ('{"method": "ngram", "num_speculative_tokens": 0}', "num_speculative_tokens"),
    ('{"method": "ngram", "num_speculative_tokens": 99}', "num_speculative_tokens"),
    ('{"method": "ngram", "num_speculative_tokens": 3, "bogus": 1}', "bogus"),
    ('{"method": "eagle", "num_speculative_tokens": 3}', "eagle"),
    ('{"method": "draft_model", "model": "x", "num_speculative_tokens": 3}', "not built"),
    ('{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5, '
     '"prompt_lookup_max": 2}', "prompt_lookup_min"),
    ('{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 0}',
     "prompt_lookup_max"),
    ('{"method": "ngram", "num_speculative_tokens": "3"}', "num_speculative_tokens"),
])
def test_bad_config_is_a_startup_error(config, field):
    p = subprocess.run([str(bin_path("folio")), "serve", "--model", str(smollm2_gguf()),
                        "--port", str(free_port()), "--speculative-config", config],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "--speculative-config" in p.stderr and field in p.stderr, p.stderr


def test_backend_that_cannot_verify_is_a_startup_error():
    # The simulated worker's LoadReply says it does not verify drafts: never silently off.
    p = subprocess.run([str(bin_path("folio")), "serve", "--simulate", "--port", str(free_port()),
                        "--speculative-config", SPEC], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode != 0
    assert "does not verify drafts" in p.stdout + p.stderr
