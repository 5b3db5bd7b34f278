"""The tiny-model fixture writes what a Hugging Face download looks like: files that the
`safetensors` library reads, the tensor names and shapes of LlamaForCausalLM, a config with every
field of the real TinyLlama config, the Llama-2 tokenizer, and bf16/f16 values that are the f32
weights correctly rounded."""

import json
import struct
import subprocess
import sys

import numpy as np
import pytest
from safetensors import safe_open

from conftest import ASSETS, REPO

SCRIPT = REPO / "tests" / "fixtures" / "make_tiny_model.py"
SIZES = ["--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2",
         "--intermediate", "96", "--vocab", "32000", "--seed", "7"]


def run_fixture(out, *args):
    subprocess.run([sys.executable, str(SCRIPT), str(out), *SIZES, *args], check=True,
                   capture_output=True)
    return out


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The same seeded model in each dtype, in 2 shards, plus an f32 single file."""
    base = tmp_path_factory.mktemp("fixture-models")
    out = {dt: run_fixture(base / dt, "--dtype", dt, "--shards", "2")
           for dt in ("bf16", "f16", "f32")}
    out["f32-single"] = run_fixture(base / "f32-single", "--dtype", "f32")
    return out


def expected_names(layers, tied):
    names = {"model.embed_tokens.weight", "model.norm.weight"}
    for i in range(layers):
        for suffix in ("input_layernorm", "post_attention_layernorm", "self_attn.q_proj",
                       "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                       "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"):
            names.add(f"model.layers.{i}.{suffix}.weight")
    if not tied:
        names.add("lm_head.weight")
    return names


def raw_tensors(path):
    """{name: (dtype, shape, raw bytes)} by parsing the file here, independently of the fixture's
    own reader."""
    data = path.read_bytes()
    (hlen,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + hlen])
    header.pop("__metadata__", None)
    base = 8 + hlen
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        out[name] = (info["dtype"], info["shape"], data[base + begin:base + end])
    return out


def all_raw(model_dir):
    index = json.loads((model_dir / "model.safetensors.index.json").read_text())
    out = {}
    for fname in sorted(set(index["weight_map"].values())):
        for name, t in raw_tensors(model_dir / fname).items():
            assert index["weight_map"][name] == fname
            out[name] = t
    return out, index


def bf16_nearest_even(x):
    """f32 -> bf16 bits by comparing the two neighbours in float64 (not by bit tricks)."""
    u = x.astype(np.float32).view(np.uint32)
    lo = (u >> 16).astype(np.uint32)
    hi = lo + 1
    as_f64 = lambda b: (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    d_lo = np.abs(x.astype(np.float64) - as_f64(lo))
    d_hi = np.abs(as_f64(hi) - x.astype(np.float64))
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (lo % 2 == 1))
    return np.where(pick_hi, hi, lo).astype(np.uint16)


@pytest.mark.parametrize("dtype,st_dtype,np_dtype", [
    ("bf16", "BF16", None), ("f16", "F16", np.float16), ("f32", "F32", np.float32)])
def test_shards_readable_by_safetensors(models, dtype, st_dtype, np_dtype):
    model_dir = models[dtype]
    raw, index = all_raw(model_dir)
    files = sorted(set(index["weight_map"].values()))
    assert files == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert not (model_dir / "model.safetensors").exists()
    assert set(raw) == expected_names(2, tied=False)
    assert index["metadata"]["total_size"] == sum(len(r) for _, _, r in raw.values())
    for fname in files:
        with safe_open(str(model_dir / fname), framework="numpy") as f:
            for name in f.keys():
                sl = f.get_slice(name)
                assert sl.get_dtype() == st_dtype
                assert list(sl.get_shape()) == raw[name][1]
                if np_dtype is not None:  # numpy has no bfloat16
                    got = f.get_tensor(name)
                    assert got.dtype == np_dtype
                    assert got.tobytes() == raw[name][2]


def test_shapes_follow_config(models):
    cfg = json.loads((models["bf16"] / "config.json").read_text())
    raw, _ = all_raw(models["bf16"])
    h, hd = cfg["hidden_size"], cfg["head_dim"]
    assert hd == h // cfg["num_attention_heads"]
    assert raw["model.embed_tokens.weight"][1] == [32000, h]
    assert raw["lm_head.weight"][1] == [32000, h]
    assert raw["model.layers.1.self_attn.q_proj.weight"][1] == [4 * hd, h]
    assert raw["model.layers.1.self_attn.k_proj.weight"][1] == [2 * hd, h]
    assert raw["model.layers.1.self_attn.o_proj.weight"][1] == [h, 4 * hd]
    assert raw["model.layers.0.mlp.down_proj.weight"][1] == [h, 96]
    assert raw["model.layers.0.mlp.gate_proj.weight"][1] == [96, h]
    assert raw["model.norm.weight"][1] == [h]


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_half_values_are_f32_rounded(models, dtype):
    """The same seed gives the same weights in every dtype; bf16 and f16 hold the f32 values
    rounded to nearest even."""
    ref, _ = all_raw(models["f32"])
    half, _ = all_raw(models[dtype])
    for name, (_, shape, raw32) in ref.items():
        x = np.frombuffer(raw32, dtype="<f4")
        bits = np.frombuffer(half[name][2], dtype="<u2")
        if dtype == "bf16":
            np.testing.assert_array_equal(bits, bf16_nearest_even(x), err_msg=name)
        else:
            np.testing.assert_array_equal(bits, x.astype("<f2").view("<u2"), err_msg=name)


def test_f32_single_file_equals_shards(models):
    single = raw_tensors(models["f32-single"] / "model.safetensors")
    sharded, _ = all_raw(models["f32"])
    assert single == sharded


def test_weights_scale(models):
    """Unit-scale activations and logits that are not near-equal: embeddings ~N(0,1), linears
    with std 1/sqrt(fan_in), norms around 1 with noise."""
    raw, _ = all_raw(models["f32"])
    f = lambda n: np.frombuffer(raw[n][2], dtype="<f4")
    assert 0.95 < f("model.embed_tokens.weight").std() < 1.05
    assert abs(f("model.layers.0.mlp.down_proj.weight").std() * np.sqrt(96) - 1) < 0.1
    assert abs(f("lm_head.weight").std() * np.sqrt(64) - 1) < 0.05
    norm = f("model.norm.weight")
    assert abs(norm.mean() - 1) < 0.1 and 0.02 < norm.std() < 0.3


def test_config_and_tokenizer(models):
    d = models["bf16"]
    cfg = json.loads((d / "config.json").read_text())
    real = json.loads((ASSETS / "models/tinyllama-1.1b-shape/config.json").read_text())
    assert set(real) <= set(cfg)
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["model_type"] == "llama"
    assert (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["intermediate_size"]) == (2, 64, 96)
    assert cfg["num_attention_heads"] == 4 and cfg["num_key_value_heads"] == 2
    assert cfg["vocab_size"] == 32000
    assert cfg["torch_dtype"] == "bfloat16" and cfg["rope_scaling"] is None
    assert cfg["tie_word_embeddings"] is False
    assert json.loads((models["f16"] / "config.json").read_text())["torch_dtype"] == "float16"
    gen = json.loads((d / "generation_config.json").read_text())
    assert gen["bos_token_id"] == 1 and gen["eos_token_id"] == 2
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        assert (d / name).read_bytes() == (ASSETS / "models/llama2-tokenizer" / name).read_bytes()
    assert not (d / "tokenizer.model").exists()
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    assert tok.get_vocab_size() == cfg["vocab_size"]


def test_options_and_determinism(tmp_path):
    a = run_fixture(tmp_path / "a", "--tie-embeddings", "--rope-scaling-llama3", "--head-dim", "32",
                    "--rope-theta", "500000", "--max-pos", "1024")
    cfg = json.loads((a / "config.json").read_text())
    assert cfg["tie_word_embeddings"] is True and cfg["head_dim"] == 32
    assert cfg["rope_theta"] == 500000.0 and cfg["max_position_embeddings"] == 1024
    rs = cfg["rope_scaling"]
    assert rs["rope_type"] == "llama3" and rs["factor"] == 8.0
    assert rs["low_freq_factor"] == 1.0 and rs["high_freq_factor"] == 4.0
    assert rs["original_max_position_embeddings"] == 256
    raw = raw_tensors(a / "model.safetensors")
    assert set(raw) == expected_names(2, tied=True)
    assert raw["model.layers.0.self_attn.q_proj.weight"][1] == [4 * 32, 64]
    # Seeded: the same seed writes the same bytes, another seed other weights.
    b = run_fixture(tmp_path / "b", "--tie-embeddings", "--rope-scaling-llama3", "--head-dim", "32",
                    "--rope-theta", "500000", "--max-pos", "1024")
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    c = run_fixture(tmp_path / "c", "--tie-embeddings", "--rope-scaling-llama3", "--head-dim", "32",
                    "--rope-theta", "500000", "--max-pos", "1024", "--seed", "8")
    assert (a / "model.safetensors").read_bytes() != (c / "model.safetensors").read_bytes()


def test_importable(tmp_path):
    from make_tiny_model import load_weights, make_tiny_model

    out = make_tiny_model(tmp_path / "m", layers=1, hidden=32, heads=2, kv_heads=1,
                          intermediate=48, vocab=32000, dtype="f16", shards=3)
    w = load_weights(out)
    assert set(w) == expected_names(1, tied=False)
    assert all(v.dtype == np.float32 for v in w.values())
    assert w["model.layers.0.self_attn.k_proj.weight"].shape == (16, 32)
    assert len(list(out.glob("model-0000?-of-00003.safetensors"))) == 3
