"""The engine half of the OpenAI/vLLM API surface, end to end on the CPU backend (issue 38): n > 1,
echo, batches of prompts, logit_bias, min_tokens, stop_token_ids, include_stop_str_in_output,
skip_special_tokens, spaces_between_special_tokens and logprobs as OpenAI lists them. Each is
driven with the official openai client and with raw HTTP, on both endpoints, streamed and not,
over HTTP/1.1 (httpx) and h2c (curl --http2-prior-knowledge).

The tiny fixture model (random weights, the Llama-2 tokenizer: BOS 1, EOS 2) makes no sense of
text, so the checks use what must hold for any weights: a +100 logit bias forces its token, the
same seed gives the same text, a banned EOS cannot end a sequence."""

import json
import subprocess

import httpx
import openai
import pytest

# The served model and its clients, as test_serve_e2e starts them (and checks their clean stop).
from test_serve_e2e import Server, client, free_port, model_name, server, sse_events  # noqa: F401

EOS, BOS = 2, 1
FORCED = 1000  # some ordinary token id


def call(server, path, body, transport="h1"):
    """(status, parsed body): the JSON object, or for a stream the list of chunk objects (the
    [DONE] marker checked and dropped)."""
    url = server.base + path
    if transport == "h1":
        r = httpx.post(url, json=body, timeout=120)
        status, text = r.status_code, r.text
    else:
        out = subprocess.run(["curl", "-sN", "--http2-prior-knowledge", "-w", "\n%{http_code}",
                              "-H", "Content-Type: application/json", "-d", json.dumps(body),
                              url], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        text, status = out.stdout.rsplit("\n", 1)
        status = int(status)
    if status == 200 and body.get("stream"):
        events = sse_events(text.split("\n"))
        assert events[-1] == "[DONE]" and events.count("[DONE]") == 1
        return status, [json.loads(e) for e in events[:-1]]
    return status, json.loads(text)


def ok(server, path, body, transport="h1"):
    """call() that must succeed: the parsed body."""
    status, r = call(server, path, body, transport)
    assert status == 200, (status, r)
    return r


def by_index(chunks, chat):
    """A stream's text and finish reason per choice index."""
    out = {}
    for c in chunks:
        for ch in c["choices"]:
            text, fin = out.get(ch["index"], ("", None))
            piece = (ch["delta"].get("content") or "") if chat else ch["text"]
            out[ch["index"]] = (text + piece, ch["finish_reason"] or fin)
    return out


def body_for(server, chat, **kw):
    b = {"model": model_name(server), "max_tokens": 6, "ignore_eos": True}
    if chat:
        b["messages"] = [{"role": "user", "content": kw.pop("prompt", "Hi there")}]
    else:
        b["prompt"] = kw.pop("prompt", "Hi there")
    b.update(kw)
    return b


def path_for(chat):
    return "/v1/chat/completions" if chat else "/v1/completions"


ENDPOINTS = [pytest.param(False, id="completions"), pytest.param(True, id="chat")]
TRANSPORTS = ["h1", "h2c"]


# ---- n > 1 -------------------------------------------------------------------------------------


@pytest.mark.parametrize("chat", ENDPOINTS)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_n_choices_match_single_seeded_requests(server, chat, transport):
    """Sample j of n draws with seed + j (vLLM's rule): it equals a request with n = 1 and that
    seed. usage: the prompt once, the completions summed."""
    b = body_for(server, chat, n=3, seed=11, temperature=1.0)
    status, r = call(server, path_for(chat), b, transport)
    assert status == 200, r
    assert [c["index"] for c in r["choices"]] == [0, 1, 2]
    for j, c in enumerate(r["choices"]):
        one = ok(server, path_for(chat), body_for(server, chat, seed=11 + j, temperature=1.0))
        text = c["message"]["content"] if chat else c["text"]
        want = one["choices"][0]["message"]["content"] if chat else one["choices"][0]["text"]
        assert text == want
        assert c["finish_reason"] == "length"
        assert r["usage"]["prompt_tokens"] == one["usage"]["prompt_tokens"]
    assert r["usage"]["completion_tokens"] == 3 * 6
    assert r["usage"]["total_tokens"] == r["usage"]["prompt_tokens"] + 18


@pytest.mark.parametrize("chat", ENDPOINTS)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_n_streamed(server, chat, transport):
    b = body_for(server, chat, n=4, seed=3, temperature=1.0)
    whole = ok(server, path_for(chat), b, transport)
    b.update(stream=True, stream_options={"include_usage": True})
    status, chunks = call(server, path_for(chat), b, transport)
    assert status == 200
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 24
    got = by_index(chunks[:-1], chat)
    assert sorted(got) == [0, 1, 2, 3]
    for c in whole["choices"]:
        text = c["message"]["content"] if chat else c["text"]
        assert got[c["index"]] == (text, "length")
    if chat:  # each choice opens with its role chunk
        roles = [ch["index"] for c in chunks for ch in c["choices"] if ch["delta"].get("role")]
        assert sorted(roles) == [0, 1, 2, 3]


def test_n_shares_the_prompt_blocks(tiny_model):
    """The n samples share the prompt's full KV blocks: the scheduler's prefix-cache hits grow by
    the full blocks of n - 1 of them (a fresh 40-token prompt: 2 full blocks of 16 each). On a
    server whose prompts run whole: chunks follow the worker's measured speed, and a sample
    admitted while the first one's prompt is still in chunks computes the rest itself, so how
    much is shared would hang on the machine's speed."""
    import time

    s = Server(tiny_model, free_port(), "--no-enable-chunked-prefill")
    try:
        s.wait_health(200)

        def hits():
            time.sleep(0.4)  # the frontend's copy of the scheduler's status is refreshed every 0.1 s
            return s.metric("folio_prefix_cache_hits_total")
        before = hits()
        ok(s, "/v1/completions", body_for(s, False, prompt=[BOS] + list(range(7000, 7039)), n=8,
                                          max_tokens=2))
        assert hits() - before == 7 * 32
    finally:
        s.stop()


def test_n_with_openai_client(client, server):
    r = client.completions.create(model=model_name(server), prompt="Once", n=2, max_tokens=5,
                                  seed=5, extra_body={"ignore_eos": True})
    assert len(r.choices) == 2 and r.usage.completion_tokens == 10
    r = client.chat.completions.create(model=model_name(server), n=3, max_tokens=4,
                                       messages=[{"role": "user", "content": "Hi"}],
                                       extra_body={"ignore_eos": True})
    assert [c.index for c in r.choices] == [0, 1, 2] and r.usage.completion_tokens == 12
    chunks = list(client.chat.completions.create(
        model=model_name(server), n=2, max_tokens=3, stream=True,
        messages=[{"role": "user", "content": "Hi"}], extra_body={"ignore_eos": True}))
    assert {c.choices[0].index for c in chunks if c.choices} == {0, 1}


def test_best_of_above_n_is_400(client, server):
    for chat in (False, True):
        status, r = call(server, path_for(chat), body_for(server, chat, n=1, best_of=2))
        assert status == 400 and r["error"]["param"] == "best_of"
    with pytest.raises(openai.BadRequestError, match="best_of"):
        client.completions.create(model=model_name(server), prompt="x", n=2, best_of=4)


# ---- lists of prompts ------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_prompt_batch(server, stream, transport):
    """Prompt i's sample j is choice i * n + j; text prompts and token-id prompts mix."""
    prompts = ["The cat", [BOS, 450, 11203], "A very different prompt"]
    b = body_for(server, False, prompt=prompts, n=2, seed=9, temperature=1.0, stream=stream)
    if stream:
        b["stream_options"] = {"include_usage": True}
    status, r = call(server, "/v1/completions", b, transport)
    assert status == 200, r
    got = by_index(r[:-1], False) if stream else {c["index"]: (c["text"], c["finish_reason"])
                                                  for c in r["choices"]}
    usage = r[-1]["usage"] if stream else r["usage"]
    assert sorted(got) == list(range(6))
    prompt_tokens = 0
    for i, p in enumerate(prompts):
        for j in range(2):
            one = ok(server, "/v1/completions",
                          body_for(server, False, prompt=p, seed=9 + j, temperature=1.0))
            assert got[i * 2 + j] == (one["choices"][0]["text"], "length")
        prompt_tokens += one["usage"]["prompt_tokens"]
    assert usage["prompt_tokens"] == prompt_tokens
    assert usage["completion_tokens"] == 6 * 6


def test_prompt_batch_with_openai_client(client, server):
    r = client.completions.create(model=model_name(server), prompt=[[BOS, 5, 6], [BOS, 7]],
                                  max_tokens=3, extra_body={"ignore_eos": True})
    assert [c.index for c in r.choices] == [0, 1]
    assert r.usage.prompt_tokens == 5


def test_prompt_batch_errors(server):
    for prompt in ([], ["ok", []], ["ok", 5], [[1, -1]]):
        status, r = call(server, "/v1/completions", body_for(server, False, prompt=prompt))
        assert status == 400 and r["error"]["param"] == "prompt", prompt
    status, r = call(server, "/v1/completions",
                     body_for(server, False, prompt=["a"] * 600, n=2))
    assert status == 400 and "choices" in r["error"]["message"]


# ---- echo --------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_echo(server, transport):
    b = body_for(server, False, prompt="Echo me", temperature=0)
    plain = ok(server, "/v1/completions", b, transport)
    b["echo"] = True
    status, r = call(server, "/v1/completions", b, transport)
    assert status == 200
    assert r["choices"][0]["text"] == "Echo me" + plain["choices"][0]["text"]
    b["stream"] = True
    chunks = ok(server, "/v1/completions", b, transport)
    assert chunks[0]["choices"][0]["text"] == "Echo me"
    assert by_index(chunks, False)[0][0] == r["choices"][0]["text"]
    # token ids come back as their text
    b = body_for(server, False, prompt=[[BOS, 450, 11203], "x"], echo=True, max_tokens=1)
    r = ok(server, "/v1/completions", b, transport)
    assert r["choices"][0]["text"].startswith("<s>")
    assert r["choices"][1]["text"].startswith("x")


def test_echo_errors(server):
    status, r = call(server, "/v1/chat/completions", body_for(server, True, echo=True))
    assert status == 400 and r["error"]["param"] == "echo"
    status, r = call(server, "/v1/completions", body_for(server, False, prompt_logprobs=1))
    assert status == 400 and r["error"]["param"] == "prompt_logprobs"


def test_echo_logprobs_follow_the_workers_capability(tmp_path):
    """The simulated worker's LoadReply says it computes no prompt logprobs: echo with logprobs is
    a 400 that says so, while the same request without logprobs runs (the CPU worker's are above:
    the scheduler asks the worker, not the backend's name)."""
    from test_reliability import Served

    s = Served(tmp_path, "--simulate")
    try:
        s.wait_health()
        r = httpx.post(s.base + "/v1/completions", timeout=30,
                       json={"prompt": "Hello", "max_tokens": 2, "echo": True, "logprobs": 1})
        assert r.status_code == 400 and "CPU backend only" in r.json()["error"]["message"], r.text
        r = httpx.post(s.base + "/v1/completions", timeout=30,
                       json={"prompt": "Hello", "max_tokens": 2, "echo": True})
        assert r.status_code == 200, r.text
    finally:
        s.stop()


PROMPT_IDS = [BOS, 450, 11203, 310, 278, 3186, 338, 263]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_echo_with_prompt_logprobs(server, stream, transport):
    """echo + logprobs: the prompt's tokens lead the logprobs, the first one's null (as OpenAI);
    prompt token k's top 20 equal the top 20 of a request whose prompt stops before it."""
    b = body_for(server, False, prompt=PROMPT_IDS, echo=True, logprobs=20, max_tokens=3,
                 temperature=0, stream=stream)
    status, r = call(server, "/v1/completions", b, transport)
    assert status == 200, r
    if stream:
        first = r[0]["choices"][0]
        assert first["text"].startswith("<s>") and len(first["logprobs"]["tokens"]) == 8
        lps = {"tokens": [], "token_logprobs": [], "top_logprobs": []}
        for c in r:
            for key in lps:
                lps[key] += (c["choices"][0]["logprobs"] or {}).get(key, [])
    else:
        lps = r["choices"][0]["logprobs"]
    assert len(lps["tokens"]) == len(PROMPT_IDS) + 3
    assert lps["token_logprobs"][0] is None and lps["top_logprobs"][0] is None
    assert all(isinstance(x, float) for x in lps["token_logprobs"][1:])
    for k in (1, 4, 7):
        alone = ok(server, "/v1/completions",
                        body_for(server, False, prompt=PROMPT_IDS[:k], logprobs=20, max_tokens=1,
                                 temperature=0))
        want = alone["choices"][0]["logprobs"]["top_logprobs"][0]
        got = lps["top_logprobs"][k]
        tok = lps["tokens"][k]
        assert tok in got and got[tok] == pytest.approx(lps["token_logprobs"][k])
        top20 = {t: v for t, v in got.items() if t != tok or len(got) == 20}
        for t in set(top20) & set(want):
            assert top20[t] == pytest.approx(want[t], abs=1e-4)
        assert len(set(top20) & set(want)) >= 19


def test_echo_with_logprobs_openai_client(client, server):
    r = client.completions.create(model=model_name(server), prompt="Hello there", echo=True,
                                  logprobs=0, max_tokens=2, extra_body={"ignore_eos": True})
    lp = r.choices[0].logprobs
    assert r.choices[0].text.startswith("Hello there")
    assert lp.token_logprobs[0] is None and len(lp.tokens) == r.usage.prompt_tokens + 2
    assert all(len(t) == 1 for t in lp.top_logprobs[1:])


# ---- logit_bias -------------------------------------------------------------------------------


def text_of(r, chat, i=0):
    c = r["choices"][i]
    return c["message"]["content"] if chat else c["text"]


@pytest.mark.parametrize("chat", ENDPOINTS)
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_logit_bias_forces(server, chat, stream, transport):
    """+100 forces the token: sampled at temperature 1, every token is FORCED, and with FORCED a
    stop token id the sequence stops on its first token."""
    b = body_for(server, chat, temperature=1.0, seed=1, max_tokens=5, stream=stream,
                 logit_bias={str(FORCED): 100})
    status, r = call(server, path_for(chat), b, transport)
    assert status == 200, r
    text = by_index(r, chat)[0][0] if stream else text_of(r, chat)
    one = ok(server, "/v1/completions", body_for(server, False, prompt=[FORCED], echo=True,
                                                  max_tokens=1, logit_bias={str(EOS): 100},
                                                  ignore_eos=False))
    assert one["choices"][0]["finish_reason"] == "stop"
    forced_text = one["choices"][0]["text"]  # FORCED's text, then the EOS (not shown)
    assert text == forced_text * 5
    b.update(stop_token_ids=[FORCED], stream=False)
    r = ok(server, path_for(chat), b, transport)
    assert r["choices"][0]["finish_reason"] == "stop" and r["usage"]["completion_tokens"] == 1


def greedy_id(server, chat):
    """The greedy first token's id, found by banning blocks of ids (-100) until the choice
    changes: that also drives logit_bias lists of the largest size allowed."""
    base = text_of(call(server, path_for(chat), body_for(server, chat, temperature=0,
                                                         max_tokens=1))[1], chat)

    def changed(ids):
        b = body_for(server, chat, temperature=0, max_tokens=1,
                     logit_bias={str(i): -100 for i in ids})
        status, r = call(server, path_for(chat), b)
        assert status == 200, r
        return text_of(r, chat) != base

    lo = next(s for s in range(0, 32000, 1024) if changed(range(s, min(s + 1024, 32000))))
    hi = min(lo + 1024, 32000)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if changed(range(lo, mid)) else (mid, hi)
    return lo


@pytest.mark.parametrize("chat", ENDPOINTS)
def test_logit_bias_bans(server, chat):
    """-100 on the greedy token: it is never sampled, at temperature 0 or 1."""
    g = greedy_id(server, chat)
    for temperature in (0, 1.0):
        b = body_for(server, chat, temperature=temperature, seed=4, max_tokens=8,
                     stop_token_ids=[g])
        b_ban = dict(b, logit_bias={str(g): -100})
        r = ok(server, path_for(chat), b_ban)
        assert r["choices"][0]["finish_reason"] == "length", r  # g never came
    r = ok(server, path_for(chat), body_for(server, chat, temperature=0, max_tokens=3,
                                                 stop_token_ids=[g]))
    assert r["choices"][0]["finish_reason"] == "stop"  # and without the ban it does


def test_logit_bias_with_openai_client(client, server):
    r = client.completions.create(model=model_name(server), prompt="Hi", max_tokens=3,
                                  logit_bias={str(FORCED): 100}, extra_body={
                                      "ignore_eos": True, "stop_token_ids": [FORCED]})
    assert r.choices[0].finish_reason == "stop" and r.usage.completion_tokens == 1
    r = client.chat.completions.create(model=model_name(server), max_tokens=3,
                                       messages=[{"role": "user", "content": "Hi"}],
                                       logit_bias={str(FORCED): 100},
                                       extra_body={"stop_token_ids": [FORCED]})
    assert r.choices[0].finish_reason == "stop" and r.usage.completion_tokens == 1


def test_logit_bias_errors(server):
    for bias in ({"32000": 1}, {"5": 101}, {"5": -100.5}, {"x": 1}, {"-1": 1}, [1],
                 {str(i): 1 for i in range(1025)}):
        for chat in (False, True):
            status, r = call(server, path_for(chat), body_for(server, chat, logit_bias=bias))
            assert status == 400, (bias, r)
            assert "logit_bias" in r["error"]["message"]


# ---- min_tokens, stop_token_ids, stop strings, special tokens -----------------------------------


@pytest.mark.parametrize("chat", ENDPOINTS)
@pytest.mark.parametrize("stream", [False, True])
def test_min_tokens_bans_eos_and_stop_ids(server, chat, stream):
    """EOS forced by +100 still cannot come before min_tokens: exactly min_tokens tokens, then
    EOS. The same for a stop token id."""
    for stop in ({"ignore_eos": False, "logit_bias": {str(EOS): 100}},
                 {"stop_token_ids": [FORCED], "logit_bias": {str(FORCED): 100}}):
        b = body_for(server, chat, temperature=1.0, seed=2, max_tokens=20, min_tokens=5,
                     stream=stream, **stop)
        if stream:
            b["stream_options"] = {"include_usage": True}
        status, r = call(server, path_for(chat), b)
        assert status == 200, r
        usage = r[-1]["usage"] if stream else r["usage"]
        finish = by_index(r[:-1], chat)[0][1] if stream else r["choices"][0]["finish_reason"]
        assert finish == "stop" and usage["completion_tokens"] == 6, (stop, usage)


def test_stop_token_ids_past_32_and_limit(server):
    ids = list(range(3000, 3039)) + [FORCED]  # the 40th: the old cap of 32 dropped it
    b = body_for(server, False, max_tokens=5, stop_token_ids=ids,
                 logit_bias={str(FORCED): 100})
    r = ok(server, "/v1/completions", b)
    assert r["choices"][0]["finish_reason"] == "stop" and r["usage"]["completion_tokens"] == 1
    b["stop_token_ids"] = list(range(1025))
    status, r = call(server, "/v1/completions", b)
    assert status == 400 and "1024" in r["error"]["message"]


@pytest.mark.parametrize("chat", ENDPOINTS)
@pytest.mark.parametrize("stream", [False, True])
def test_include_stop_str_in_output(server, chat, stream):
    full = text_of(call(server, path_for(chat), body_for(server, chat, temperature=0,
                                                         max_tokens=12))[1], chat)
    stop = full[4:7]
    assert len(stop) == 3 and full.find(stop) >= 0
    cut = full[: full.find(stop)]
    for include, want in ((False, cut), (True, cut + stop)):
        b = body_for(server, chat, temperature=0, max_tokens=12, stop=[stop], stream=stream,
                     include_stop_str_in_output=include)
        r = ok(server, path_for(chat), b)
        text, finish = by_index(r, chat)[0] if stream else (text_of(r, chat),
                                                            r["choices"][0]["finish_reason"])
        assert (text, finish) == (want, "stop")


@pytest.mark.parametrize("chat", ENDPOINTS)
def test_special_tokens_in_text(server, chat):
    """BOS forced twice: shown only with skip_special_tokens false, set apart by spaces unless
    spaces_between_special_tokens is false (vLLM's join)."""
    b = body_for(server, chat, max_tokens=2, logit_bias={str(BOS): 100})
    cases = [({}, ""), ({"skip_special_tokens": False}, "<s> <s>"),
             ({"skip_special_tokens": False, "spaces_between_special_tokens": False}, "<s><s>")]
    for extra, want in cases:
        for stream in (False, True):
            status, r = call(server, path_for(chat), dict(b, stream=stream, **extra))
            assert status == 200, r
            text = by_index(r, chat)[0][0] if stream else text_of(r, chat)
            assert text == want, (extra, stream)


# ---- logprobs as OpenAI lists them ------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_completions_logprobs(server, stream, transport):
    """logprobs: k on /v1/completions, as OpenAI's legacy endpoint and vLLM list them: the k most
    likely, and the sampled token added when it is not among them (k + 1 entries, it the least
    likely); logprobs: 0 gives the sampled token alone."""
    outside = 0
    for n in (0, 1, 3):
        b = body_for(server, False, temperature=1.0, seed=8, max_tokens=6, logprobs=n,
                     stream=stream)
        status, r = call(server, "/v1/completions", b, transport)
        assert status == 200
        lps = [c["choices"][0]["logprobs"] for c in r] if stream else [r["choices"][0]["logprobs"]]
        tokens = [t for lp in lps if lp for t in lp["tokens"]]
        values = [v for lp in lps if lp for v in lp["token_logprobs"]]
        tops = [t for lp in lps if lp for t in lp["top_logprobs"]]
        assert len(tokens) == len(values) == len(tops) == 6
        for tok, v, top in zip(tokens, values, tops):
            assert tok in top and top[tok] == pytest.approx(v)  # the sampled token is listed
            assert len(top) <= n + 1 and (n > 0 or len(top) == 1)
            if n and len(top) == n + 1:
                assert v == min(top.values())
                outside += 1
    assert outside > 0  # the seed samples tokens outside the top k, so the case is tested


@pytest.mark.parametrize("stream", [False, True])
def test_chat_top_logprobs(client, server, stream):
    """top_logprobs: k on chat lists exactly the k most likely tokens, most likely first, as
    OpenAI does; a sampled token outside them is not added (its logprob is the entry's own)."""
    outside = 0
    for n in (0, 2, 20):
        kw = dict(model=model_name(server), messages=[{"role": "user", "content": "Hi"}],
                  max_tokens=4, temperature=1.0, seed=3, logprobs=True, top_logprobs=n,
                  extra_body={"ignore_eos": True})
        if stream:
            content = [t for c in client.chat.completions.create(stream=True, **kw)
                       if c.choices and c.choices[0].logprobs
                       for t in c.choices[0].logprobs.content]
        else:
            content = client.chat.completions.create(**kw).choices[0].logprobs.content
        assert len(content) == 4
        for t in content:
            top = [x.logprob for x in t.top_logprobs]
            assert len(top) == n, (n, t)
            assert top == sorted(top, reverse=True)
            if n and t.logprob < top[-1]:
                outside += 1
            elif n:
                assert t.token in [x.token for x in t.top_logprobs]
    assert outside > 0  # the seed samples tokens outside the top k, so the case is tested
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=model_name(server), logprobs=True, top_logprobs=21,
                                       messages=[{"role": "user", "content": "Hi"}])
