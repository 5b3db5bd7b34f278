"""FP8 checkpoints as they ship (issue 55): compressed-tensors (float-quantized, channel or
tensor weight scales) and vLLM's/AutoFP8's "fp8" serialization, on the CPU backend, through
tests/tools/step_driver and `folio serve`.

The fixture (tests/fixtures/make_fp8_checkpoint.py) converts the tiny bf16 model with Folio's
own rule, in NumPy with an e4m3 encoder written apart from common/fp8.c. So:
- channel strategy: serving the FP8 checkpoint must give the logits of serving the bf16 source
  with --quantization fp8, bit for bit (the same codes and scales, taken as shipped rather than
  quantized at load), on the fast path, the reference and with two tensor-parallel ranks; one
  code or scale off anywhere changes them;
- tensor strategy (one scale a tensor, broadcast to its rows): the load agrees with the f32
  reference run on the same dequantized weights (code x scale) at test_fp8.py's tolerance, the
  only difference being the per-token activation quantization;
- what Folio cannot serve is a load error naming it."""

import json
import shutil
import struct
import subprocess

import httpx
import numpy as np
import pytest

from conftest import bin_path
from make_fp8_checkpoint import VALUES, e4m3_encode, make_fp8_checkpoint, write_raw_safetensors
from make_tiny_model import make_tiny_model
from smollm2_prompts import batched_greedy_steps
from test_fp8 import TOP1_MIN, forced
from test_serve_e2e import Server, free_port

STEPS = 24
TP_FP8_TOL = 0.15
BLOCKS = 4
PROMPTS = [[1, 450, 4996, 17354, 1701, 432, 17204, 975, 278, 17366, 11203],
           [1, 306, 763, 304, 2041, 263, 5828, 1048],
           [1, 29871, 29896, 29974, 29896, 29922, 29906, 29892, 29871, 29906, 29974],
           [1, 1724, 338, 278, 7483, 310, 3444, 29973]]


@pytest.fixture(scope="module")
def bf16_model(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("fp8src"))


def steps_script(new_tokens):
    return batched_greedy_steps(PROMPTS, new_tokens, BLOCKS)


def drive(tmp_path, name, model, steps, backend="cpu", check=True, **fields):
    """step_driver's (tokens [prompt][step], logits [step][prompt][vocab], stderr)."""
    script = dict(fields, model=str(model), backend=backend, steps=steps, max_seqs=4,
                  max_num_tokens=64, num_kv_blocks=4 * BLOCKS, threads=2)
    spath, lpath = tmp_path / f"{name}.json", tmp_path / f"{name}.bin"
    spath.write_text(json.dumps(script))
    lpath.unlink(missing_ok=True)
    proc = subprocess.run([str(bin_path("step_driver")), str(spath), str(lpath)],
                          capture_output=True, text=True, timeout=600)
    if not check:
        return None, None, proc
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    tokens = [[r["token_ids"][i] for r in results] for i in range(len(PROMPTS))]
    logits = np.fromfile(lpath, dtype=np.float32).reshape(len(steps), len(PROMPTS), -1)
    return tokens, logits, proc


def test_encoder_matches_the_codec_rules():
    """The fixture's encoder against the properties tests/unit/test_fp8.c holds common/fp8.c
    to: every code's value encodes to itself, a midpoint goes to the even code and its
    neighbours to the nearer, magnitudes past 448 saturate, NaN stays NaN."""
    for c in range(256):
        if c & 0x7F != 0x7F:
            assert e4m3_encode(np.float32([VALUES[c]]))[0] == c, hex(c)
    for c in range(0x7E):
        mid = np.float32((float(VALUES[c]) + float(VALUES[c + 1])) / 2)
        assert e4m3_encode(np.array([mid]))[0] == (c if c % 2 == 0 else c + 1)
        down = np.nextafter(mid, np.float32(0), dtype=np.float32)
        up = np.nextafter(mid, np.float32(1000), dtype=np.float32)
        assert e4m3_encode(np.array([down]))[0] == c and e4m3_encode(np.array([up]))[0] == c + 1
    big = np.float32([448, 449, 464, 480, 1e6, 3e38, np.inf])
    assert (e4m3_encode(big) == 0x7E).all() and (e4m3_encode(-big) == 0xFE).all()
    assert e4m3_encode(np.float32([np.nan]))[0] & 0x7F == 0x7F
    assert e4m3_encode(np.float32([-0.0]))[0] == 0x80


