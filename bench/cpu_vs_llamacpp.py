#!/usr/bin/env python3
"""Folio's CPU backend against llama.cpp's server (llama-cpp-python[server]) on the same GGUF file
and the same thread count, on this machine, measured alternately (folio, llama.cpp, folio,
llama.cpp, ...) because the machine is shared and noisy. bench/cpu_vs_llamacpp.sh builds the
environments and calls this.

For each server and round:
  first answer: seconds from the server's start to the first successful completion (polled);
  decode tok/s at batch 1: a short prompt, 129 greedy tokens with EOS banned (logit_bias) minus
      the same with 1 token, so that start-up and prefill cancel: 128 / (t129 - t1);
  prefill tok/s: a fresh prompt of about 500 tokens (random words, so no prefix cache helps),
      1 token out: usage.prompt_tokens / time;
  GuideLLM: a constant-rate run (synthetic prompts of PROMPT_TOKENS, OUTPUT_TOKENS out), its
      output tok/s and TTFT p50.
Prints one RESULT line per server and round (with the 1-minute load average at the round's start
and end: the machine is shared, and a loaded round says little), then the medians, as a markdown
table.
"""

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import Bench  # noqa: E402  (GuideLLM's JSON, read as bench/report.py reads it)

EOS_BAN = {"0": -100, "1": -100, "2": -100}  # SmolLM2's <|endoftext|>, <|im_start|>, <|im_end|>
WORDS = ("river stone lamp garden violet quiet number window orange travel music paper "
         "forest engine candle silver market winter pocket mirror thunder ladder honey "
         "basket planet rocket pillow kettle marble tunnel").split()


def post(url, body, timeout=600):
    t = time.monotonic()
    r = httpx.post(url + "/v1/completions", json=body, timeout=timeout)
    r.raise_for_status()
    return time.monotonic() - t, r.json()


def wait_first_answer(url, proc, limit=120):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            r = httpx.post(url + "/v1/completions", timeout=30,
                           json={"prompt": "Hello", "max_tokens": 1})
            if r.status_code == 200:
                return time.monotonic() - t0
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError("no answer within the limit")


def decode_tok_s(url):
    body = {"prompt": "Once upon a time, in a small village,", "temperature": 0,
            "logit_bias": EOS_BAN}
    t1, _ = post(url, dict(body, max_tokens=1))
    t129, r = post(url, dict(body, max_tokens=129))
    n = r["usage"]["completion_tokens"]
    assert n == 129, f"{n} tokens, not 129"
    return 128 / (t129 - t1)


def prefill_tok_s(url, rng):
    prompt = " ".join(rng.choice(WORDS) for _ in range(480))
    t, r = post(url, {"prompt": prompt, "max_tokens": 1, "temperature": 0})
    return r["usage"]["prompt_tokens"] / t, r["usage"]["prompt_tokens"]


def guidellm(url, a, out):
    cmd = [a.guidellm_python, "-m", "guidellm", "run",
           # llama-cpp-python's server has no /health, GuideLLM's check: skipped for both.
           "--backend", f"kind=openai_http,target={url},validate_backend=false,"
                        f"request_format={a.request_format}",
           "--profile", f"kind=constant,rate={a.rate}",
           "--constraint", f"kind=max_requests,count={a.requests}",
           "--data", f"kind=synthetic_text,prompt_tokens={a.prompt_tokens},"
                     f"output_tokens={a.output_tokens}",
           "--tokenizer", f"kind=huggingface_auto,model={a.tokenizer}",
           "--output", f"kind=json,path={out}", "--disable-progress"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(f"guidellm failed: {p.stderr[-2000:]}")
    b = Bench(json.loads(Path(out).read_text())["benchmarks"][0])
    return b.out_tok_s, b.ttft["p50"], b.completed, b.errored


def server_cmd(name, a, port):
    if name == "folio":
        return [a.folio, "serve", "--model", a.model, "--port", str(port), "--host", "127.0.0.1",
                "--threads", str(a.threads)]
    return [a.llama_python, "-m", "llama_cpp.server", "--model", a.model, "--port", str(port),
            "--host", "127.0.0.1", "--n_threads", str(a.threads), "--n_threads_batch",
            str(a.threads), "--n_ctx", "2048"]


def run_round(name, a, rnd, out_dir, rng):
    port = a.port
    url = f"http://127.0.0.1:{port}"
    load_start = os.getloadavg()[0]
    log = open(out_dir / f"{name}-{rnd}.log", "w")
    proc = subprocess.Popen(server_cmd(name, a, port), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        first = wait_first_answer(url, proc)
        post(url, {"prompt": "Warm up", "max_tokens": 8})
        dec = decode_tok_s(url)
        pre, ptoks = prefill_tok_s(url, rng)
        gl = (None, None, None, None)
        if a.requests > 0:
            try:
                gl = guidellm(url, a, out_dir / f"{name}-{rnd}-guidellm.json")
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                print(f"{name} round {rnd}: {str(e)[-600:]}", file=sys.stderr, flush=True)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    r = {"server": name, "round": rnd, "first_answer_s": first, "decode_tok_s": dec,
         "prefill_tok_s": pre, "prefill_tokens": ptoks, "guidellm_out_tok_s": gl[0],
         "guidellm_ttft_p50_ms": gl[1], "guidellm_ok": gl[2], "guidellm_errors": gl[3],
         "load_start": load_start, "load_end": os.getloadavg()[0]}
    print("RESULT " + " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                               for k, v in r.items()), flush=True)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="the GGUF file both servers load")
    ap.add_argument("--folio", required=True, help="the folio binary")
    ap.add_argument("--llama-python", help="python with llama_cpp.server")
    ap.add_argument("--guidellm-python", help="python with guidellm 0.8.1")
    ap.add_argument("--tokenizer", required=True, help="GuideLLM's tokenizer for synthetic data")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rate", type=float, default=0.5, help="GuideLLM constant rate, req/s")
    ap.add_argument("--requests", type=int, default=20, help="GuideLLM requests (0: no run)")
    ap.add_argument("--request-format", default="/v1/completions",
                    help="GuideLLM's route (its 0.8.1 parser reads llama-cpp-python's streamed "
                         "chat chunks as empty)")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--output-tokens", type=int, default=64)
    ap.add_argument("--port", type=int, default=18431)
    ap.add_argument("--out", default="build-llamacpp/results")
    ap.add_argument("--servers", default="folio,llama.cpp", help="which, in this order")
    a = ap.parse_args()
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(58)
    rows = []
    servers = a.servers.split(",")
    for rnd in range(a.rounds):
        for name in servers:
            rows.append(run_round(name, a, rnd, out_dir, rng))
    keys = ["decode_tok_s", "prefill_tok_s", "guidellm_out_tok_s", "guidellm_ttft_p50_ms",
            "first_answer_s"]
    loads = [r[k] for r in rows for k in ("load_start", "load_end")]
    print(f"\n{a.threads} threads, {a.rounds} rounds alternating, medians; GuideLLM constant "
          f"{a.rate} req/s, {a.requests} requests of {a.prompt_tokens} prompt / "
          f"{a.output_tokens} output tokens; 1-minute load average {min(loads):.2f}-"
          f"{max(loads):.2f}\n")
    print("| server | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 1) + "|")
    for name in servers:
        vals = []
        for k in keys:
            xs = [r[k] for r in rows if r["server"] == name and r[k] is not None]
            vals.append(f"{statistics.median(xs):.2f}" if xs else "-")
        print(f"| {name} | " + " | ".join(vals) + " |")


if __name__ == "__main__":
    main()
