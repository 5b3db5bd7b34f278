#!/usr/bin/env python3
"""Time to first token of one GuideLLM run, split at a moment of the run: the requests that started
in its first SECONDS (a fresh server's warm-up: cold prefix cache, first shapes) against the rest.

    python3 bench/ttft_split.py [--seconds S] [--over MS] RUN.json[.gz] [RUN.json[.gz] ...]

For each run prints one line: how many requests started before S, their largest TTFTs, the
p50/p99/max TTFT of the requests after, and how fast the client sent them (when the median and the
last request started, when the last one ended: a client that sends sooner makes requests queue
longer for the server's slots). With --over, a second line: the requests whose TTFT passed
MS, when they started (seconds into the run) and their prompt tokens, to tell one burst from a slow
stretch. Only the standard library.
"""

import argparse
import gzip
import json


def percentile(sorted_values, q):
    """Nearest-rank percentile (q in [0, 1]) of an ascending list."""
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def load(path):
    """The run's successful requests and the first one's start time."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    reqs = [r for b in doc["benchmarks"] for r in b["requests"]["successful"]]
    if not reqs:
        raise SystemExit(f"{path}: no successful requests")
    return reqs, min(r["request_start_time"] for r in reqs)


def slow(path, over_ms):
    """(start s into the run, TTFT ms, prompt tokens) of the requests over over_ms, by start."""
    reqs, t0 = load(path)
    return sorted((r["request_start_time"] - t0, r["time_to_first_token_ms"],
                   r.get("prompt_tokens") or 0)
                  for r in reqs if r["time_to_first_token_ms"] > over_ms)


def spread(path):
    """(median start, last start, last end), seconds into the run."""
    reqs, t0 = load(path)
    starts = sorted(r["request_start_time"] - t0 for r in reqs)
    return (percentile(starts, 0.5), starts[-1],
            max(r["request_end_time"] for r in reqs) - t0)


def split(path, seconds):
    reqs, t0 = load(path)
    early = sorted(r["time_to_first_token_ms"] for r in reqs
                   if r["request_start_time"] - t0 < seconds)
    late = sorted(r["time_to_first_token_ms"] for r in reqs
                  if r["request_start_time"] - t0 >= seconds)
    return early, late


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--over", type=float, default=None, metavar="MS")
    ap.add_argument("runs", nargs="+")
    args = ap.parse_args()
    for path in args.runs:
        early, late = split(path, args.seconds)
        top = ", ".join(f"{v:.1f}" for v in reversed(early[-5:]))
        print(f"{path}: first {args.seconds:g} s: {len(early)} requests, top TTFT ms [{top}]; "
              f"after: {len(late)} requests, TTFT p50 {percentile(late, 0.5):.1f} "
              f"p99 {percentile(late, 0.99):.1f} max {(late[-1] if late else float('nan')):.1f} ms; "
              "sent: half by {:.2f} s, all by {:.2f} s; last ended {:.2f} s".format(*spread(path)))
        if args.over is not None:
            s = slow(path, args.over)
            when = f"started {s[0][0]:.2f}-{s[-1][0]:.2f} s into the run, " if s else ""
            print(f"{path}: {len(s)} requests over {args.over:g} ms, {when}"
                  f"{sum(p for _, _, p in s)} prompt tokens in all")


if __name__ == "__main__":
    main()
