"""Encode throughput on the ShareGPT prompts: Folio's tokenizer (bench/tokenizer_bench.c)
against Hugging Face `tokenizers` in the same run, one thread each, for each real tokenizer:
Llama-2, Llama-3, Qwen2 and SmolLM2 (tests/tokenizer_refs.py builds them; SmolLM2 is read from its
GGUF by Folio and from its converted tokenizer.json by HF).

    python3 bench/tokenizer_bench.py [--rounds N] [--tokenizers llama2,llama3,qwen2,smollm2]
                                     [--prompts FILE]

FOLIO_BUILD names the build directory (default ./build). HF runs with
RAYON_NUM_THREADS=1 and TOKENIZERS_PARALLELISM=false, set before the import,
so encode_batch uses one thread; plain sequential encode() is reported too.
Each figure is the best of N rounds over all prompts, in MB/s of UTF-8 text."""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import Tokenizer  # noqa: E402  (after the thread settings)

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import tokenizer_refs  # noqa: E402
ASSETS = ROOT / "assets"
BUILD = pathlib.Path(os.environ.get("FOLIO_BUILD", ROOT / "build"))


def best_of(rounds, fn):
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_one(name, prompts, nbytes, args):
    """Rows (label, seconds, tokens) for one tokenizer."""
    ref = tokenizer_refs.folder(name)
    model = tokenizer_refs.smollm2_gguf() if name == "smollm2" else ref
    out = subprocess.run(
        [str(BUILD / "bin" / "tokenizer_bench"), str(model), args.prompts, str(args.rounds)],
        check=True, capture_output=True, text=True).stdout
    folio = json.loads(out)
    if folio["bytes"] != nbytes:
        sys.exit(f"byte counts differ: folio {folio['bytes']}, python {nbytes}")
    hf = Tokenizer.from_file(str(ref / "tokenizer.json"))
    hf_tokens = sum(len(e.ids) for e in hf.encode_batch(prompts))
    seq = best_of(args.rounds, lambda: [hf.encode(p) for p in prompts])
    batch = best_of(args.rounds, lambda: hf.encode_batch(prompts))
    if folio["tokens"] != hf_tokens:
        print(f"warning: {name}: token counts differ (folio {folio['tokens']}, HF {hf_tokens})")
    return [("folio (C, 1 thread)", folio["best_s"], folio["tokens"]),
            ("HF encode_batch (1 thread)", batch, hf_tokens),
            ("HF encode, sequential", seq, hf_tokens)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tokenizers", default="llama2,llama3,qwen2,smollm2")
    ap.add_argument("--prompts", default=str(
        ASSETS / "data" / "sharegpt" / "sharegpt_v3_first_turns_1000.json"))
    args = ap.parse_args()

    with open(args.prompts) as f:
        prompts = [row["conversations"][0]["value"] for row in json.load(f)]
    nbytes = sum(len(p.encode()) for p in prompts)
    print(f"{len(prompts)} prompts, {nbytes / 1e6:.2f} MB, best of {args.rounds} rounds")
    print(f"{'tokenizer':10s} {'':28s} {'MB/s':>8s} {'tokens/s':>12s} {'vs HF batch':>12s}")
    for name in args.tokenizers.split(","):
        rows = bench_one(name, prompts, nbytes, args)
        batch = rows[1][1]
        for label, secs, tokens in rows:
            print(f"{name:10s} {label:28s} {nbytes / secs / 1e6:8.2f} {tokens / secs:12.0f} "
                  f"{batch / secs:11.2f}x")


if __name__ == "__main__":
    main()