@pytest.mark.parametrize("backend", ["cpu", "cpu-ref"])
def test_channel_checkpoint_is_bit_identical_to_quantizing_at_load(tmp_path, bf16_model, backend):
    fp8 = make_fp8_checkpoint(bf16_model, tmp_path / "fp8-channel", strategy="channel")
    steps = steps_script(STEPS)
    tok_q, log_q, _ = drive(tmp_path, "quantized-at-load", bf16_model, steps, backend,
                            quantization="fp8")
    # The checkpoint's quantization_config implies fp8: the script leaves the default (none).
    tok_c, log_c, proc = drive(tmp_path, "as-shipped", fp8, steps, backend)
    assert "serving it as --quantization fp8" in proc.stderr
    differing = int((log_q != log_c).sum())
    print(f"\n{backend}: {log_q.size} logits over {STEPS} steps x {len(PROMPTS)} prompts, "
          f"{differing} differ; greedy tokens equal: {tok_q == tok_c}")
    assert differing == 0
    assert tok_q == tok_c
    # And the fp8 logits are not those of the unquantized model (the comparison can fail).
    _, log_bf16, _ = drive(tmp_path, "unquantized", bf16_model, steps, backend)
    assert (log_bf16 != log_c).any()


def test_channel_checkpoint_tensor_parallel(tmp_path, bf16_model):
    """Two emulated ranks take column blocks of o_proj and down_proj, each row keeping the scale
    it shipped with (tests/unit/test_fp8_checkpoint.c holds the blocks' codes and scales
    exactly). Served end to end, the ranks also quantize a row-parallel product's activations
    per rank slice (as the at-load path does), which is not one rank's arithmetic: measured
    3.7e-2 median relative L2 teacher-forced against one rank (the at-load path's, which also
    scales each block by its own amax: 4.6e-2), so this bounds it loosely; an unscaled or
    misplaced block gives relative errors near 1."""
    fp8 = make_fp8_checkpoint(bf16_model, tmp_path / "fp8-channel", strategy="channel")
    steps = steps_script(STEPS)
    tok1, log1, _ = drive(tmp_path, "tp1", fp8, steps, "cpu")
    _, log2, _ = drive(tmp_path, "tp2", fp8, forced(steps, tok1), "cpu", tensor_parallel_size=2)
    rel = [float(np.linalg.norm(log2[s, i] - log1[s, i]) / np.linalg.norm(log1[s, i]))
           for s in range(STEPS) for i in range(len(PROMPTS))]
    agree = (log2.argmax(axis=2) == log1.argmax(axis=2)).mean()
    print(f"\ntp=2 vs tp=1 on the FP8 checkpoint, teacher-forced: top-1 agreement {agree:.4f}, "
          f"logits relative L2 median {np.median(rel):.2e}, max {max(rel):.2e}")
    assert max(rel) < TP_FP8_TOL
    assert agree >= 0.8


@pytest.mark.parametrize("method", ["compressed-tensors", "fp8"])
def test_per_tensor_checkpoint_agrees_with_reference(tmp_path, bf16_model, method):
    """One scale a tensor (compressed-tensors' tensor strategy in F32, AutoFP8's in BF16 with
    static input_scale tensors): teacher-forced top-1 agreement with the f32 reference on the
    dequantized weights, at test_fp8.py's floor."""
    fp8 = make_fp8_checkpoint(bf16_model, tmp_path / "fp8-tensor", strategy="tensor",
                              method=method, static=method == "fp8",
                              dequantized=tmp_path / "deq")
    steps = steps_script(STEPS)
    ref_tok, ref_logits, _ = drive(tmp_path, "ref", tmp_path / "deq", steps, "cpu-ref")
    _, logits, proc = drive(tmp_path, "fp8", fp8, forced(steps, ref_tok), "cpu")
    if method == "fp8":
        assert "input_scale tensors (static activation scales) are not used" in proc.stderr
    assert "serving it as --quantization fp8" in proc.stderr
    top1 = logits.argmax(axis=2)
    agree = np.array([[top1[s][i] == ref_tok[i][s] for s in range(STEPS)]
                      for i in range(len(PROMPTS))])
    rel = [float(np.linalg.norm(logits[s, i] - ref_logits[s, i]) /
                 np.linalg.norm(ref_logits[s, i] - ref_logits[s, i].mean()))
           for s in range(STEPS) for i in range(len(PROMPTS))]
    print(f"\n{method} per-tensor vs f32 reference on its dequantized weights, "
          f"{len(PROMPTS)} prompts x {STEPS} steps: top-1 agreement {agree.mean():.4f}; logits "
          f"relative L2 median {np.median(rel):.4f}, max {max(rel):.4f}")
    assert agree.mean() >= TOP1_MIN


