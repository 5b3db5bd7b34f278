#!/usr/bin/env python3
"""Overload: `folio serve` on the simulated worker (a cost model slowed down so that the
sustainable rate is a few requests a second) is measured at its sustainable rate, then sent
--factor (20) times that rate, open loop, for --seconds (60); then the sustainable rate again.

Checked and printed (a short table last):
  - once the queue (--max-waiting-requests) is full, the excess gets 429 with Retry-After;
  - admitted requests keep a bounded latency (p99 under the queue's drain time plus service);
  - the RSS of every process, sampled each second (a table with a row every 5 s and the
    min/max of each process over the whole run);
  - normal service right after: the same latency as before the overload, all 200.
Exit status 0 when every check holds. Traffic goes to 127.0.0.1 only; the run is bounded by
--seconds plus about 40 s.

    python3 bench/overload.py [--build build-cpu] [--seconds 60] [--factor 20]
"""
import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import loadgen as lg  # noqa: E402

SLOTS = 4           # --max-num-seqs
MAX_TOKENS = 32     # per request
QUEUE = 32          # --max-waiting-requests


async def steady(port, rate, seconds, body):
    """Open-loop arrivals at rate for seconds; the results of every request."""
    tasks, t0 = [], time.monotonic()
    n = int(rate * seconds)
    for i in range(n):
        delay = t0 + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(lg.one_request(port, body, timeout=60)))
    return await asyncio.gather(*tasks)


async def measure_capacity(port, body, seconds=6):
    """Closed loop with twice the slots busy: completed requests per second."""
    done, stop = 0, time.monotonic() + seconds

    async def loop():
        nonlocal done
        while time.monotonic() < stop:
            st, _, _, _ = await lg.one_request(port, body)
            done += st == 200

    await asyncio.gather(*(loop() for _ in range(SLOTS * 2)))
    return done / seconds


def summarize(name, results):
    ok = [r for r in results if r[0] == 200]
    s429 = [r for r in results if r[0] == 429]
    with_retry = sum(1 for r in s429 if r[1].get("retry-after", "").isdigit())
    other = len(results) - len(ok) - len(s429)
    lat = [r[3] for r in ok]
    return {"phase": name, "sent": len(results), "200": len(ok), "429": len(s429),
            "429 w/ Retry-After": with_retry, "other": other,
            "p50 s": f"{lg.percentile(lat, 0.5):.2f}", "p99 s": f"{lg.percentile(lat, 0.99):.2f}",
            "max s": f"{max(lat) if lat else float('nan'):.2f}"}


async def sample_rss(server, stop, samples):
    names = lg.label(server.pids())
    while not stop.is_set():
        row = {"t": time.monotonic()}
        for pid, name in names.items():
            row[name] = lg.rss_kib(pid)
        samples.append(row)
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except TimeoutError:
            pass


async def main_async(a, server):
    port = server.port
    body = lg.completion_body(max_tokens=MAX_TOKENS)
    rate = a.rate or await measure_capacity(port, body)
    rate = max(rate * 0.8, 0.5)  # sustainable: a little under the measured capacity
    stop, samples = asyncio.Event(), []
    sampler = asyncio.create_task(sample_rss(server, stop, samples))
    before = await steady(port, rate, 8, body)
    over = await steady(port, rate * a.factor, a.seconds, body)
    await asyncio.sleep(2)  # the last admitted requests have ended; connections closed
    after = await steady(port, rate, 8, body)
    stop.set()
    await sampler
    return rate, before, over, after, samples


def rss_tables(samples):
    if not samples:
        return "", {}
    t0 = samples[0]["t"]
    names = [k for k in samples[0] if k != "t"]
    rows = [[f"{s['t'] - t0:.0f}"] + [f"{(s.get(n) or 0) / 1024:.1f}" for n in names]
            for i, s in enumerate(samples) if i % 5 == 0 or i == len(samples) - 1]
    per = {}
    for n in names:
        xs = [s[n] for s in samples if s.get(n)]
        per[n] = (min(xs), max(xs), xs[0], xs[-1]) if xs else (0, 0, 0, 0)
    summary = [[n, f"{lo / 1024:.1f}", f"{hi / 1024:.1f}", f"{first / 1024:.1f}",
                f"{last / 1024:.1f}"] for n, (lo, hi, first, last) in per.items()]
    return (lg.table(rows, ["t s"] + [n + " MiB" for n in names]) + "\n\n" +
            lg.table(summary, ["process", "min MiB", "max MiB", "first MiB", "last MiB"]), per)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.environ.get("FOLIO_BUILD", "build-cpu"))
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--factor", type=float, default=20)
    ap.add_argument("--rate", type=float, default=0, help="sustainable rate (default: measured)")
    ap.add_argument("--log", default="/tmp/folio-overload.log")
    a = ap.parse_args()

    server = lg.Server(a.build, ["--simulate", "--sim-time-scale", "20", "--frontends", "2",
                                 "--max-num-seqs", str(SLOTS),
                                 "--max-waiting-requests", str(QUEUE)], a.log)
    try:
        server.wait_healthy()
        rate, before, over, after, samples = asyncio.run(main_async(a, server))
    finally:
        rc = server.stop()
    phases = [summarize("before", before), summarize(f"{a.factor:g}x", over),
              summarize("after", after)]
    rss_text, per = rss_tables(samples)
    print(f"overload: sustainable rate {rate:.1f} req/s ({SLOTS} slots, {MAX_TOKENS} tokens, "
          f"queue {QUEUE}), {a.factor:g}x = {rate * a.factor:.0f} req/s for {a.seconds:g} s")
    print("\nRSS of every process, sampled each second (a row every 5 s):\n")
    print(rss_text)
    # Admitted latency bound: a full queue drains at the sustainable rate, plus one service.
    service = float(phases[0]["p50 s"])
    bound = QUEUE / rate + 3 * service + 1
    o = phases[1]
    checks = {
        "429 once the queue is full": o["429"] > 0,
        "every 429 has Retry-After": o["429"] == o["429 w/ Retry-After"],
        "no failed or hung request": all(p["other"] == 0 for p in phases),
        f"admitted p99 under {bound:.1f} s": float(o["p99 s"]) < bound,
        "all 200 right after": phases[2]["200"] == phases[2]["sent"],
        "latency after within 1.5x of before (+0.2 s)":
            float(phases[2]["p99 s"]) <= 1.5 * float(phases[0]["p99 s"]) + 0.2,
        "RSS of each process within +20% (+8 MiB) of its first sample":
            all(last <= first * 1.2 + 8192 for _, _, first, last in per.values()),
        "clean stop (exit 0)": rc == 0,
    }
    print()
    print(lg.table([[c, "ok" if v else "FAIL"] for c, v in checks.items()], ["check", "result"]))
    print()
    print(lg.table([list(p.values()) for p in phases], list(phases[0].keys())))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
