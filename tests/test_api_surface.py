"""The API surface of issue 38 that is not the engine's: the 400 for every request field Folio
does not implement, max_tokens' and the sampling fields' defaults, /tokenize, /detokenize,
/version, /ping, /v1/models/{id}, API keys, vLLM's metric names summed over two frontends, and the
CLI (one option parser, errors naming `folio serve`, no silent caps, vLLM's flag names wired
through).

Driven with the official openai client, httpx (HTTP/1.1) and curl --http2-prior-knowledge (h2c),
streamed and not, on both generation endpoints. Two servers on the CPU backend and the tiny
fixture model: A with two frontends and two --api-key keys; B with FOLIO_API_KEY,
--metrics-require-key, --no-enable-prefix-caching, --chat-template, --max-logprobs 2,
--max-model-len 128, --disable-log-requests and --host 127.0.0.1. A third serves a copy of the
model whose generation_config.json recommends sampling settings."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import openai
import pytest

from conftest import bin_path

KEY_A, KEY_A2, KEY_B = "sk-folio-a", "sk-folio-a2", "sk-folio-b"
TEMPLATE_B = "{% for m in messages %}[{{ m['role'] }}:{{ m['content'] }}]{% endfor %}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, model, args, env=None, name="a"):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.model = Path(model).name
        self.log_path = Path(model).parent / f"api-surface-{name}-{self.port}.log"
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen(
            [str(bin_path("folio")), "serve", "--model", str(model), "--port", str(self.port),
             "--drain-seconds", "5", *args],
            stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})

    def logs(self):
        self.log.flush()
        return self.log_path.read_text()

    def wait_ready(self, in_a_row=6):
        deadline, seen = time.time() + 90, 0
        while time.time() < deadline:
            assert self.proc.poll() is None, "folio serve exited:\n" + self.logs()[-4000:]
            try:
                ok = httpx.get(self.base + "/health", timeout=2).status_code == 200
            except httpx.HTTPError:
                ok = False
            seen = seen + 1 if ok else 0
            if seen >= in_a_row:
                return
            time.sleep(0.1)
        pytest.fail("the server did not become healthy:\n" + self.logs()[-4000:])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail("folio serve did not stop within 60 s:\n" + self.logs()[-4000:])
        assert rc == 0, self.logs()[-4000:]


@pytest.fixture(scope="module")
def srv(tiny_model):
    s = Server(tiny_model, ["--frontends", "2", "--api-key", KEY_A, "--api-key", KEY_A2,
                            "--max-body-bytes", "4096"])
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def srv_b(tiny_model, tmp_path_factory):
    tmpl = tmp_path_factory.mktemp("tmpl") / "chat.jinja"
    tmpl.write_text(TEMPLATE_B)
    s = Server(tiny_model, ["--metrics-require-key", "--no-enable-prefix-caching",
                            "--chat-template", str(tmpl), "--max-logprobs", "2",
                            "--max-model-len", "128", "--disable-log-requests",
                            "--host", "127.0.0.1", "--dtype", "bfloat16"],
               env={"FOLIO_API_KEY": KEY_B}, name="b")
    try:
        s.wait_ready()
        yield s
    finally:
        s.stop()


def client(s, key):
    return openai.OpenAI(base_url=s.base + "/v1", api_key=key, max_retries=0, timeout=60)


def auth(key):
    return {"Authorization": f"Bearer {key}"}


def curl_h2(url, key=None, body=None):
    """(status, body) of a request over h2c with prior knowledge."""
    cmd = ["curl", "-s", "--http2-prior-knowledge", "-w", "\n%{http_code} %{http_version}", url]
    if key:
        cmd += ["-H", f"Authorization: Bearer {key}"]
    if body is not None:
        cmd += ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    text, _, tail = out.stdout.rpartition("\n")
    status, version = tail.split()
    assert version == "2", out.stdout
    return int(status), text


# ---- fields Folio does not implement: 400 naming the field ---------------------------------

UNSUPPORTED_BOTH = [
    ("response_format", {"type": "bogus"}),
    ("best_of", 3),
    ("guided_decoding_backend", "xgrammar"),
    ("structured_outputs", {"whitespace_pattern": " "}),
    ("use_beam_search", True),
    ("frobnicate", 1),
]
UNSUPPORTED_CHAT = [
    ("tools", []),  # malformed: tool calling itself is tests/test_tool_calling.py's
    ("tool_choice", "auto"),  # without tools
    ("functions", [{"name": "f", "parameters": {}}]),
    ("function_call", "auto"),
    ("parallel_tool_calls", "yes"),
    ("audio", {"voice": "alloy", "format": "wav"}),
    ("modalities", ["text", "audio"]),
    ("store", True),
]
UNSUPPORTED_COMPLETIONS = [("suffix", " the end")]


def cases():
    for name, value in UNSUPPORTED_BOTH + UNSUPPORTED_COMPLETIONS:
        yield "completions", name, value
    for name, value in UNSUPPORTED_BOTH + UNSUPPORTED_CHAT:
        yield "chat", name, value


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("endpoint,name,value", list(cases()))
def test_unsupported_field_is_400_naming_it(srv, endpoint, name, value, stream):
    c = client(srv, KEY_A)
    with pytest.raises(openai.BadRequestError) as e:
        if endpoint == "completions":
            c.completions.create(model=srv.model, prompt="Hi", max_tokens=2, stream=stream,
                                 extra_body={name: value})
        else:
            c.chat.completions.create(model=srv.model, max_tokens=2, stream=stream,
                                      messages=[{"role": "user", "content": "Hi"}],
                                      extra_body={name: value})
    assert e.value.status_code == 400
    assert e.value.param == name
    assert name in e.value.message
    assert e.value.body["type"] == "invalid_request_error" and e.value.body["code"] == 400


def test_unsupported_content_parts_and_message_keys(srv):
    url = srv.base + "/v1/chat/completions"
    parts = [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
             {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]
    for part in parts:
        body = {"messages": [{"role": "user", "content": [part]}], "max_tokens": 2}
        r = httpx.post(url, json=body, headers=auth(KEY_A))
        assert r.status_code == 400, r.text
        assert part["type"] in r.json()["error"]["message"]
        status, text = curl_h2(url, KEY_A, body)
        assert status == 400 and part["type"] in json.loads(text)["error"]["message"]
    body = {"messages": [{"role": "user", "content": "x", "audio": {"id": "a1"}}], "max_tokens": 2}
    r = httpx.post(url, json=body, headers=auth(KEY_A))
    assert r.status_code == 400 and "messages[0].audio" in r.json()["error"]["message"]


def test_accepted_no_op_values(srv):
    c = client(srv, KEY_A)
    r = c.chat.completions.create(
        model=srv.model, messages=[{"role": "user", "content": "Hi"}], max_tokens=2,
        response_format={"type": "text"}, tool_choice="none", user="u-1", store=False,
        extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 2
    r = c.completions.create(model=srv.model, prompt="Hi", max_tokens=2, best_of=1, user="u-1",
                             extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 2


# ---- max_tokens defaults ---------------------------------------------------------------------

def test_completions_default_max_tokens_is_16(srv):
    c = client(srv, KEY_A)
    r = c.completions.create(model=srv.model, prompt="Once upon a time",
                             extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 16 and r.choices[0].finish_reason == "length"
    chunks = list(c.completions.create(model=srv.model, prompt="Once upon a time", stream=True,
                                       stream_options={"include_usage": True},
                                       extra_body={"ignore_eos": True}))
    assert chunks[-1].usage.completion_tokens == 16


def test_chat_default_max_tokens_runs_to_the_context(srv_b):
    c = client(srv_b, KEY_B)
    msgs = [{"role": "user", "content": "Hi"}]
    r = c.chat.completions.create(model=srv_b.model, messages=msgs,
                                  extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length"
    assert r.usage.prompt_tokens + r.usage.completion_tokens == 128  # --max-model-len 128


# ---- sampling defaults from the model's generation_config.json --------------------------------

MODEL_SAMPLING = {"temperature": 0.5, "top_p": 0.9, "top_k": 3, "min_p": 0.05,
                  "repetition_penalty": 1.3}
OPENAI_SAMPLING = {"temperature": 1, "top_p": 1, "top_k": -1, "min_p": 0,
                   "repetition_penalty": 1}


def test_generation_config_sampling_defaults(tiny_model, tmp_path):
    """vLLM's --generation-config auto: a request that leaves the sampling fields out gets the
    model's generation_config.json values (the same text as a request that sends them, seed for
    seed), one that sends OpenAI's gets OpenAI's; the server says at start what it applies."""
    model = tmp_path / "tiny-with-generation-config"
    shutil.copytree(tiny_model, model)
    gen = json.loads((model / "generation_config.json").read_text())
    (model / "generation_config.json").write_text(json.dumps({**gen, **MODEL_SAMPLING}))
    s = Server(model, ["--frontends", "1"], name="gen")
    try:
        s.wait_ready()
        for path, body in (("/v1/completions", {"prompt": "Once upon a time"}),
                           ("/v1/chat/completions",
                            {"messages": [{"role": "user", "content": "Once upon a time"}]})):
            def text(**sampling):
                r = httpx.post(s.base + path, timeout=60, json={
                    "model": s.model, "max_tokens": 12, "seed": 4, "ignore_eos": True, **body,
                    **sampling})
                assert r.status_code == 200, r.text
                choice = r.json()["choices"][0]
                return choice["text"] if "text" in choice else choice["message"]["content"]

            implicit = text()
            assert implicit == text(**MODEL_SAMPLING), path
            assert implicit != text(**OPENAI_SAMPLING), path
            assert text(temperature=None) == implicit  # null: left out
        assert ("sampling defaults from the model's generation_config.json: temperature 0.5, "
                "top_p 0.9, top_k 3, min_p 0.05, repetition_penalty 1.3") in s.logs()
    finally:
        s.stop()


# ---- /tokenize, /detokenize, /version, /ping, /v1/models/{id} ------------------------------

def test_tokenize_matches_generation(srv):
    c = client(srv, KEY_A)
    prompt = "The quick brown fox"
    r = httpx.post(srv.base + "/tokenize", json={"model": srv.model, "prompt": prompt},
                   headers=auth(KEY_A)).json()
    assert set(r) == {"count", "max_model_len", "tokens", "token_strs"}
    done = c.completions.create(model=srv.model, prompt=prompt, max_tokens=1)
    assert r["count"] == len(r["tokens"]) == done.usage.prompt_tokens
    assert r["max_model_len"] == 2048
    plain = httpx.post(srv.base + "/tokenize", json={"prompt": prompt, "add_special_tokens": False},
                       headers=auth(KEY_A)).json()
    assert plain["tokens"] == r["tokens"][1:]  # without the BOS
    msgs = [{"role": "user", "content": "Say hello."}]
    t = httpx.post(srv.base + "/tokenize", json={"messages": msgs}, headers=auth(KEY_A)).json()
    done = c.chat.completions.create(model=srv.model, messages=msgs, max_tokens=1)
    assert t["count"] == done.usage.prompt_tokens
    status, text = curl_h2(srv.base + "/tokenize", KEY_A, {"prompt": prompt})
    assert status == 200 and json.loads(text)["tokens"] == r["tokens"]
    d = httpx.post(srv.base + "/detokenize", json={"tokens": plain["tokens"]},
                   headers=auth(KEY_A)).json()
    assert d == {"prompt": prompt}


def test_tokenize_errors(srv):
    h = auth(KEY_A)
    r = httpx.post(srv.base + "/tokenize", json={"model": "nope", "prompt": "x"}, headers=h)
    assert r.status_code == 404 and r.json()["error"]["param"] == "model"
    r = httpx.post(srv.base + "/tokenize", json={"prompt": "x", "messages": []}, headers=h)
    assert r.status_code == 400
    r = httpx.post(srv.base + "/detokenize", json={"tokens": [1, -5]}, headers=h)
    assert r.status_code == 400 and r.json()["error"]["param"] == "tokens"
    assert httpx.get(srv.base + "/tokenize", headers=h).status_code == 405


def test_chat_template_flag_is_used(srv_b):
    h = auth(KEY_B)
    t = httpx.post(srv_b.base + "/tokenize",
                   json={"messages": [{"role": "user", "content": "Hi"}]}, headers=h).json()
    p = httpx.post(srv_b.base + "/tokenize", json={"prompt": "[user:Hi]"}, headers=h).json()
    assert t["tokens"] == p["tokens"] and t["max_model_len"] == 128


def test_version_ping_and_model_by_id(srv):
    v = httpx.get(srv.base + "/version")
    assert v.status_code == 200 and re.fullmatch(r"\d+\.\d+\.\d+", v.json()["version"])
    assert httpx.get(srv.base + "/ping").status_code == 200
    assert httpx.post(srv.base + "/ping").status_code == 200
    m = client(srv, KEY_A).models.retrieve(srv.model)
    assert m.id == srv.model and m.object == "model"
    with pytest.raises(openai.NotFoundError) as e:
        client(srv, KEY_A).models.retrieve("no-such-model")
    assert e.value.body["type"] == "not_found_error" and e.value.param == "model"
    status, text = curl_h2(srv.base + f"/v1/models/{srv.model}", KEY_A)
    assert status == 200 and json.loads(text)["id"] == srv.model


# ---- API keys --------------------------------------------------------------------------------

def test_api_keys(srv):
    for key in (KEY_A, KEY_A2):
        assert client(srv, key).models.list().data[0].id == srv.model
    with pytest.raises(openai.AuthenticationError) as e:
        client(srv, "sk-wrong").completions.create(model=srv.model, prompt="x", max_tokens=1)
    assert e.value.status_code == 401 and e.value.body["code"] == 401
    with pytest.raises(openai.AuthenticationError):
        list(client(srv, "sk-wrong").chat.completions.create(
            model=srv.model, messages=[{"role": "user", "content": "x"}], stream=True))
    for path, method in [("/v1/models", "GET"), ("/v1/completions", "POST"),
                         ("/v1/chat/completions", "POST"), ("/tokenize", "POST"),
                         ("/detokenize", "POST"), ("/v1/models/x", "GET"), ("/v1/nothing", "GET")]:
        for headers in ({}, auth("nope"), {"Authorization": KEY_A}, auth(KEY_A + "x")):
            r = httpx.request(method, srv.base + path, json={}, headers=headers)
            assert r.status_code == 401, (path, headers, r.text)
            assert r.json()["error"]["type"] == "invalid_request_error"
            assert r.headers["www-authenticate"] == "Bearer"
        status, _ = curl_h2(srv.base + path, "nope", {} if method == "POST" else None)
        assert status == 401
    for path in ("/health", "/metrics", "/version", "/ping"):
        assert httpx.get(srv.base + path).status_code == 200, path
    status, _ = curl_h2(srv.base + "/v1/models", KEY_A2)
    assert status == 200
    assert len(frontend_cmdlines(srv)) == 2


def test_env_key_and_metrics_require_key(srv_b):
    assert client(srv_b, KEY_B).models.list().data[0].id == srv_b.model
    assert httpx.get(srv_b.base + "/v1/models", headers=auth(KEY_A)).status_code == 401
    assert httpx.get(srv_b.base + "/metrics").status_code == 401
    assert httpx.get(srv_b.base + "/metrics", headers=auth(KEY_B)).status_code == 200
    assert httpx.get(srv_b.base + "/health").status_code == 200
    assert len(frontend_cmdlines(srv_b)) == 1


def frontend_cmdlines(s):
    """The command lines of s's frontends, checked to hold no API key: folio serve hands the
    keys on through the environment, not a command line that every local user can read."""
    out = []
    for p in Path("/proc").iterdir():
        try:
            cmd = (p / "cmdline").read_bytes()
        except OSError:
            continue
        if cmd.split(b"\0")[0].endswith(b"/folio-frontend") and str(s.port).encode() in cmd:
            assert not any(k.encode() in cmd for k in (KEY_A, KEY_A2, KEY_B)), cmd
            out.append(cmd)
    return out


# ---- metrics ---------------------------------------------------------------------------------

def scrape(s, key=None):
    # A new connection each time: SO_REUSEPORT hands it to either frontend.
    with httpx.Client(headers=auth(key) if key else {}) as c:
        return c.get(s.base + "/metrics").text


def wait_for(pred, what, timeout=5):
    """Counters of the other frontend reach a scrape within 50 ms (metrics_shared.h)."""
    deadline = time.time() + timeout
    while not pred():
        assert time.time() < deadline, what
        time.sleep(0.02)


def value(text, name, labels=""):
    m = re.search(rf"^{re.escape(name)}{re.escape(labels)} ([0-9.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else None


VLLM_SERIES = ["vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket",
               "vllm:e2e_request_latency_seconds_bucket", "vllm:request_queue_time_seconds_bucket",
               "vllm:num_requests_running", "vllm:num_requests_waiting",
               "vllm:kv_cache_usage_perc", "vllm:prompt_tokens_total",
               "vllm:generation_tokens_total", "vllm:request_success_total",
               "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total"]


def test_vllm_metrics_summed_over_frontends(srv):
    label = f'{{model_name="{srv.model}"}}'
    done_label = f'{{model_name="{srv.model}",finished_reason="length"}}'
    before = scrape(srv)
    for name in VLLM_SERIES:
        assert re.search(rf"^{re.escape(name)}{{model_name=\"{srv.model}\"", before, re.M), name
    base = value(before, "vllm:request_success_total", done_label)
    c = client(srv, KEY_A)
    seen, n = [], 12
    for i in range(n):
        # each request on a new connection, so both frontends serve some
        openai.OpenAI(base_url=srv.base + "/v1", api_key=KEY_A, max_retries=0).completions.create(
            model=srv.model, prompt=f"Count {i}", max_tokens=3, extra_body={"ignore_eos": True})
        seen.append(value(scrape(srv), "vllm:generation_tokens_total", label))
    assert seen == sorted(seen), seen  # monotonic over scrapes of either frontend
    wait_for(lambda: value(scrape(srv), "vllm:request_success_total", done_label) == base + n,
             f"{n} requests counted")
    time.sleep(0.1)  # past the 50 ms in which a frontend's slot may lag its own counters
    after = [scrape(srv) for _ in range(8)]
    counts = {value(t, "vllm:request_success_total", done_label) for t in after}
    assert counts == {base + n}, counts  # every frontend reports the whole server
    del c


def test_413_counted(srv):
    """Bodies past --max-body-bytes: those Folio reads get its 413 (HTTP/1.1 and h2c), those far
    past it h2o's own 413 (HTTP/1.1; HTTP/2 resets that stream); /metrics counts both."""
    def count():
        return value(scrape(srv), "folio_http_responses_total", '{code="413"}')
    before = count()
    url = srv.base + "/v1/completions"
    for size in (5000, 100000):
        body = {"prompt": "x" * size, "max_tokens": 1}
        r = httpx.post(url, json=body, headers=auth(KEY_A))
        assert r.status_code == 413 and r.json()["error"]["code"] == 413
    status, _ = curl_h2(url, KEY_A, {"prompt": "x" * 5000, "max_tokens": 1})
    assert status == 413
    wait_for(lambda: count() == before + 3, "the three 413s counted")