def edit_config(model, **qc_changes):
    cfg = json.loads((model / "config.json").read_text())
    qc = cfg["quantization_config"]
    for path, value in qc_changes.items():
        node = qc
        keys = path.split("__")
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    (model / "config.json").write_text(json.dumps(cfg))


def safetensors_entries(model):
    """model.safetensors's tensors as write_raw_safetensors takes them: (name, dtype, shape,
    raw bytes)."""
    raw = (model / "model.safetensors").read_bytes()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen])
    data = raw[8 + hlen:]
    return [(n, h["dtype"], h["shape"], data[h["data_offsets"][0]:h["data_offsets"][1]])
            for n, h in header.items() if n != "__metadata__"]


def load_error(tmp_path, model):
    _, _, proc = drive(tmp_path, "bad", model, steps_script(1), check=False)
    assert proc.returncode != 0
    return proc.stderr


def test_what_cannot_be_served_is_an_error_naming_it(tmp_path, bf16_model):
    base = make_fp8_checkpoint(bf16_model, tmp_path / "base", strategy="channel")

    def variant(name):
        d = tmp_path / name
        shutil.copytree(base, d)
        return d

    d = variant("awq")
    edit_config(d, quant_method="awq")
    err = load_error(tmp_path, d)
    assert '"quantization_config.quant_method" is "awq"' in err, err

    d = variant("int4")
    edit_config(d, config_groups__group_0__weights__num_bits=4)
    err = load_error(tmp_path, d)
    assert '"quantization_config.config_groups.group_0.weights.num_bits" is 4' in err, err

    d = variant("group")
    edit_config(d, config_groups__group_0__weights__strategy="group")
    err = load_error(tmp_path, d)
    assert 'weights.strategy" is "group"' in err, err

    d = variant("int8")
    edit_config(d, config_groups__group_0__weights__type="int")
    err = load_error(tmp_path, d)
    assert 'weights.type" is "int"' in err, err

    d = tmp_path / "blocks"
    make_fp8_checkpoint(bf16_model, d, strategy="tensor", method="fp8")
    edit_config(d, weight_block_size=[128, 128])
    err = load_error(tmp_path, d)
    assert '"quantization_config.weight_block_size" is [128,128]' in err, err

    # A weight whose scale is missing: the file is rewritten without that one tensor.
    d = variant("noscale")
    victim = "model.layers.1.mlp.down_proj.weight"
    entries = [e for e in safetensors_entries(d) if e[0] != victim + "_scale"]
    write_raw_safetensors(d / "model.safetensors", entries)
    err = load_error(tmp_path, d)
    assert f"'{victim}' is F8_E4M3 but its scale '{victim}_scale'" in err, err

    # Block-wise scales: a 2-D grid of scales for one weight.
    d = variant("grid")
    entries.append((victim + "_scale", "F32", [1, 2], np.float32([0.01, 0.02]).tobytes()))
    write_raw_safetensors(d / "model.safetensors", entries)
    err = load_error(tmp_path, d)
    assert f"'{victim}' (F8_E4M3) has block-wise scales: '{victim}_scale' has shape [1, 2]" \
        in err, err


def test_served_as_shipped(tmp_path, bf16_model):
    """`folio serve` on an FP8 checkpoint without the flag: the worker says it serves it as fp8
    and that the static activation scales are not used, and a completion comes back."""

    fp8 = make_fp8_checkpoint(bf16_model, tmp_path / "served", strategy="tensor", method="fp8",
                              static=True)
    server = Server(fp8, free_port())
    try:
        server.wait_health(200)
        logs = server.logs()
        assert "serving it as --quantization fp8" in logs, logs
        assert "input_scale tensors (static activation scales) are not used" in logs, logs
        assert "fp8 (e4m3) linear layers" in logs, logs
        name = httpx.get(server.base + "/v1/models", timeout=10).json()["data"][0]["id"]
        r = httpx.post(server.base + "/v1/completions", timeout=120,
                       json={"model": name, "prompt": "Hello", "max_tokens": 4,
                             "temperature": 0})
        assert r.status_code == 200, r.text
    finally:
        server.stop()


