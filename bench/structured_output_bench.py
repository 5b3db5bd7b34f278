#!/usr/bin/env python3
"""What a structured output costs a stream: the same chat requests with and without a
`response_format` json_schema, streamed at a fixed concurrency, and each mode's time to first
token and inter-token latency, with the constrained outputs validated against their schemas.

    python3 bench/structured_output_bench.py --url http://127.0.0.1:8000 [--requests 64]
        [--concurrency 8] [--max-tokens 128]

The schemas are the validity suite's (tests/fixtures/grammar_schemas.py), one a request in turn;
the prompts ask for the object the schema describes. Unconstrained requests set ignore_eos, so
every stream runs max_tokens tokens; constrained ones end where their grammar ends (or at
max_tokens). Each chunk carries continuous usage, so a gap is measured per token. Prints one table
row per mode; a GuideLLM workload with a schema a request is the issue's fuller figure.
"""
import argparse
import asyncio
import json
import pathlib
import statistics
import sys
import time

import httpx
import jsonschema

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "fixtures"))


def schemas():
    import grammar_schemas

    return list(grammar_schemas.SCHEMAS.values())


async def one(client, url, model, i, schema, max_tokens):
    body = {"model": model, "max_tokens": max_tokens, "stream": True, "temperature": 1.0,
            "seed": i, "stream_options": {"include_usage": True, "continuous_usage_stats": True},
            "messages": [{"role": "user", "content": "Answer with one JSON object: "
                          + json.dumps(schema)[:400] if schema else
                          "Tell me about the history of the printing press."}]}
    if schema is not None:
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": f"s{i}", "schema": schema}}
    else:
        body["ignore_eos"] = True
    t0 = time.perf_counter()
    stamps, text, tokens, finish = [], [], 0, None
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
        if r.status_code != 200:
            return {"error": f"{r.status_code} {(await r.aread())[:200]!r}"}
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            usage = ev.get("usage") or {}
            n = usage.get("completion_tokens", tokens)
            now = time.perf_counter()
            for ch in ev.get("choices", []):
                text.append(ch.get("delta", {}).get("content") or "")
                finish = ch.get("finish_reason") or finish
            if n > tokens:
                stamps.extend([now] * (n - tokens))
                tokens = n
    out = {"ttft": stamps[0] - t0 if stamps else None, "tokens": tokens,
           "gaps": [b - a for a, b in zip(stamps, stamps[1:]) if b > a], "text": "".join(text),
           "finish": finish}
    if schema is not None and finish == "stop":
        try:
            jsonschema.validate(json.loads(out["text"]), schema)
            out["valid"] = True
        except (ValueError, jsonschema.ValidationError):
            out["valid"] = False
    return out


async def mode(url, model, constrained, n, conc, max_tokens):
    sch = schemas()
    sem = asyncio.Semaphore(conc)
    async with httpx.AsyncClient(timeout=600) as client:
        async def run(i):
            async with sem:
                return await one(client, url, model, i, sch[i % len(sch)] if constrained else None,
                                 max_tokens)
        t0 = time.perf_counter()
        res = await asyncio.gather(*(run(i) for i in range(n)))
        wall = time.perf_counter() - t0
    return res, wall


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def row(name, res, wall):
    ok = [r for r in res if "error" not in r]
    gaps = [g for r in ok for g in r["gaps"]]
    ttft = [r["ttft"] for r in ok if r["ttft"] is not None]
    toks = sum(r["tokens"] for r in ok)
    valid = [r["valid"] for r in ok if "valid" in r]
    v = f"{sum(valid)}/{len(valid)}" if valid else "-"
    cut = sum(r["finish"] == "length" for r in ok)
    return (f"| {name} | {len(ok)}/{len(res)} | {v} | {cut} | {1e3 * statistics.median(ttft):.1f} | "
            f"{1e3 * pct(ttft, 0.99):.1f} | {1e3 * statistics.mean(gaps):.2f} | "
            f"{1e3 * statistics.median(gaps):.2f} | {1e3 * pct(gaps, 0.99):.2f} | "
            f"{toks / wall:.0f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=128)
    a = ap.parse_args()
    model = httpx.get(a.url + "/v1/models", timeout=30).json()["data"][0]["id"]
    lines = ["| mode | done | valid of those ended | cut by max_tokens | TTFT p50 (ms) | TTFT p99 | ITL mean (ms) | ITL p50 | ITL p99 "
             "| output tok/s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, constrained in (("plain", False), ("json_schema", True), ("plain again", False)):
        res, wall = asyncio.run(mode(a.url, model, constrained, a.requests, a.concurrency,
                                     a.max_tokens))
        errors = [r["error"] for r in res if "error" in r]
        if errors:
            print(f"{name}: {len(errors)} errors, e.g. {errors[0]}", file=sys.stderr)
        lines.append(row(name, res, wall))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