def test_prefix_caching_flag(srv, srv_b):
    prompt = "lorem ipsum dolor sit amet " * 12  # several full 16-token blocks
    for s, key in ((srv, KEY_A), (srv_b, KEY_B)):
        for _ in range(2):
            client(s, key).completions.create(model=s.model, prompt=prompt, max_tokens=1)
    # the scheduler's counters reach a frontend with its next status poll, not with the reply
    wait_for(lambda: value(scrape(srv), "vllm:prefix_cache_hits_total",
                           f'{{model_name="{srv.model}"}}') > 0, "a prefix-cache hit counted")
    time.sleep(0.3)  # the same poll interval for the server that must count none
    assert value(scrape(srv_b, KEY_B), "vllm:prefix_cache_hits_total",
                 f'{{model_name="{srv_b.model}"}}') == 0


def test_max_logprobs_and_request_logging(srv, srv_b):
    with pytest.raises(openai.BadRequestError) as e:
        client(srv_b, KEY_B).completions.create(model=srv_b.model, prompt="x", max_tokens=1,
                                                logprobs=3)
    assert "--max-logprobs" in e.value.message
    client(srv_b, KEY_B).completions.create(model=srv_b.model, prompt="x", max_tokens=1,
                                            logprobs=2)
    client(srv, KEY_A).completions.create(model=srv.model, prompt="x", max_tokens=1)
    assert "request: completion" in srv.logs()
    assert "request: completion" not in srv_b.logs()


