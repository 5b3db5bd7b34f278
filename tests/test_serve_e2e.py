"""`folio serve` end to end on the CPU backend: one scheduler, its worker and two frontends serve
real HTTP clients (the official openai client, curl, httpx, nghttp2's client) on one port.

The server is started once for the module (it takes a few seconds) and stopped with SIGTERM at the
end, which must exit 0 and leave no shared-memory segment or socket file behind. The destructive
tests (kill -9 the worker, kill -9 a frontend) run last."""

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import openai
import pytest

from conftest import BUILD, bin_path

MAX_WAIT_S = 90


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid):
    """(pid, cmdline) of the direct children of pid."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                out.append((int(d.name), cmd))
        except (OSError, ValueError, IndexError):
            continue
    return out


class Server:
    def __init__(self, model, port, *extra):
        """model None: no --model, so folio serve picks its default."""
        self.model = model
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.log = open((Path(model).parent if model else BUILD) / f"serve-{port}.log", "w+")
        self.started_at = time.time()
        self.proc = subprocess.Popen(
            [str(bin_path("folio")), "serve", *(["--model", str(model)] if model else []),
             "--port", str(port), "--frontends", "2", "--backend", "cpu", "--drain-seconds", "10",
             *extra],
            stdout=self.log, stderr=subprocess.STDOUT)

    def logs(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-6000:]

    def health(self):
        try:
            return httpx.get(self.base + "/health", timeout=2).status_code
        except httpx.HTTPError:
            return None

    def wait_health(self, want=200, timeout=MAX_WAIT_S, in_a_row=8):
        # Each /health is a new connection, which SO_REUSEPORT hands to any
        # frontend: several answers in a row make it likely that every
        # frontend says so, not just one.
        deadline = time.time() + timeout
        seen = 0
        while time.time() < deadline:
            assert self.proc.poll() is None, "folio serve exited:\n" + self.logs()
            seen = seen + 1 if self.health() == want else 0
            if seen >= in_a_row:
                return
            time.sleep(0.05 if seen else 0.1)
        pytest.fail(f"/health did not become {want} within {timeout} s:\n" + self.logs())

    def metric(self, name):
        text = httpx.get(self.base + "/metrics", timeout=5).text
        m = re.search(rf"^{name} ([0-9.e+-]+)$", text, re.M)
        return float(m.group(1)) if m else None

    def stop(self):
        """SIGTERM; it must exit 0 within 60 s and leave no shared memory or run directory."""
        pid = self.proc.pid
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail("folio serve did not stop within 60 s of SIGTERM:\n" + self.logs())
        assert rc == 0, self.logs()
        left = [f for f in os.listdir("/dev/shm") if f.startswith(f"folio-{pid}-")]
        assert left == [], f"shared memory left behind: {left}"
        assert not Path(f"/tmp/folio-{pid}").exists(), "run directory left behind"

    def child_pids(self, name):
        return [p for p, cmd in children(self.proc.pid) if name in cmd.split()[0]]


@pytest.fixture(scope="module")
def server(tiny_model):
    s = Server(tiny_model, free_port())
    try:
        s.wait_health(200)
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0,
                         timeout=120)


def model_name(server):
    return Path(server.model).name


def metric_by_phase(server, name):
    """{phase: value} of a /metrics series labelled by phase."""
    text = httpx.get(server.base + "/metrics", timeout=5).text
    return {m.group(1): float(m.group(2))
            for m in re.finditer(rf'^{name}\{{phase="(\w+)"\}} (\S+)$', text, re.M)}


def sse_events(lines):
    """The data payloads of an SSE stream, [DONE] included."""
    return [line[len("data: "):] for line in lines if line.startswith("data: ")]


def test_models_and_health(server):
    r = httpx.get(server.base + "/v1/models")
    assert r.status_code == 200
    assert r.json()["data"][0]["id"] == model_name(server)
    assert httpx.get(server.base + "/health").status_code == 200
    m = httpx.get(server.base + "/metrics").text
    assert "folio_time_to_first_token_seconds_bucket" in m
    assert "process_resident_memory_bytes" in m


def test_completion(client, server):
    r = client.completions.create(model=model_name(server), prompt="Hello, my name is",
                                  max_tokens=12, temperature=0, extra_body={"ignore_eos": True})
    assert r.object == "text_completion" and r.id.startswith("cmpl-")
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 12
    assert r.usage.total_tokens == r.usage.prompt_tokens + 12
    assert len(r.choices[0].text) > 0


def test_scheduler_loop_phases(client, server):
    """/metrics names where the scheduler's loop spends its time, phase by phase: after a
    request the loop has applied results, planned steps and waited on the worker, and the phases
    add up to no more than the time the server has been up."""
    client.completions.create(model=model_name(server), prompt="Count with me", max_tokens=8,
                              extra_body={"ignore_eos": True})
    phases = {}

    def read():
        phases.clear()
        phases.update(metric_by_phase(server, "folio_scheduler_loop_seconds_total"))
        return phases.get("results", 0) > 0 and phases.get("wait_gpu", 0) > 0

    wait_until(read, 10, "the loop's phases never showed results and waits")
    assert set(phases) == {"intake", "results", "plan", "events", "wait_gpu", "held_by_events",
                           "idle"}
    assert phases["plan"] > 0 and all(v >= 0 for v in phases.values())
    up = time.time() - server.started_at
    assert sum(phases.values()) <= up + 0.5, (phases, up)


def test_frontend_time_by_phase(client, server):
    """/metrics names where the frontends' time goes: admitting requests (parse, template,
    tokenization) and handling token events (detokenization, SSE), and their CPU time."""
    list(client.completions.create(model=model_name(server), prompt="Tell me", max_tokens=8,
                                   stream=True, extra_body={"ignore_eos": True}))
    seen = {}

    def read():
        seen.clear()
        seen.update(metric_by_phase(server, "folio_frontend_seconds_total"))
        seen["cpu"] = server.metric("folio_frontend_cpu_seconds_total") or 0.0
        return all(seen.get(k, 0) > 0 for k in ("admit", "events", "cpu"))

    # Another frontend's figures reach the sums within its publishing interval.
    wait_until(read, 10, "the frontends' phases never showed admitting, events and CPU")
    up = time.time() - server.started_at
    assert set(seen) == {"admit", "events", "cpu"}
    assert all(v <= 2 * up for v in seen.values()), (seen, up)  # two frontends


def test_completion_stream_with_usage(client, server):
    chunks = list(client.completions.create(
        model=model_name(server), prompt="Once upon a time", max_tokens=10, temperature=0,
        stream=True, stream_options={"include_usage": True}, extra_body={"ignore_eos": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 10
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-2].choices[0].finish_reason == "length"
    text = "".join(c.choices[0].text for c in chunks[:-1])
    full = client.completions.create(model=model_name(server), prompt="Once upon a time",
                                     max_tokens=10, temperature=0,
                                     extra_body={"ignore_eos": True})
    assert text == full.choices[0].text


def test_chat(client, server):
    msgs = [{"role": "system", "content": "You are brief."},
            {"role": "user", "content": "Say hello."}]
    r = client.chat.completions.create(model=model_name(server), messages=msgs, max_tokens=8,
                                       temperature=0, extra_body={"ignore_eos": True})
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    assert r.choices[0].message.role == "assistant"
    assert r.usage.completion_tokens == 8
    chunks = list(client.chat.completions.create(
        model=model_name(server), messages=msgs, max_tokens=8, temperature=0, stream=True,
        extra_body={"ignore_eos": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "length"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == r.choices[0].message.content


def test_curl_stream(server):
    body = json.dumps({"model": model_name(server), "prompt": "The sky is", "max_tokens": 5,
                       "stream": True, "ignore_eos": True, "stop": None})
    out = subprocess.run(["curl", "-sN", "-H", "Content-Type: application/json", "-d", body,
                          server.base + "/v1/completions"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0
    assert out.stdout.endswith("data: [DONE]\n\n")
    events = sse_events(out.stdout.split("\n"))
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "text_completion" for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def tokenize_count(server, chat, prompt):
    body = {"messages": [{"role": "user", "content": prompt}]} if chat else {"prompt": prompt}
    return httpx.post(server.base + "/tokenize", json=body, timeout=30).json()["count"]


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
def test_continuous_usage_stats(server, chat):
    """stream_options.continuous_usage_stats as vLLM counts it: each chunk of a choice carries its
    prompt's tokens and the tokens that choice has generated up to and including that chunk (the
    chat role chunk 0), here with n = 2 (and two prompts on completions); the usage chunk at the
    end sums them. Each chunk's logprobs name its tokens. Without include_usage there is none."""
    prompts = ["One two three", "A longer prompt than the first one, by a few words"]
    body = {"model": model_name(server), "max_tokens": 6, "n": 2, "stream": True,
            "ignore_eos": True, "temperature": 1.0, "seed": 5,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    if chat:
        prompts = prompts[:1]
        body.update(messages=[{"role": "user", "content": prompts[0]}], logprobs=True)
    else:
        body.update(prompt=prompts, logprobs=0)
    prompt_len = [tokenize_count(server, chat, p) for p in prompts]
    path = "/v1/chat/completions" if chat else "/v1/completions"
    r = httpx.post(server.base + path, json=body, timeout=60)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = sse_events(r.text.split("\n"))
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    generated = {}
    for c in chunks[:-1]:
        (choice,) = c["choices"]
        i, lp = choice["index"], choice["logprobs"]
        generated[i] = generated.get(i, 0) + (len(lp["content"] if chat else lp["tokens"])
                                              if lp else 0)
        want = {"prompt_tokens": prompt_len[i // 2], "completion_tokens": generated[i]}
        got = {k: c["usage"][k] for k in want}
        assert got == want, (c, generated)
        assert c["usage"]["total_tokens"] == want["prompt_tokens"] + want["completion_tokens"]
    assert generated == {i: 6 for i in range(2 * len(prompts))}
    last = chunks[-1]
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == 6 * len(generated)
    assert last["usage"]["prompt_tokens"] == sum(prompt_len)
    # vLLM's: continuous usage stats only with include_usage.
    body["stream_options"] = {"continuous_usage_stats": True}
    r = httpx.post(server.base + path, json=body, timeout=60)
    chunks = [json.loads(e) for e in sse_events(r.text.split("\n"))[:-1]]
    assert chunks and all("usage" not in c for c in chunks), chunks[:3]


def test_errors(server):
    url = server.base + "/v1/completions"
    bad = [
        (b"{not json", 400),
        (json.dumps({"prompt": "x", "n": 2, "best_of": 3}).encode(), 400),
        (json.dumps({"prompt": "x", "model": "no-such-model"}).encode(), 404),
        (json.dumps({"prompt": "x", "max_tokens": -1}).encode(), 400),
        (b'{"prompt": "\xff\xfe"}', 400),
        (json.dumps({"prompt": "x", "max_tokens": 10 ** 6}).encode(), 400),
    ]
    for body, status in bad:
        r = httpx.post(url, content=body, headers={"content-type": "application/json"})
        assert r.status_code == status, (body, r.text)
        err = r.json()["error"]
        assert err["message"] and err["type"] and err["code"] == status
    assert httpx.get(url).status_code == 405
    assert httpx.get(server.base + "/v2/nothing").status_code == 404
    # 17 MB: over the 16 MB limit. curl sends "Expect: 100-continue" for a body this size, so
    # the server can refuse it before it is uploaded.
    big = Path(server.model).parent / "big-body.json"
    big.write_bytes(b'{"prompt": "' + b"a" * (17 << 20) + b'"}')
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                          "--data-binary", f"@{big}", url], capture_output=True, text=True,
                         timeout=60)
    assert out.stdout == "413"
    with pytest.raises(openai.BadRequestError):
        openai.OpenAI(base_url=server.base + "/v1", api_key="x", max_retries=0).completions.create(
            model=model_name(server), prompt="x", n=2, best_of=3)


def test_stop_strings(client, server):
    kw = dict(model=model_name(server), prompt="The meaning of life is", temperature=0,
              max_tokens=24, extra_body={"ignore_eos": True})
    full = client.completions.create(**kw).choices[0].text
    assert len(full) > 12
    stop = full[len(full) // 2:len(full) // 2 + 3]
    want = full[:full.index(stop)]
    r = client.completions.create(**kw, stop=[stop, "never-appears-in-it"])
    assert r.choices[0].text == want and r.choices[0].finish_reason == "stop"
    chunks = list(client.completions.create(**kw, stop=stop, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == want
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_served_greedy_equals_folio_generate(client, server):
    prompt = "The quick brown fox jumps over the lazy dog."
    out = subprocess.run([str(bin_path("folio")), "generate", "--model", str(server.model),
                          "--prompt", prompt, "--max-tokens", "16", "--ignore-eos",
                          "--threads", "1"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    r = client.completions.create(model=model_name(server), prompt=prompt, max_tokens=16,
                                  temperature=0, extra_body={"ignore_eos": True})
    assert r.choices[0].text + "\n" == out.stdout


def test_64_concurrent_streams(server):
    async def one(c, i):
        body = {"model": model_name(server), "prompt": f"Request number {i} says", "stream": True,
                "max_tokens": 8, "ignore_eos": True,
                "stream_options": {"include_usage": True}}
        async with c.stream("POST", server.base + "/v1/completions", json=body) as r:
            assert r.status_code == 200
            events = sse_events([line async for line in r.aiter_lines()])
        assert events[-1] == "[DONE]"
        return json.loads(events[-2])["usage"]["completion_tokens"]

    async def main():
        limits = httpx.Limits(max_connections=64)
        async with httpx.AsyncClient(timeout=180, limits=limits) as c:
            return await asyncio.gather(*(one(c, i) for i in range(64)))

    assert asyncio.run(main()) == [8] * 64


def test_http2(server):
    host = f"http://127.0.0.1:{server.port}"
    # nghttp speaks h2c with prior knowledge by default; -u does the HTTP/1.1 Upgrade dance.
    for flags in ([], ["-u"]):
        out = subprocess.run(["nghttp", "-nv", *flags, host + "/health"], capture_output=True,
                             text=True, timeout=30)
        assert out.returncode == 0, out.stdout + out.stderr
        assert ":status: 200" in out.stdout
    body = Path(server.model).parent / "h2-body.json"
    body.write_text(json.dumps({"model": model_name(server), "prompt": "Hi", "max_tokens": 4,
                                "stream": True, "ignore_eos": True}))
    out = subprocess.run(["nghttp", "-d", str(body), host + "/v1/completions"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.endswith("data: [DONE]\n\n")
    r = httpx.Client(http2=False).get(server.base + "/v1/models")
    assert r.status_code == 200


def wait_until(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.1)
    pytest.fail(f"{what} within {timeout} s")


def test_client_disconnect_frees_request(server):
    body = {"model": model_name(server), "prompt": "Tell me a long story", "stream": True,
            "max_tokens": 1500, "ignore_eos": True}
    with httpx.stream("POST", server.base + "/v1/completions", json=body, timeout=60) as r:
        it = r.iter_lines()
        got = 0
        for line in it:
            got += line.startswith("data: ")
            if got >= 3:
                break
        # The scheduler's counts reach /metrics through a status the frontend
        # refreshes every 100 ms (longer on a loaded machine): wait for it.
        wait_until(lambda: server.metric("folio_num_requests_running") >= 1, 10,
                   "the streaming request never showed as running")
    # The connection is closed: the frontend aborts and the scheduler frees the request.
    wait_until(lambda: server.metric("folio_num_requests_running") == 0, 30,
               "the disconnected request was not freed")


def test_kill_worker_mid_stream(server):
    body = {"model": model_name(server), "prompt": "Keep going", "stream": True,
            "max_tokens": 1500, "ignore_eos": True}

    async def one(c, started):
        async with c.stream("POST", server.base + "/v1/completions", json=body) as r:
            if r.status_code != 200:
                return "status"
            last = None
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    started.set()
                    last = line[6:]
                    if last != "[DONE]" and "error" in json.loads(last):
                        return "error"
            return "done" if last == "[DONE]" else "cut"

    async def main():
        async with httpx.AsyncClient(timeout=120) as c:
            started = asyncio.Event()
            tasks = [asyncio.create_task(one(c, started)) for _ in range(4)]
            await asyncio.wait_for(started.wait(), 60)
            await asyncio.sleep(0.3)
            sched = server.child_pids("folio-scheduler")
            assert len(sched) == 1
            workers = [p for p, cmd in children(sched[0]) if "folio-worker" in cmd]
            assert workers, "no folio-worker under the scheduler"
            for p in workers:
                os.kill(p, signal.SIGKILL)
            return await asyncio.wait_for(asyncio.gather(*tasks), 60)

    results = asyncio.run(main())
    # Every open request ended, none hangs; none claims a normal end.
    assert all(r in ("error", "status") for r in results), results
    server.wait_health(200, timeout=MAX_WAIT_S)
    r = httpx.post(server.base + "/v1/completions", timeout=60,
                   json={"model": model_name(server), "prompt": "After", "max_tokens": 4})
    assert r.status_code == 200, r.text


def test_penalties_served_without_harm(server):
    # The CPU worker applies repetition/frequency/presence penalties (vLLM's
    # formulas, unit-tested in test_sampler); a request with them is served and
    # costs nobody else anything (the worker that samples it stays up).
    sched = server.child_pids("folio-scheduler")[0]
    before = [p for p, cmd in children(sched) if "folio-worker" in cmd]
    body = {"model": model_name(server), "prompt": "the the the the", "max_tokens": 24,
            "temperature": 0, "ignore_eos": True}
    plain = httpx.post(server.base + "/v1/completions", json=body, timeout=60)
    pen = httpx.post(server.base + "/v1/completions", timeout=60,
                     json={**body, "repetition_penalty": 1.2, "frequency_penalty": -2.0,
                           "presence_penalty": -2.0})  # negative: repeats are rewarded
    assert plain.status_code == 200 and pen.status_code == 200, pen.text
    assert pen.json()["usage"]["completion_tokens"] == 24
    assert pen.json()["choices"][0]["text"] != plain.json()["choices"][0]["text"]
    bad = httpx.post(server.base + "/v1/completions", json={**body, "frequency_penalty": 3},
                     timeout=60)
    assert bad.status_code == 400
    after = [p for p, cmd in children(sched) if "folio-worker" in cmd]
    assert before == after


def test_health_503_while_worker_down(server):
    sched = server.child_pids("folio-scheduler")[0]
    workers = [p for p, cmd in children(sched) if "folio-worker" in cmd]
    for p in workers:
        os.kill(p, signal.SIGKILL)
    # The tiny model's worker is back within a few hundred ms and a frontend
    # refreshes its status every 100 ms: poll fast so the 503 window is seen.
    deadline = time.time() + 10
    while server.health() != 503:
        assert time.time() < deadline, "/health did not go 503 within 10 s"
        time.sleep(0.005)
    server.wait_health(200, timeout=MAX_WAIT_S)


def test_kill_scheduler_mid_stream(server):
    """The frontends see the scheduler's connection close, end its requests with an error,
    register with the restarted one and serve again."""
    body = {"model": model_name(server), "prompt": "Go on", "stream": True, "max_tokens": 1500,
            "ignore_eos": True}
    with httpx.stream("POST", server.base + "/v1/completions", json=body, timeout=60) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        for line in lines:
            if line.startswith("data: "):
                break
        os.kill(server.child_pids("folio-scheduler")[0], signal.SIGKILL)
        rest = [line[6:] for line in lines if line.startswith("data: ")]
    assert rest[-1] == "[DONE]" and "error" in json.loads(rest[-2])
    server.wait_health(200, timeout=MAX_WAIT_S)
    # A frontend can still be settling with the new scheduler for a moment
    # (a late event from the dead scheduler's connection makes it register
    # again): a 503 that says so may come for a short while, then 200.
    deadline = time.time() + 10
    while True:
        r = httpx.post(server.base + "/v1/completions", timeout=60,
                       json={"model": model_name(server), "prompt": "Again", "max_tokens": 3})
        if r.status_code != 503 or time.time() > deadline:
            break
        time.sleep(0.1)
    assert r.status_code == 200, r.text


def test_scheduler_stalls_then_resumes(server):
    """A scheduler that stops answering (SIGSTOP) for less than the launcher's heartbeat limit
    (5 s; past it, test_reliability shows the restart) but longer than /health trusts a status
    (1 s): /health goes 503. Once it runs again, the same scheduler is back, every frontend
    with it, and serves."""
    server.wait_health(200, timeout=MAX_WAIT_S)
    sched = server.child_pids("folio-scheduler")[0]
    os.kill(sched, signal.SIGSTOP)
    try:
        time.sleep(3.8)
        assert server.health() == 503
    finally:
        os.kill(sched, signal.SIGCONT)
    server.wait_health(200, timeout=MAX_WAIT_S)
    assert server.child_pids("folio-scheduler") == [sched]
    for i in range(8):
        r = httpx.post(server.base + "/v1/completions", timeout=60,
                       json={"model": model_name(server), "prompt": f"back {i}", "max_tokens": 2})
        assert r.status_code == 200, r.text


def test_stream_survives_a_scheduler_stall(server):
    """A scheduler late to answer (SIGSTOP past the frontends' 1 s StatusRequest timeout, short
    of their 5 s limit) makes them register again; a stream open meanwhile goes on to its last
    token, because the scheduler knows the same frontend process and keeps its requests
    (it used to drop them, and the stream hung while its frontend still waited)."""
    server.wait_health(200, timeout=MAX_WAIT_S)
    body = {"model": model_name(server), "prompt": "Keep going", "stream": True,
            "max_tokens": 400, "ignore_eos": True,
            "stream_options": {"include_usage": True}}
    sched = server.child_pids("folio-scheduler")[0]
    with httpx.stream("POST", server.base + "/v1/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        for line in lines:
            if line.startswith("data: "):
                break
        os.kill(sched, signal.SIGSTOP)
        try:
            time.sleep(2.5)
        finally:
            os.kill(sched, signal.SIGCONT)
        rest = [line[6:] for line in lines if line.startswith("data: ")]
    assert rest[-1] == "[DONE]", rest[-3:]
    events = [json.loads(x) for x in rest[:-1]]
    assert not [e for e in events if "error" in e], events[-2:]
    assert events[-1]["usage"]["completion_tokens"] == 400
    server.log.flush()
    server.log.seek(0)
    assert "registered again; its requests go on" in server.log.read()


def test_kill_one_frontend(server):
    server.wait_health(200, timeout=MAX_WAIT_S)
    frontends = server.child_pids("folio-frontend")
    assert len(frontends) == 2
    os.kill(frontends[0], signal.SIGKILL)
    time.sleep(0.2)
    for i in range(20):
        r = httpx.post(server.base + "/v1/completions", timeout=60,
                       json={"model": model_name(server), "prompt": f"still {i}",
                             "max_tokens": 2})
        assert r.status_code == 200, r.text
    # The launcher brings the killed one back.
    wait_until(lambda: len(server.child_pids("folio-frontend")) == 2, 30,
               "the killed frontend was not restarted")
