"""The default model (SmolLM2-135M, GGUF) served by `folio serve` on the CPU backend, under the
load a hostile client brings: a prompt of thousands of tokens must not stall the short requests
behind it, and many distinct requests must not grow the worker's memory past its weights and KV
pool.

The CPU backend runs SmolLM2 at tens of prompt tokens a second, so a long prompt's prefill takes
minutes; the scheduler chunks it by the worker's measured speed, a short request starts beside
it, and it is answered within seconds. The KV pool is allocated at start and its pages touched
as blocks are first used, so the worker's RSS grows by at most the pool, then stays level."""

import re
import socket
import time
from pathlib import Path

import httpx
import pytest

from conftest import BUILD, smollm2_gguf
from test_serve_e2e import Server, free_port

# SmolLM2-135M: 30 layers, 3 KV heads of 64, float32 K and V, 16 tokens a block.
KV_BLOCK_BYTES = 2 * 30 * 16 * 3 * 64 * 4
# A short request waits for the steps in flight, then runs its prompt and one decode step beside
# the long prompt's chunks: a few steps of about half a second, on a busy machine more.
SHORT_BOUND_S = 10
MIB = 1 << 20


def worker_pid(server):
    sched = server.child_pids("folio-scheduler")[0]
    kids = Path(f"/proc/{sched}/task/{sched}/children").read_text().split()
    assert len(kids) == 1, kids
    return int(kids[0])


def vm_rss(pid):
    return int(re.search(r"^VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(),
                         re.M).group(1)) * 1024


def metric_labelled(server, name, label):
    text = httpx.get(server.base + "/metrics", timeout=5).text
    m = re.search(rf'^{name}\{{process="{label}"\}} (\S+)$', text, re.M)
    return float(m.group(1)) if m else None


def started(*extra):
    # Timings and memory of 135M parameters mean nothing under a sanitizer (an unoptimized build,
    # shadow memory, a quarantine of freed blocks); the normal build checks them.
    cache = BUILD / "CMakeCache.txt"
    if cache.exists() and "FOLIO_SANITIZE:BOOL=ON" in cache.read_text():
        pytest.skip("SmolLM2's timings and memory are checked in the normal build")
    smollm2_gguf()  # fails, saying how to fetch it, when the model is missing
    server = Server(None, free_port(), *extra)  # no --model: SmolLM2
    try:
        server.wait_health(200)
    except BaseException:
        server.stop()
        raise
    return server


def test_short_request_answered_during_long_prefill():
    server = started()
    long_conn = None
    try:
        # About 3,000 prompt tokens: minutes of prefill on this backend.
        body = ('{"prompt": "%s", "max_tokens": 1}'
                % " ".join(f"w{i}" for i in range(1000))).encode()
        long_conn = socket.create_connection(("127.0.0.1", server.port))
        long_conn.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Type: application/json\r\n"
                          + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        deadline = time.time() + 30
        while (server.metric("folio_num_requests_running") or 0) < 1:
            assert time.time() < deadline, "the long prompt was never admitted"
            time.sleep(0.1)
        time.sleep(1)  # well inside its prefill

        t0 = time.time()
        try:
            r = httpx.post(server.base + "/v1/completions",
                           json={"prompt": "Hi", "max_tokens": 2, "ignore_eos": True},
                           timeout=3 * SHORT_BOUND_S)
        except httpx.TimeoutException:
            r = None
        took = time.time() - t0
        print(f"a 2-token request behind a 3,000-token prompt: {took:.2f} s")
        assert r is not None and took < SHORT_BOUND_S, (
            f"a 2-token request took {took:.1f} s behind a long prompt (bound {SHORT_BOUND_S} s)")
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 2, r.text

        # The long prompt is still in its prefill: no answer on its connection yet.
        long_conn.setblocking(False)
        try:
            got = long_conn.recv(1)
        except BlockingIOError:
            got = None
        assert got is None, "the long prompt finished first; the test proves nothing"
        assert server.metric("folio_num_requests_running") >= 1
    finally:
        if long_conn:
            long_conn.close()  # the frontend aborts it
        server.stop()


def test_worker_rss_stays_within_weights_and_kv_pool():
    """Distinct requests through a pool of 16 blocks, three times over: the worker's RSS grows by
    the pool's pages as they are first touched, then stays level; /metrics reports it."""
    blocks = 16
    server = started("--num-kv-blocks", str(blocks))
    try:
        assert server.metric("folio_kv_blocks_total") == blocks
        pid = worker_pid(server)
        pool = blocks * KV_BLOCK_BYTES
        base = vm_rss(pid)  # the weights and the scratch, before any request
        rss, touched = [], 0
        for i in range(12):
            # About 60 tokens that share no prefix with another request: 4 blocks each.
            prompt = " ".join(f"x{(i * 7919 + j * 104729) % 10007}" for j in range(20))
            r = httpx.post(server.base + "/v1/completions",
                           json={"prompt": prompt, "max_tokens": 2, "ignore_eos": True},
                           timeout=300)
            assert r.status_code == 200, r.text
            u = r.json()["usage"]
            touched += -(-(u["prompt_tokens"] + u["completion_tokens"]) // 16)
            rss.append(vm_rss(pid))
        print(f"worker RSS {base / MIB:.1f} MiB at start, {max(rss) / MIB:.1f} MiB at most after "
              f"{touched} blocks of KV through a pool of {blocks} ({pool / MIB:.1f} MiB): "
              + ", ".join(f"{(x - base) / MIB:+.1f}" for x in rss))
        assert touched >= 3 * blocks
        assert max(rss) <= base + pool + 6 * MIB, "the worker grew past its weights and KV pool"
        # Level: the last third of the requests adds nothing once the pool has been used over.
        level = rss[len(rss) * 2 // 3 - 1]
        assert all(abs(x - level) < MIB for x in rss[len(rss) * 2 // 3:]), rss

        # /metrics shows the worker's RSS (from its heartbeat, every half second).
        deadline = time.time() + 5
        while True:
            shown = metric_labelled(server, "folio_resident_memory_bytes", "worker")
            if shown is not None and abs(shown - vm_rss(pid)) < 2 * MIB:
                break
            assert time.time() < deadline, f"/metrics shows the worker at {shown} bytes"
            time.sleep(0.2)
        sched = server.child_pids("folio-scheduler")[0]
        shown = metric_labelled(server, "folio_resident_memory_bytes", "scheduler")
        assert shown is not None and abs(shown - vm_rss(sched)) < 8 * MIB, shown
    finally:
        server.stop()