# ---- the CLI ---------------------------------------------------------------------------------

def run(*args, env=None):
    return subprocess.run([str(bin_path(args[0])), *args[1:]], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})})


def test_version():
    for args in (("folio", "--version"), ("folio", "serve", "--version"),
                 ("folio-scheduler", "--version"), ("folio-frontend", "--version")):
        out = run(*args)
        assert out.returncode == 0 and re.search(r"\d+\.\d+\.\d+", out.stdout), args


def test_serve_help_lists_every_flag_once():
    out = run("folio", "serve", "--help")
    assert out.returncode == 0
    heads = re.findall(r"^  (--[a-z-]+)", out.stdout, re.M)
    assert len(heads) == len(set(heads)), heads
    for flag in ("--model", "--host", "--port", "--frontends", "--api-key",
                 "--metrics-require-key", "--enable-prefix-caching", "--chat-template",
                 "--dtype", "--max-logprobs", "--disable-log-requests", "--max-num-seqs",
                 "--max-model-len", "--gpu-memory-utilization", "--backend"):
        assert flag in heads, flag
    assert "(default: 0.0.0.0)" in out.stdout and "(default: 8000)" in out.stdout


@pytest.mark.parametrize("args,want", [
    (["--max-num-seqs", "0"], "--max-num-seqs must be an integer in 1.."),
    (["--gpu-memory-utilization", "5"], "--gpu-memory-utilization must be a number in"),
    (["--max-model-len", "999999"], "--max-model-len must be in 16..2048"),
    (["--dtype", "float16"], "--dtype must be one of auto|bfloat16"),
    (["--port", "http"], "--port must be an integer"),
    (["--frobnicate"], "unknown flag '--frobnicate'"),
    (["--max-num-seqs"], "--max-num-seqs needs a value"),
    (["--chat-template", "/nonexistent/t.jinja"], "--chat-template /nonexistent/t.jinja: No such"),
    (["--frontends", "65"], "--frontends must be an integer in 1..64"),
    (["--no-enable-chunked-prefill", "--max-num-batched-tokens", "256"],
     "--max-num-batched-tokens 256 is below the model length served (2048)"),
])
def test_serve_flag_errors_name_folio_serve(tiny_model, args, want):
    out = run("folio", "serve", "--model", str(tiny_model), *args)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("folio serve: ") and want in out.stderr, out.stderr
    assert "folio-scheduler" not in out.stderr and "folio-frontend" not in out.stderr


