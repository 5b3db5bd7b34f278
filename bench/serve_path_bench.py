#!/usr/bin/env python3
"""The cost of Folio's serving path without a model: frontend + IPC + scheduler.

Starts `folio serve --simulate --sim-time-scale 0` (a worker that answers every
step at once, through the same rings and planning code), then streams
completions with ignore_eos over raw HTTP/1.1 keep-alive connections and prints:
  - tokens/s streamed through one frontend with C concurrent streams;
  - the per-token latency the path adds: inter-token gaps of a single stream
    (p50/p99), i.e. plan + plan ring + worker + result ring + event ring +
    detokenize + SSE write + client read, with no GPU time in it.

    FOLIO_BUILD=build python3 bench/serve_path_bench.py [--streams 1,8,64] [--tokens 256]

The client shares the machine with the server, so on a 2-core box its own
parsing is part of what is measured; the single-stream gaps are the cleaner
figure.
"""
import argparse
import asyncio
import json
import os
import pathlib
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

REPO = pathlib.Path(__file__).resolve().parent.parent
BUILD = pathlib.Path(os.environ.get("FOLIO_BUILD", REPO / "build"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


MODEL = "?"


async def stream_once(port, prompt, tokens, gaps):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = json.dumps({"model": MODEL, "prompt": prompt, "max_tokens": tokens, "ignore_eos": True,
                       "stream": True, "stream_options": {"include_usage": True}}).encode()
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body)
    await writer.drain()
    n = 0
    last = None
    completion = 0
    while True:
        line = await reader.readline()
        if not line:
            break
        if not line.startswith(b"data: "):
            continue
        if line.startswith(b"data: [DONE]"):
            break
        now = time.perf_counter()
        ev = json.loads(line[6:])
        if ev.get("usage"):
            completion = ev["usage"]["completion_tokens"]
        if ev.get("choices"):
            n += 1
            if last is not None and gaps is not None:
                gaps.append(now - last)
            last = now
    writer.close()
    return completion or n


async def run_streams(port, streams, tokens, rounds):
    prompt = "Hello " * 16
    t0 = time.perf_counter()
    total = 0
    for _ in range(rounds):
        counts = await asyncio.gather(*[stream_once(port, prompt, tokens, None)
                                        for _ in range(streams)])
        total += sum(counts)
    return total, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", default="1,8,64")
    ap.add_argument("--tokens", type=int, default=256)
    args = ap.parse_args()

    port = free_port()
    folio = BUILD / "bin" / "folio"
    server = subprocess.Popen([str(folio), "serve", "--demo", "--port", str(port), "--frontends", "1",
                               "--simulate", "--sim-time-scale", "0", "--max-num-seqs", "256"],
                              stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
                    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                    if b" 200 " in s.recv(100):
                        break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            sys.exit("folio serve did not become healthy")

        global MODEL
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models") as r:
            MODEL = json.load(r)["data"][0]["id"]
        gaps = []
        asyncio.run(stream_once(port, "Hello", 32, None))  # warm-up
        for _ in range(5):
            asyncio.run(stream_once(port, "Hello " * 16, args.tokens, gaps))
        gaps.sort()
        p50 = gaps[len(gaps) // 2] * 1e6
        p99 = gaps[int(len(gaps) * 0.99)] * 1e6
        rows = [("1 stream, inter-token gap p50 / p99", f"{p50:.0f} / {p99:.0f} us")]
        for c in [int(x) for x in args.streams.split(",")]:
            rounds = max(1, 256 // c)
            total, secs = asyncio.run(run_streams(port, c, args.tokens, min(rounds, 4)))
            rows.append((f"{c} streams x {args.tokens} tokens", f"{total / secs:,.0f} tokens/s"))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)

    print(f"\nServing path with an instant (simulated) worker, one frontend, {os.cpu_count()} cores")
    print("| what | figure |\n|---|---|")
    for what, fig in rows:
        print(f"| {what} | {fig} |")


if __name__ == "__main__":
    main()
