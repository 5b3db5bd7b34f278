#!/usr/bin/env python3
"""Speculative decoding on the host: `folio serve` with and without `--speculative-config`, one
request at a time, over the first prompts of the ShareGPT workload and of the input-grounded one
(bench/make_grounded_workload.py). Each request is seeded, so both servers must stream the very
same tokens (checked: speculation is exact); what differs is the time between them. Prints per
server and workload: ITL mean and p50, decode tokens a second, TTFT p50, and from /metrics the
drafts' acceptance and the tokens a verify step yields.

    python3 bench/spec_bench.py [--build build-cpu] [--model GGUF] [--requests 8]
                                [--max-tokens 128] [--threads 2] [--temperature 1]
                                [--spec JSON]

The GPU figures of record come from bench/gpu/guidellm_bench.sh (workloads rate2 and
grounded-rate2, servers folio and 'folio-ngram=folio --speculative-config ...').
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import loadgen as lg  # noqa: E402

REPO = lg.REPO
WORKLOADS = {
    "sharegpt": REPO / "assets/data/sharegpt/workload_sharegpt_1000.jsonl",
    "grounded": REPO / "assets/data/grounded/workload_grounded_300.jsonl",
}
SPEC = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4,
        "prompt_lookup_min": 2}
SPEC_METRICS = ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
                "vllm:spec_decode_num_accepted_tokens_total")


def counter(metrics, name):
    """A counter's value summed over its labels."""
    return sum(v for k, v in metrics.items() if k == name or k.startswith(name + "{"))


def stream(port, model, prompt, max_tokens, seed, temperature=1.0):
    """(token ids... as text pieces, TTFT s, [gaps between pieces in s]) of one streamed chat."""
    body = {"model": model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "ignore_eos": True, "stream": True, "seed": seed,
            "temperature": temperature, "stream_options": {"include_usage": True}}
    pieces, times, t0 = [], [], time.monotonic()
    with httpx.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions", json=body,
                      timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            for ch in ev.get("choices", []):
                text = ch.get("delta", {}).get("content")
                if text:
                    pieces.append(text)
                    times.append(time.monotonic())
    gaps = [b - a for a, b in zip(times, times[1:])]
    return pieces, (times[0] - t0 if times else float("nan")), gaps


def serve_and_measure(a, name, spec, prompts):
    args = ["--model", str(a.model), "--backend", a.backend, "--threads", str(a.threads)]
    if spec:
        args += ["--speculative-config", json.dumps(spec)]
    server = lg.Server(a.build, args, Path(a.logs) / f"{name}.log")
    try:
        server.wait_healthy(timeout=300)
        model = httpx.get(f"http://127.0.0.1:{server.port}/v1/models").json()["data"][0]["id"]
        stream(server.port, model, "Hello", 8, 1)  # the whole path warm
        rows, texts = [], {}
        for wl, items in prompts.items():
            before = lg.metrics(server.port)
            ttfts, gaps, n_tok, decode_s = [], [], 0, 0.0
            for i, (prompt, max_tokens) in enumerate(items):
                pieces, ttft, g = stream(server.port, model, prompt, max_tokens, 1000 + i,
                                         a.temperature)
                texts[(wl, i)] = "".join(pieces)
                ttfts.append(ttft)
                gaps += g
                n_tok += len(pieces)
                decode_s += sum(g)
            after = lg.metrics(server.port)
            d = [counter(after, m) - counter(before, m) for m in SPEC_METRICS]
            rows.append({"server": name, "workload": wl, "requests": len(items),
                         "pieces": n_tok, "itl_mean": 1e3 * sum(gaps) / max(1, len(gaps)),
                         "itl_p50": 1e3 * lg.percentile(gaps, 0.5),
                         "decode_tps": (n_tok - len(items)) / decode_s if decode_s else 0,
                         "ttft_p50": 1e3 * lg.percentile(ttfts, 0.5),
                         "drafts": d[0], "accept": d[2] / d[1] if d[1] else None,
                         "per_verify": 1 + d[2] / d[0] if d[0] else None})
        return rows, texts
    finally:
        server.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.environ.get("FOLIO_BUILD", str(REPO / "build-cpu")))
    ap.add_argument("--model", default=str(REPO / "models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--spec", default=json.dumps(SPEC))
    ap.add_argument("--logs", default="/tmp/spec-bench")
    a = ap.parse_args()
    Path(a.logs).mkdir(parents=True, exist_ok=True)
    prompts = {}
    for wl, path in WORKLOADS.items():
        rows = [json.loads(x) for x in open(path) if x.strip()][:a.requests]
        prompts[wl] = [(r["prompt"], min(a.max_tokens, r["output_tokens_count"])) for r in rows]
    rows_off, texts_off = serve_and_measure(a, "folio", None, prompts)
    rows_on, texts_on = serve_and_measure(a, "folio-ngram", json.loads(a.spec), prompts)
    same = sum(texts_off[k] == texts_on[k] for k in texts_off)
    out = []
    for r in rows_off + rows_on:
        base = next(x for x in rows_off if x["workload"] == r["workload"])
        out.append([r["server"], r["workload"], r["requests"], r["pieces"],
                    f"{r['itl_mean']:.2f}", f"{r['itl_p50']:.2f}", f"{r['decode_tps']:.1f}",
                    f"{base['itl_mean'] / r['itl_mean']:.2f}x", f"{r['ttft_p50']:.0f}",
                    f"{r['drafts']:.0f}",
                    "-" if r["accept"] is None else f"{100 * r['accept']:.0f}%",
                    "-" if r["per_verify"] is None else f"{r['per_verify']:.2f}"])
    print(f"spec_bench: {a.model} on {a.backend}, {a.threads} threads, seeded requests one at a "
          f"time, temperature {a.temperature:g}, max_tokens <= {a.max_tokens}, ignore_eos; speculation {a.spec}")
    print(lg.table(out, ["server", "workload", "requests", "pieces", "ITL mean ms", "ITL p50 ms",
                         "decode tok/s", "ITL gain", "TTFT p50 ms", "verify steps", "accepted",
                         "tokens/verify"]))
    print(f"outputs equal with and without speculation: {same}/{len(texts_off)}")
    sys.exit(0 if same == len(texts_off) else 1)


if __name__ == "__main__":
    main()
