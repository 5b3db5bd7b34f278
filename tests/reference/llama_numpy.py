#!/usr/bin/env python3
"""An independent NumPy float64 Llama: the reference the C and CUDA backends are checked against.

It shares no code with Folio or with the test fixture: it parses config.json and the safetensors
files itself (8-byte little-endian header length, JSON header, raw little-endian data; BF16 is the
top half of an IEEE float32), and runs the model the plain way: no KV cache, no paging, full causal
attention over the whole sequence, everything in float64. The maths follows Hugging Face's
LlamaForCausalLM (rotate-half RoPE, default/linear/llama3 rope scaling, RMSNorm, SwiGLU), and
Qwen2ForCausalLM's biases on the q, k and v projections (model_type qwen2).

    python3 tests/reference/llama_numpy.py MODEL_DIR --ids 1,450,4996 --greedy 8

prints the greedy continuation of the given ids as a JSON list.
"""

import argparse
import json
import math
import struct
import sys
from pathlib import Path

import numpy as np

_DTYPES = {"BF16": "<u2", "F16": "<f2", "F32": "<f4"}


def read_safetensors(path):
    """{name: float64 array} of one safetensors file."""
    raw = Path(path).read_bytes()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + hlen].decode("utf-8"))
    base = 8 + hlen
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        if dtype not in _DTYPES:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dtype}")
        start, end = info["data_offsets"]
        arr = np.frombuffer(raw[base + start : base + end], dtype=_DTYPES[dtype])
        if dtype == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[name] = arr.astype(np.float64).reshape(info["shape"])
    return out


def load_tensors(model_dir):
    model_dir = Path(model_dir)
    index = model_dir / "model.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    tensors = {}
    for f in files:
        tensors.update(read_safetensors(model_dir / f))
    return tensors


def rope_inv_freq(cfg, head_dim):
    """Hugging Face's _compute_{default,linear,llama3}_rope_parameters, in float64."""
    theta = float(cfg.get("rope_theta", 10000.0))
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type"))
    if kind in (None, "default"):
        return inv_freq
    if kind == "linear":
        return inv_freq / rs["factor"]
    if kind == "llama3":
        factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old_ctx = rs["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old_ctx / low, old_ctx / high
        wavelen = 2 * math.pi / inv_freq
        scaled = np.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (old_ctx / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return np.where(medium, smoothed, scaled)
    raise ValueError(f"unsupported rope_scaling type {kind!r}")


class LlamaNumpy:
    def __init__(self, model_dir):
        self.cfg = cfg = json.loads((Path(model_dir) / "config.json").read_text())
        self.hidden = cfg["hidden_size"]
        self.n_layers = cfg["num_hidden_layers"]
        self.n_heads = cfg["num_attention_heads"]
        self.n_kv = cfg.get("num_key_value_heads") or self.n_heads
        self.head_dim = cfg.get("head_dim") or self.hidden // self.n_heads
        self.eps = float(cfg.get("rms_norm_eps", 1e-6))
        self.qkv_bias = cfg["model_type"] == "qwen2"
        self.w = load_tensors(model_dir)
        self.embed = self.w["model.embed_tokens.weight"]
        if cfg.get("tie_word_embeddings", False) or "lm_head.weight" not in self.w:
            self.lm_head = self.embed
        else:
            self.lm_head = self.w["lm_head.weight"]
        self.inv_freq = rope_inv_freq(cfg, self.head_dim)
        self.vocab = self.embed.shape[0]

    def rmsnorm(self, x, weight):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * weight

    def rope(self, x, positions):
        """x: [T, heads, head_dim]; rotate-half convention."""
        angles = positions[:, None].astype(np.float64) * self.inv_freq[None, :]
        cos = np.concatenate([np.cos(angles)] * 2, axis=-1)[:, None, :]
        sin = np.concatenate([np.sin(angles)] * 2, axis=-1)[:, None, :]
        half = self.head_dim // 2
        rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos + rotated * sin

    def hidden_states(self, ids):
        """Final-normed hidden states [T, hidden] of the whole sequence ids."""
        ids = np.asarray(ids, dtype=np.int64)
        T = len(ids)
        pos = np.arange(T)
        x = self.embed[ids]
        causal = np.triu(np.full((T, T), -np.inf), k=1)
        group = self.n_heads // self.n_kv
        for layer in range(self.n_layers):
            p = f"model.layers.{layer}."
            w = lambda name: self.w[p + name]  # noqa: E731
            h = self.rmsnorm(x, w("input_layernorm.weight"))
            q, k, v = (h @ w(f"self_attn.{n}_proj.weight").T for n in "qkv")
            if self.qkv_bias:
                q, k, v = (x + w(f"self_attn.{n}_proj.bias") for x, n in zip((q, k, v), "qkv"))
            q = q.reshape(T, self.n_heads, self.head_dim)
            k = k.reshape(T, self.n_kv, self.head_dim)
            v = v.reshape(T, self.n_kv, self.head_dim)
            q, k = self.rope(q, pos), self.rope(k, pos)
            k = np.repeat(k, group, axis=1)
            v = np.repeat(v, group, axis=1)
            scores = np.einsum("thd,shd->hts", q, k) / math.sqrt(self.head_dim) + causal
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            attn = np.einsum("hts,shd->thd", probs, v).reshape(T, self.n_heads * self.head_dim)
            x = x + attn @ w("self_attn.o_proj.weight").T
            h = self.rmsnorm(x, w("post_attention_layernorm.weight"))
            gate = h @ w("mlp.gate_proj.weight").T
            up = h @ w("mlp.up_proj.weight").T
            x = x + (gate / (1.0 + np.exp(-gate)) * up) @ w("mlp.down_proj.weight").T
        return self.rmsnorm(x, self.w["model.norm.weight"])

    def logits(self, ids, positions=None):
        """Logits [len(positions), vocab] at the given positions (default: all)."""
        h = self.hidden_states(ids)
        if positions is not None:
            h = h[np.asarray(positions)]
        return h @ self.lm_head.T

    def greedy(self, ids, n, eos_ids=()):
        """n greedy tokens after ids (stopping after an id in eos_ids), and the logits [n, vocab]
        each was chosen from. Ties go to the lowest id, as np.argmax does."""
        seq = list(ids)
        out, all_logits = [], []
        for _ in range(n):
            lg = self.logits(seq, [len(seq) - 1])[0]
            tok = int(np.argmax(lg))
            out.append(tok)
            all_logits.append(lg)
            seq.append(tok)
            if tok in eos_ids:
                break
        return out, np.array(all_logits)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--ids", required=True, help="comma-separated prompt token ids")
    ap.add_argument("--greedy", type=int, default=1, help="tokens to generate")
    a = ap.parse_args(argv)
    model = LlamaNumpy(a.model_dir)
    toks, _ = model.greedy([int(t) for t in a.ids.split(",")], a.greedy)
    print(json.dumps(toks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
