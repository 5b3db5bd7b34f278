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

    FOLIO_BUILD=build python3 bench/serve_path_bench.py --wide 1024 --frontends 1,2

instead drives C concurrent streams with h2load (nghttp2-client: a C client
whose cost per event is far below Python's) against a server of
--max-num-seqs C, once per frontend count, and prints the token events a
second, the steps a second and their width, the scheduler loop's phases a step
(folio_scheduler_loop_seconds_total) and the CPU each process used
(bench/proc_cpu.py): the host side of a saturated server with no GPU time in it.
With --serve-args '--backend cuda' on the GPU machine the same client drives the real model, a
load GuideLLM's Python client may not be able to offer (bench/gpu/guidellm_bench.sh's CPU table
shows when it is the limit).
"""
import argparse
import asyncio
import json
import os
import pathlib
import re
import shlex
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


SIMULATED = ("--demo", "--simulate", "--sim-time-scale", "0")


def start_server(port, *flags, engine=SIMULATED):
    folio = BUILD / "bin" / "folio"
    server = subprocess.Popen([str(folio), "serve", *engine, "--port", str(port), *flags],
                              stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    for _ in range(1200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                if b" 200 " in s.recv(100):
                    return server
        except OSError:
            pass
        time.sleep(0.1)
    server.kill()
    sys.exit("folio serve did not become healthy")


def scrape(port):
    """{metric or metric{labels}: value} of the server's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, v = line.rpartition(" ")
            try:
                out[name] = float(v)
            except ValueError:
                pass
    return out


PHASES = ("intake", "results", "plan", "events", "wait_gpu", "held_by_events", "idle")


def wide(streams, frontends, tokens, requests, engine):
    """h2load's C streams against the server (the simulated worker unless --serve-args names a
    model and backend), once per frontend count."""
    rows = []
    body = pathlib.Path(f"/tmp/folio-wide-{os.getpid()}.json")
    for fe in frontends:
        port = free_port()
        server = start_server(port, "--frontends", str(fe), "--max-num-seqs", str(streams),
                              "--max-num-batched-tokens", str(max(2048, streams)), engine=engine)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models") as r:
                model = json.load(r)["data"][0]["id"]
            body.write_text(json.dumps({"model": model, "prompt": "Hello " * 16,
                                        "max_tokens": tokens, "ignore_eos": True,
                                        "stream": True}))
            before = scrape(port)
            cpu_json = pathlib.Path(f"/tmp/folio-wide-cpu-{os.getpid()}.json")
            sampler = subprocess.Popen([sys.executable, str(REPO / "bench" / "proc_cpu.py"),
                                        str(cpu_json)])
            t0 = time.perf_counter()
            h2 = subprocess.run(["h2load", "--h1", "-c", str(streams), "-n", str(requests),
                                 "-d", str(body), "-H", "content-type: application/json",
                                 f"http://127.0.0.1:{port}/v1/completions"],
                                capture_output=True, text=True)
            secs = time.perf_counter() - t0
            sampler.send_signal(signal.SIGINT)
            sampler.wait(timeout=30)
            time.sleep(0.3)  # the scheduler's counts reach /metrics within a status interval
            after = scrape(port)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)
        ok = re.search(r"(\d+) succeeded", h2.stdout)
        if h2.returncode != 0 or not ok or int(ok.group(1)) != requests:
            sys.exit(f"h2load failed:\n{h2.stdout[-2000:]}{h2.stderr[-2000:]}")
        d = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        steps = d.get("folio_steps_total", 0) or 1
        toks = d.get("folio_scheduler_generation_tokens_total", 0)
        phase = {p: d.get(f'folio_scheduler_loop_seconds_total{{phase="{p}"}}', 0) / steps * 1e3
                 for p in PHASES}
        cpu = json.loads(cpu_json.read_text())["groups"]
        cpu_json.unlink()
        busy = "; ".join(f"{g} {e['cores']:.2f}" for g, e in list(cpu.items())[:5])
        gpu = d.get("folio_step_backend_seconds_total", 0) / steps * 1e3
        rows.append((fe, toks / secs, steps / secs, toks / steps, gpu, phase, busy))
    body.unlink(missing_ok=True)
    print(f"\nServing path, {streams} streams x {tokens} tokens ({requests} requests, h2load), "
          f"folio serve {' '.join(engine)}, {os.cpu_count()} cores")
    print("| frontends | events/s | steps/s | tokens/step | GPU ms/step | " +
          " | ".join(f"{p} ms/step" for p in PHASES) + " | CPU: cores by process |")
    print("|---" * (6 + len(PHASES)) + "|")
    for fe, ev, sps, tps, gpu, phase, busy in rows:
        cells = " | ".join(f"{phase[p]:.3f}" for p in PHASES)
        print(f"| {fe} | {ev:,.0f} | {sps:,.0f} | {tps:.0f} | {gpu:.3f} | {cells} | {busy} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", default="1,8,64")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--wide", type=int, default=0, help="h2load with this many streams")
    ap.add_argument("--frontends", default="1,2", help="with --wide: frontend counts to try")
    ap.add_argument("--requests", type=int, default=0, help="with --wide (default 4 x --wide)")
    ap.add_argument("--serve-args", default=None,
                    help="with --wide: folio serve's model flags instead of the simulated worker, "
                         "e.g. '--backend cuda' (the default model) on the GPU machine")
    args = ap.parse_args()
    if args.wide:
        engine = shlex.split(args.serve_args) if args.serve_args is not None else SIMULATED
        wide(args.wide, [int(x) for x in args.frontends.split(",")], args.tokens,
             args.requests or 4 * args.wide, engine)
        return

    port = free_port()
    server = start_server(port, "--frontends", "1", "--max-num-seqs", "256")
    try:
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
