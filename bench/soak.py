#!/usr/bin/env python3
"""Soak: -n (10^6) short requests through `folio serve --simulate` (the scheduler's simulated
worker answering at once), from client processes that mix well-behaved keep-alive requests with
clients that disconnect mid-request, send garbage (random bytes, broken JSON, broken HTTP, a
body cut short), and open HTTP/2 streams (h2c) and complete them or reset them.

At the end, with the server idle, it checks and prints (a short table last):
  - every counter reconciles: submitted = stop + length + abort + error + rejected (the
    frontend's counters), nothing running, waiting or holding KV blocks;
  - no client request hung (each got its response, or its connection closed for garbage);
  - shm segments and open file descriptors of every process back to their count at the start;
  - RSS of every process within 10% of the start (measured after a warm-up of 1% of the
    requests, at least 20,000, so that allocator arenas, the prefix-cache table and pools have
    reached their working size: the scheduler's grows from 8 to 15 MiB over the first 20,000
    and then stays there), both taken 12 s after the server went idle.
Bounded by --max-seconds (default 1500): if the time runs out first, the run stops there and
says how many requests it sent. Traffic goes to 127.0.0.1 only.

    python3 bench/soak.py [--build build-cpu] [-n 1000000] [--procs 3] [--lanes 64]
"""
import argparse
import asyncio
import json
import multiprocessing as mp
import os
import random
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import loadgen as lg  # noqa: E402

KINDS = ("normal", "stream", "disconnect", "garbage", "h2", "h2_reset")
WEIGHTS = (70, 15, 5, 4, 3, 3)
GARBAGE = [
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(64)),  # a TLS hello
    b"GET / HTTP/9.9\r\n\r\n",
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 30\r\n\r\n{\"prompt\": \"cut",
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n{\"prompt\": [1, 2",
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 28\r\n\r\n"
    b"{\"messages\": 5, \"n\": \"x\"}   ",
    b"\x00" * 100,
    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 38\r\n\r\n"
    b"{\"prompt\": \"a\\u0000b\", \"max_tokens\": 2}",
]


# ---- a minimal h2c client (prior knowledge): enough to send one request and read or reset it

def h2_frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream) + payload


def hpack_literal(name, value):
    def hint(n):  # 7-bit prefix integer, no Huffman
        if n < 127:
            return bytes([n])
        out, n = bytearray([127]), n - 127
        while n >= 128:
            out.append(n % 128 + 128)
            n //= 128
        return bytes(out + bytes([n]))
    return b"\x00" + hint(len(name)) + name + hint(len(value)) + value


def h2_request(port, body):
    hdrs = b"".join(hpack_literal(k, v) for k, v in (
        (b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/v1/completions"),
        (b":authority", f"127.0.0.1:{port}".encode()), (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode())))
    return (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0) + h2_frame(1, 4, 1, hdrs) +
            h2_frame(0, 1, 1, body))