def with_kv_scales(src, dst, scales, shape=(), layers=None):
    """A copy of the model src with model.layers.N.self_attn.{k,v}_scale = scales[0], scales[1]
    (F32 of the given shape) for the given layers (all by default)."""
    shutil.copytree(src, dst)
    entries = safetensors_entries(dst)
    n_layers = json.loads((dst / "config.json").read_text())["num_hidden_layers"]
    for i in range(n_layers) if layers is None else layers:
        for which, s in zip("kv", scales):
            entries.append((f"model.layers.{i}.self_attn.{which}_scale", "F32", list(shape),
                            np.full(shape, s, np.float32).tobytes()))
    write_raw_safetensors(dst / "model.safetensors", entries)
    return dst


def test_kv_cache_scales_from_the_checkpoint(tmp_path, bf16_model):
    """A checkpoint's calibrated K/V scales (vLLM's self_attn.k_scale / v_scale) are what the
    fp8 KV cache divides by and multiplies back: scales of 1 written out give the logits of no
    scales, bit for bit; scales of 0.3 and 0.2 change them, yet agree with the unquantized
    cache as closely as scale 1 does (a scale applied on one side only would be off 3-5x); a
    per-head scale or a layer without one is an error naming the tensor."""
    tokens, _, _ = drive(tmp_path, "auto", bf16_model, steps_script(STEPS))
    steps = forced(steps_script(STEPS), tokens)  # one history for all, as a near-tie may differ
    _, ref, _ = drive(tmp_path, "auto", bf16_model, steps)
    _, plain, _ = drive(tmp_path, "plain", bf16_model, steps, kv_cache_dtype="fp8")
    ones = with_kv_scales(bf16_model, tmp_path / "ones", (1.0, 1.0))
    _, same, _ = drive(tmp_path, "ones", ones, steps, kv_cache_dtype="fp8")
    assert np.array_equal(plain, same)
    scaled = with_kv_scales(bf16_model, tmp_path / "scaled", (0.3, 0.2), shape=(1,))
    _, got, _ = drive(tmp_path, "scaled", scaled, steps, kv_cache_dtype="fp8")
    assert not np.array_equal(plain, got)

    def rel(a):
        return float(np.median([np.linalg.norm(a[s, i] - ref[s, i]) / np.linalg.norm(ref[s, i])
                                for s in range(len(steps)) for i in range(len(PROMPTS))]))

    print(f"\nfp8 KV cache against the unquantized one, logits relative L2 median: scale 1 "
          f"{rel(plain):.4f}, checkpoint scales 0.3/0.2 {rel(got):.4f}")
    assert rel(got) < 2 * rel(plain) + 0.01
    # With the default cache the scales change nothing.
    _, unused, _ = drive(tmp_path, "unused", scaled, steps)
    assert np.array_equal(ref, unused)

    per_head = with_kv_scales(bf16_model, tmp_path / "perhead", (0.3, 0.2), shape=(2,))
    err = load_error(tmp_path, per_head)
    assert "'model.layers.0.self_attn.k_scale' (shape [2]" in err, err
    partial = with_kv_scales(bf16_model, tmp_path / "partial", (0.3, 0.2), layers=[0])
    err = load_error(tmp_path, partial)
    assert "KV cache scales for 2 of the 4" in err and "model.layers.1.self_attn.k_scale is " \
        "missing" in err, err


def test_kv_cache_scheme_taken_or_refused(tmp_path, bf16_model):
    """compressed-tensors' kv_cache_scheme: one FP8 scale a layer is taken, per-head scales and
    integer caches are refused by field."""
    base = make_fp8_checkpoint(bf16_model, tmp_path / "kvbase", strategy="channel")
    d = tmp_path / "kvtensor"
    shutil.copytree(base, d)
    edit_config(d, kv_cache_scheme={"num_bits": 8, "type": "float", "strategy": "tensor",
                                    "dynamic": False, "symmetric": True})
    drive(tmp_path, "kvtensor", d, steps_script(2), kv_cache_dtype="fp8")
    for field, value, expect in (("strategy", "attn_head", 'kv_cache_scheme.strategy" is '
                                  '"attn_head"'),
                                 ("type", "int", 'kv_cache_scheme.type" is "int"')):
        d = tmp_path / f"kv{value}"
        shutil.copytree(base, d)
        scheme = {"num_bits": 8, "type": "float", "strategy": "tensor"}
        scheme[field] = value
        edit_config(d, kv_cache_scheme=scheme)
        err = load_error(tmp_path, d)
        assert expect in err, err
