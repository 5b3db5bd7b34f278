#!/usr/bin/env python3
"""Time to first token of one GuideLLM run, split at a moment of the run: the requests that started
in its first SECONDS (a fresh server's warm-up: cold prefix cache, first shapes) against the rest.

    python3 bench/ttft_split.py [--seconds S] RUN.json[.gz] [RUN.json[.gz] ...]

For each run prints one line: how many requests started before S, their largest TTFTs, and the
p50/p99/max TTFT of the requests after. Only the standard library.
"""

import argparse
import gzip
import json


def percentile(sorted_values, q):
    """Nearest-rank percentile (q in [0, 1]) of an ascending list."""
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def split(path, seconds):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    reqs = [r for b in doc["benchmarks"] for r in b["requests"]["successful"]]
    if not reqs:
        raise SystemExit(f"{path}: no successful requests")
    t0 = min(r["request_start_time"] for r in reqs)
    early = sorted(r["time_to_first_token_ms"] for r in reqs
                   if r["request_start_time"] - t0 < seconds)
    late = sorted(r["time_to_first_token_ms"] for r in reqs
                  if r["request_start_time"] - t0 >= seconds)
    return early, late


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("runs", nargs="+")
    args = ap.parse_args()
    for path in args.runs:
        early, late = split(path, args.seconds)
        top = ", ".join(f"{v:.1f}" for v in reversed(early[-5:]))
        print(f"{path}: first {args.seconds:g} s: {len(early)} requests, top TTFT ms [{top}]; "
              f"after: {len(late)} requests, TTFT p50 {percentile(late, 0.5):.1f} "
              f"p99 {percentile(late, 0.99):.1f} max {(late[-1] if late else float('nan')):.1f} ms")


if __name__ == "__main__":
    main()
