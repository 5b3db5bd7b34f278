"""The CPU backend's fast path ("cpu": GGUF blocks kept, activations quantized to int8 per 32
values, SIMD dot products, an f16 KV cache) held to its f32 reference ("cpu-ref", the oracle that
tests/test_gguf_model.py holds to NumPy, and where SmolLM2's held prompts hold the fast path to
it), through tests/tools/step_driver, on a tiny GGUF of every weight type (Q4_0, Q4_1, Q5_0 and
Q5_1 packed as Q8, Q8_0, F16, BF16, F32): every packing path, Qwen2's biases, tied embeddings and
tensor parallelism's cut of the packed blocks, in seconds. Its random weights have near-ties
everywhere, so its decode steps are fed fixed tokens and only logits are compared (centered
relative L2: measured up to 5.4% for these two layers of int8 activations; a real bug is 30% or
more).
"""

import json
import subprocess

import numpy as np
import pytest

from conftest import bin_path
from test_gguf_model import TINY, tiny_steps, write_tiny_gguf

TINY_TOL = 0.12


def run(tmp_path, model, steps, backend, vocab, **opts):
    script = {"model": str(model), "steps": steps, "num_kv_blocks": 64, "threads": 2,
              "max_seqs": 8, "max_num_tokens": 256, "backend": backend}
    script.update(opts)
    spath, lpath = tmp_path / f"{backend}.json", tmp_path / f"{backend}.bin"
    spath.write_text(json.dumps(script))
    proc = subprocess.run([str(bin_path("step_driver")), str(spath), str(lpath)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    return results, np.fromfile(lpath, dtype=np.float32).reshape(len(steps), -1, vocab)


def rel_err(a, b):
    """Relative L2 of a against b, each with its mean taken out (softmax's invariance)."""
    a = np.asarray(a, np.float64) - np.mean(a)
    b = np.asarray(b, np.float64) - np.mean(b)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("arch,tied", [("llama", False), ("llama", True), ("qwen2", False)],
                         ids=["output.weight", "tied", "qwen2"])
def test_tiny_gguf_fast_path_near_reference(tmp_path, arch, tied):
    path = write_tiny_gguf(tmp_path / "tiny.gguf", arch=arch, tied=tied)
    prompt = [1, 17, 200, 45, 9, 131, 77, 3, 250, 8, 64, 5, 99, 180, 33, 12, 140]
    steps = tiny_steps(prompt, 8)
    for s, tok in enumerate([5, 77, 140, 3, 250, 9, 64], start=1):
        steps[s][0]["tokens"] = [tok]
    fast, fast_logits = run(tmp_path, path, steps, "cpu", TINY["vocab"], num_kv_blocks=8)
    ref, ref_logits = run(tmp_path, path, steps, "cpu-ref", TINY["vocab"], num_kv_blocks=8)
    errs = [rel_err(a, b) for a, b in zip(fast_logits[:, 0], ref_logits[:, 0])]
    print(f"\n{arch} tied={tied}: rel L2 max {max(errs):.1e}")
    assert max(errs) < TINY_TOL


def test_fast_path_tensor_parallel_equals_one_rank(tmp_path):
    """Ranks cut the packed blocks (O and down by whole blocks of columns): the same logits
    within f32 rounding of the sums' split."""
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    prompt = [1, 17, 200, 45, 9, 131, 77, 3, 250, 8, 64, 5, 99, 180, 33, 12, 140]
    steps = tiny_steps(prompt, 4)
    one, one_logits = run(tmp_path, path, steps, "cpu", TINY["vocab"], num_kv_blocks=8)
    two, two_logits = run(tmp_path, path, steps, "cpu", TINY["vocab"], num_kv_blocks=8,
                          tensor_parallel_size=2)
    assert [r["token_ids"] for r in two] == [r["token_ids"] for r in one]
    for a, b in zip(two_logits, one_logits):
        assert rel_err(a, b) < 1e-4