async def h2_exchange(port, body, reset):
    """'ok' when stream 1 got :status 200 and its END_STREAM (or, with reset, was reset after
    its first frame back); 'status' for another status; raises on a broken connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(h2_request(port, body))
        status_ok = None
        while True:
            head = await reader.readexactly(9)
            length = int.from_bytes(head[:3], "big")
            ftype, flags, stream = head[3], head[4], int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            payload = await reader.readexactly(length)
            if ftype == 4 and not flags & 1:
                writer.write(h2_frame(4, 1, 0))  # SETTINGS ACK
            if ftype == 7:
                return "goaway"
            if stream != 1:
                continue
            if ftype == 3:
                return "reset-by-server"
            if ftype == 1:
                status_ok = payload[:1] == b"\x88"  # HPACK static index 8: ":status 200"
            if reset and ftype in (0, 1):
                writer.write(h2_frame(3, 0, 1, struct.pack(">I", 8)))  # RST_STREAM CANCEL
                await writer.drain()
                return "ok"
            if flags & 1 and ftype in (0, 1):
                return "ok" if status_ok else "status"
    finally:
        writer.close()


# ---- one client process

# h2o closes a keep-alive connection idle for 10 s; a lane that spent that long on another
# kind of client (a garbage one waits up to 10 s) opens a new one rather than race the close,
# as HTTP clients' pools do.
KEEPALIVE_IDLE_S = 5


async def lane(port, rng, counts, stop_at, deadline, sent):
    reader = writer = None
    last_used = 0.0
    while sent[0] < stop_at and time.monotonic() < deadline:
        sent[0] += 1
        kind = rng.choices(KINDS, WEIGHTS)[0]
        if writer and kind in ("normal", "stream") and time.monotonic() - last_used > \
                KEEPALIVE_IDLE_S:
            writer.close()
            reader = writer = None
        counts[kind + ".sent"] = counts.get(kind + ".sent", 0) + 1
        try:
            async with asyncio.timeout(30):
                outcome = await one(port, rng, kind, reader, writer)
                if isinstance(outcome, tuple):
                    outcome, reader, writer = outcome
                    last_used = time.monotonic()
        except TimeoutError:
            outcome = "hung"
        except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as e:
            outcome = "conn-error:" + type(e).__name__
        if outcome.startswith(("hung", "conn-error")) and kind in ("normal", "stream"):
            if writer:
                writer.close()
            reader = writer = None
        key = f"{kind}.{outcome}"
        counts[key] = counts.get(key, 0) + 1
    if writer:
        writer.close()


async def one(port, rng, kind, reader, writer):
    if kind in ("normal", "stream"):
        if writer is None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        body = lg.completion_body(prompt=f"soak {rng.randrange(1000)}",
                                  max_tokens=rng.randint(1, 6), stream=kind == "stream")
        writer.write(lg.request_bytes(body))
        status, headers, data = await lg.read_response(reader)
        if status == 200 and kind == "stream" and not data.rstrip().endswith(b"data: [DONE]"):
            return "cut", reader, writer
        if headers.get("connection", "").lower() == "close":
            writer.close()
            reader = writer = None
        return str(status), reader, writer
    if kind == "disconnect":
        r, w = await asyncio.open_connection("127.0.0.1", port)
        body = lg.completion_body(max_tokens=rng.randint(20, 200), stream=rng.random() < 0.5)
        w.write(lg.request_bytes(body))
        await w.drain()
        await asyncio.sleep(rng.random() * 0.02)
        w.close()
        return "closed"
    if kind == "garbage":
        r, w = await asyncio.open_connection("127.0.0.1", port)
        try:
            g = rng.choice(GARBAGE)
            w.write(g if rng.random() < 0.8 else g[: rng.randrange(1, len(g))])
            if g.startswith(b"POST") and rng.random() < 0.5:
                w.write_eof()
            try:
                async with asyncio.timeout(10):
                    data = await r.read(4096)
            except TimeoutError:
                return "no-answer"  # h2o waits for the rest of a cut body: fine, closed below
            return data[9:12].decode(errors="replace") if data.startswith(b"HTTP/1.1") else \
                ("closed" if not data else "other")
        finally:
            w.close()
    body = lg.completion_body(max_tokens=rng.randint(2, 40), stream=True)
    return await h2_exchange(port, body, reset=kind == "h2_reset")


def client_proc(port, n, lanes, seed, deadline, out_q):
    counts, sent = {}, [0]
    rng = random.Random(seed)

    async def main():
        await asyncio.gather(*(lane(port, random.Random(rng.random()), counts, n, deadline, sent)
                               for _ in range(lanes)))

    asyncio.run(main())
    out_q.put(counts)


def run_clients(port, n, procs, lanes, seed, deadline):
    q = mp.Queue()
    ps = [mp.Process(target=client_proc,
                     args=(port, n // procs + (i < n % procs), lanes, seed + i, deadline, q))
          for i in range(procs)]
    for p in ps:
        p.start()
    total = {}
    for _ in ps:
        for k, v in q.get().items():
            total[k] = total.get(k, 0) + v
    for p in ps:
        p.join()
    return total


# ---- the server's state

def snapshot(server):
    pids = server.pids()
    names = lg.label(pids)
    return {names[p]: {"rss": lg.rss_kib(p), "fds": lg.fd_count(p), "pid": p} for p in pids}, \
        lg.shm_count(server.proc.pid)


# jemalloc returns freed pages to the system after its decay time (10 s by default): both
# snapshots are taken that long after the server went idle, so they compare like with like.
SETTLE_S = 12


def wait_idle(port, timeout=60):
    deadline = time.time() + timeout
    m = {}
    while time.time() < deadline:
        m = lg.metrics(port)
        if (m.get("folio_requests_in_flight") == 0 and m.get("folio_num_requests_running") == 0
                and m.get("folio_num_requests_waiting") == 0 and m.get("folio_kv_blocks_used") == 0):
            return m, True
        time.sleep(0.5)
    return m, False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.environ.get("FOLIO_BUILD", "build-cpu"))
    ap.add_argument("-n", type=int, default=1_000_000)
    ap.add_argument("--procs", type=int, default=3)
    ap.add_argument("--lanes", type=int, default=64, help="concurrent clients per process")
    ap.add_argument("--max-seconds", type=float, default=1500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log", default="/tmp/folio-soak.log")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    t_start = time.time()

    server = lg.Server(a.build, ["--simulate", "--sim-time-scale", "0", "--frontends", "1"],
                       a.log)
    try:
        server.wait_healthy()
        port = server.port
        warm = max(20000, a.n // 100)
        run_clients(port, warm, a.procs, a.lanes, a.seed + 1000, time.monotonic() + 300)
        m0, idle0 = wait_idle(port)
        time.sleep(SETTLE_S)
        start, shm0 = snapshot(server)
        t0 = time.monotonic()
        budget = a.max_seconds - (time.time() - t_start) - 60
        counts = run_clients(port, a.n, a.procs, a.lanes, a.seed, t0 + budget)
        elapsed = time.monotonic() - t0
        time.sleep(1)
        m1, idle1 = wait_idle(port)
        time.sleep(SETTLE_S)
        end, shm1 = snapshot(server)
    finally:
        rc = server.stop()

    sent = sum(v for k, v in counts.items() if k.endswith(".sent"))
    d = {k: m1.get(k, 0) - m0.get(k, 0) for k in m1}
    fin = {r: d.get(f'folio_requests_finished_total{{reason="{r}"}}', 0)
           for r in ("stop", "length", "abort", "error", "rejected")}
    submitted = d.get("folio_requests_submitted_total", 0)
    hung = sum(v for k, v in counts.items() if k.endswith(".hung"))
    bad_normal = sum(v for k, v in counts.items()
                     if k.split(".")[0] in ("normal", "stream") and k.split(".")[1] not in
                     ("sent", "200", "429"))
    bad_h2 = sum(v for k, v in counts.items()
                 if k.split(".")[0] in ("h2", "h2_reset") and k.split(".")[1] not in ("sent", "ok"))

    rows = []
    for name in sorted(set(start) | set(end)):
        s, e = start.get(name, {}), end.get(name, {})
        rows.append([name, f"{(s.get('rss') or 0) / 1024:.1f}", f"{(e.get('rss') or 0) / 1024:.1f}",
                     s.get("fds"), e.get("fds"), "same" if s.get("pid") == e.get("pid") else
                     "RESTARTED"])
    rss_ok = all(start.get(n, {}).get("rss") and end.get(n, {}).get("rss") and
                 abs(end[n]["rss"] - start[n]["rss"]) <= 0.10 * start[n]["rss"] for n in start)
    checks = {
        f"{sent} requests sent" + ("" if sent >= a.n else f" (of {a.n}: time ran out)"):
            sent >= a.n,
        "idle at the end (nothing in flight, running, waiting; 0 KV blocks)": idle0 and idle1,
        f"submitted {submitted:.0f} = stop+length+abort+error+rejected {sum(fin.values()):.0f}":
            submitted == sum(fin.values()),
        "no client request hung": hung == 0,
        "well-behaved HTTP/1.1 requests: all 200 or 429": bad_normal == 0,
        "h2 streams: completed or reset as asked": bad_h2 == 0,
        f"shm segments back to the start ({shm0} -> {shm1})": shm0 == shm1,
        "open fds of every process back to the start":
            all(start[n]["fds"] == end.get(n, {}).get("fds") for n in start),
        "RSS of every process within 10% of the start": rss_ok,
        "no process restarted": all(r[5] == "same" for r in rows),
        "clean stop (exit 0)": rc == 0,
    }
    print(f"soak: {sent} requests in {elapsed:.0f} s ({sent / max(elapsed, 1e-9):.0f} req/s), "
          f"{a.procs} client processes x {a.lanes} lanes, after a warm-up of {warm}")
    print()
    print(lg.table([[k.split(".")[0], k.split(".")[1], v] for k, v in sorted(counts.items())],
                   ["client kind", "outcome", "count"]))
    print()
    print(lg.table([[k, f"{v:.0f}"] for k, v in [("submitted", submitted), *fin.items(),
                    ("client disconnects", d.get("folio_client_disconnects_total", 0))]],
                   ["frontend counter (delta)", "value"]))
    print()
    print(lg.table(rows, ["process", "RSS start MiB", "RSS end MiB", "fds start", "fds end",
                          "pid"]))
    print()
    print(lg.table([[c, "ok" if v else "FAIL"] for c, v in checks.items()], ["check", "result"]))
    if a.json:
        Path(a.json).write_text(json.dumps({"counts": counts, "metrics_delta": d,
                                            "checks": checks, "processes": rows}, indent=1))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
