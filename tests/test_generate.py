"""`folio generate` end to end: its greedy completion equals the NumPy reference's greedy tokens,
tokenized and decoded by Hugging Face `tokenizers`; bad arguments and bad model directories give a
non-zero exit status and a message."""

import json
import re
import subprocess

import pytest
from tokenizers import Tokenizer

from conftest import BUILD, bin_path
from llama_numpy import LlamaNumpy

PROMPTS = ["The quick brown fox jumps over the lazy dog.", "Once upon a time, ü 日本語 🙂\n\tend"]


def generate(*args, timeout=300):
    return subprocess.run([str(bin_path("folio")), "generate", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_completion_matches_numpy_reference(tiny_model, prompt):
    n = 24
    proc = generate("--model", tiny_model, "--prompt", prompt, "--max-tokens", n, "--ignore-eos",
                    "--threads", 1)
    assert proc.returncode == 0, proc.stderr

    tok = Tokenizer.from_file(str(tiny_model / "tokenizer.json"))
    ids = tok.encode(prompt).ids
    assert ids[0] == 1  # the Llama-2 post-processor's BOS
    want_ids, _ = LlamaNumpy(tiny_model).greedy(ids, n)
    want = tok.decode(want_ids, skip_special_tokens=True)
    assert proc.stdout == want + "\n"
    assert f"prompt tokens: {len(ids)}, generated tokens: {n}" in proc.stderr
    assert re.search(r"decode: [0-9.]+ tokens/s", proc.stderr), proc.stderr


def test_seeded_sampling_is_reproducible(tiny_model):
    args = ["--model", tiny_model, "--prompt", "Hello", "--max-tokens", 12, "--ignore-eos",
            "--temperature", 0.8, "--top-p", 0.95, "--top-k", 40, "--min-p", 0.01]
    a = generate(*args, "--seed", 7)
    b = generate(*args, "--seed", 7)
    c = generate(*args, "--seed", 8)
    assert a.returncode == b.returncode == c.returncode == 0, a.stderr + c.stderr
    assert a.stdout == b.stdout
    assert a.stdout != c.stdout


def test_help():
    proc = generate("--help")
    assert proc.returncode == 0 and "--max-tokens" in proc.stdout


BAD_ARGS = {
    "model and demo": (["--demo", "--prompt", "hi", "--max-tokens", 3], "exclude each other"),
    "system without chat": (["--prompt", "hi", "--max-tokens", 3, "--system", "s"], "--chat"),
    "no prompt": (["--max-tokens", 3], "required"),
    "zero max tokens": (["--prompt", "hi", "--max-tokens", 0], "--max-tokens"),
    "non-numeric max tokens": (["--prompt", "hi", "--max-tokens", "ten"], "--max-tokens"),
    "negative temperature": (["--prompt", "hi", "--max-tokens", 3, "--temperature", -1],
                             "--temperature"),
    "top-p above 1": (["--prompt", "hi", "--max-tokens", 3, "--top-p", 1.5], "--top-p"),
    "unknown option": (["--prompt", "hi", "--max-tokens", 3, "--bogus", 1], "--bogus"),
    "missing value": (["--prompt", "hi", "--max-tokens"], "needs a value"),
    "unknown backend": (["--prompt", "hi", "--max-tokens", 3, "--backend", "tpu"], "tpu"),
}


@pytest.mark.parametrize("name", sorted(BAD_ARGS))
def test_bad_arguments(tiny_model, name):
    args, message = BAD_ARGS[name]
    args = ["--model", tiny_model, *args]
    proc = generate(*args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr, proc.stderr
    assert proc.stdout == ""


def test_bad_model_dirs(tmp_path, tiny_model):
    missing = tmp_path / "no-such-model"
    proc = generate("--model", missing, "--prompt", "hi", "--max-tokens", 3)
    assert proc.returncode == 1 and str(missing) in proc.stderr, proc.stderr

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    proc = generate("--model", broken, "--prompt", "hi", "--max-tokens", 3)
    assert proc.returncode == 1 and "config.json" in proc.stderr, proc.stderr

    # A model whose weights are gone.
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    for f in tiny_model.iterdir():
        if not f.name.startswith("model"):
            (no_weights / f.name).write_bytes(f.read_bytes())
    proc = generate("--model", no_weights, "--prompt", "hi", "--max-tokens", 3)
    assert proc.returncode == 1 and "safetensors" in proc.stderr, proc.stderr


def test_context_longer_than_the_model_allows(tiny_model):
    max_pos = json.loads((tiny_model / "config.json").read_text())["max_position_embeddings"]
    proc = generate("--model", tiny_model, "--prompt", "hi", "--max-tokens", max_pos)
    assert proc.returncode == 1 and "max_position_embeddings" in proc.stderr, proc.stderr


def test_cuda_backend_without_cuda_is_a_clear_error(tiny_model):
    cache = BUILD / "CMakeCache.txt"
    if cache.exists() and re.search(r"^CMAKE_CUDA_COMPILER:\w+=/", cache.read_text(), re.M):
        pytest.skip("this build has the CUDA backend")
    proc = generate("--model", tiny_model, "--prompt", "hi", "--max-tokens", 3, "--backend", "cuda")
    assert proc.returncode == 1 and "not built with CUDA" in proc.stderr, proc.stderr