def test_ablation_flags_wired_through(tiny_model):
    """vLLM's --no-enable-chunked-prefill, --no-async-scheduling and --enforce-eager reach the
    scheduler and worker, and the server still answers as the default one does."""
    s = Server(tiny_model, ["--no-enable-chunked-prefill", "--no-async-scheduling",
                            "--enforce-eager", "--max-model-len", "512"], name="ablate")
    try:
        s.wait_ready()
        r = client(s, "unused").completions.create(model=s.model, prompt="ab " * 300, max_tokens=8,
                                               n=2, extra_body={"ignore_eos": True})
        assert [c.finish_reason for c in r.choices] == ["length", "length"]
        assert r.usage.completion_tokens == 16
        log = s.logs()
        # the budget stays 2048 (it holds the 512 served); prompts whole, one step in flight
        assert "2048 tokens per step, prompts whole, 1 step in flight, no CUDA graphs" in log, log
    finally:
        s.stop()


def test_programs_parse_the_same_tables(tiny_model):
    out = run("folio-scheduler", "--max-num-seqs", "0")
    assert out.returncode == 2 and out.stderr.startswith("folio-scheduler: --max-num-seqs")
    out = run("folio-frontend", "--model", str(tiny_model), "--bogus", "1")
    assert out.returncode == 2 and out.stderr.startswith("folio-frontend: unknown flag")
    # a child started by folio serve names folio serve in its errors
    out = run("folio-frontend", "--model", str(tiny_model), "--port", "-1",
              env={"FOLIO_PROG": "folio serve"})
    assert out.stderr.startswith("folio serve: --port must be"), out.stderr
    out = run("folio", "generate", "--model", str(tiny_model), "--prompt", "x",
              "--max-tokens", "0")
    assert out.returncode == 2 and out.stderr.startswith("folio generate: --max-tokens")
    out = run("folio", "tokenize", "--model", str(tiny_model), "--nope")
    assert out.returncode == 2 and out.stderr.startswith("folio tokenize: unknown flag")
