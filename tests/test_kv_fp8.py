"""`--kv-cache-dtype fp8` (issue 55) on the CPU backend, which emulates the CUDA backend's FP8 KV
cache (K and V stored as e4m3 codes of x / scale, a scale per layer for each, read back as code
x scale), so that CI holds its numerics: SmolLM2-135M-Instruct with an fp8 cache against the
default cache of the same backend (f16 on the fast path), through tests/tools/step_driver; and
the flag end to end through `folio serve`: the startup log and /metrics say the dtype and the
block count, which doubles, and a value Folio does not know stops `folio serve` at start.

Agreement as tests/test_fp8.py measures it: over the first STEPS greedy steps of each prompt, the
default cache's tokens are fed to both (teacher forcing) and a step agrees when the fp8 cache's
top-1 is the default's."""

import re
import subprocess

import httpx
import numpy as np

from conftest import bin_path, smollm2_gguf
from smollm2_prompts import PROMPTS
from test_fp8 import STEPS, teacher_forced
from test_serve_e2e import Server, free_port

# Measured 0.926 (4 prompts x 64 steps, logits relative L2 median 0.085): e4m3's 3 mantissa
# bits move SmolLM2's scores by a few percent, and its teacher-forced steps have many near-ties
# (the fast path and the f32 reference agree 0.953, tests/test_fp8.py). Range is not the loss:
# its K and V stay below 20 (scale 1.0 leaves 41% of layer 0's values subnormal), and a scale of
# 1/16 measured 0.930. A wrong scale or a misread code falls far below this floor.
TOP1_MIN = 0.88


def test_kv_fp8_top1_agrees_with_default_cache(tmp_path):
    prompts = list(PROMPTS.values())
    _, agree, rel = teacher_forced(tmp_path, prompts, "cpu", "cpu", kv_cache_dtype="fp8")
    print(f"\nfp8 KV cache vs the default (f16) cache, {len(prompts)} prompts x {STEPS} steps: "
          f"top-1 agreement {agree.mean():.4f} (per prompt "
          f"{[round(float(a), 3) for a in agree.mean(axis=1)]}); logits relative L2 median "
          f"{np.median(rel):.4f}, max {max(rel):.4f}")
    assert agree.mean() >= TOP1_MIN
    assert np.median(rel) < 0.1


def blocks_in_log(server):
    m = re.search(r"backend ready: (\d+) KV blocks \(kv cache dtype ([^)]*)\)", server.logs())
    assert m, server.logs()
    return int(m.group(1)), m.group(2)


def test_kv_fp8_served_doubles_blocks_and_bad_dtype_refused():
    """`folio serve --kv-cache-dtype fp8` on SmolLM2: twice the blocks of the default cache in
    the same --cpu-kv-bytes, said in the startup log and in /metrics, and a greedy completion
    comes back; an unknown dtype is a startup error naming it; `folio serve --help` lists it."""
    for bad_value in ("fp16", "fp8_e5m2"):
        bad = subprocess.run([str(bin_path("folio")), "serve", "--model", str(smollm2_gguf()),
                              "--kv-cache-dtype", bad_value], capture_output=True, text=True,
                             timeout=60)
        assert bad.returncode != 0
        assert "--kv-cache-dtype" in bad.stderr and f"'{bad_value}'" in bad.stderr, bad.stderr
    help_text = subprocess.run([str(bin_path("folio")), "serve", "--help"], capture_output=True,
                               text=True, timeout=60).stdout
    assert "--kv-cache-dtype auto|fp8|fp8_e4m3" in help_text
    blocks = {}
    for dtype in ("auto", "fp8_e4m3"):
        server = Server(smollm2_gguf(), free_port(), "--kv-cache-dtype", dtype,
                        "--cpu-kv-bytes", str(64 << 20))
        try:
            server.wait_health(200)
            blocks[dtype], said = blocks_in_log(server)
            assert said == ("auto" if dtype == "auto" else "fp8 e4m3")
            text = httpx.get(server.base + "/metrics", timeout=5).text
            shown = "auto" if dtype == "auto" else "fp8"
            assert (f'vllm:cache_config_info{{block_size="16",cache_dtype="{shown}",'
                    f'num_gpu_blocks="{blocks[dtype]}"}} 1') in text, text[-3000:]
            assert f'folio_kv_cache_info{{cache_dtype="{shown}",block_size="16"}} 1' in text
            assert server.metric("folio_kv_blocks_total") == blocks[dtype]
            if dtype != "auto":
                name = httpx.get(server.base + "/v1/models", timeout=10).json()["data"][0]["id"]
                r = httpx.post(server.base + "/v1/completions", timeout=120,
                               json={"model": name, "prompt": "The capital of France is",
                                     "max_tokens": 8, "temperature": 0})
                assert r.status_code == 200, r.text
                assert len(r.json()["choices"][0]["text"]) > 0
        finally:
            server.stop()
    assert blocks["fp8_e4m3"] == 2 * blocks["auto"], blocks
