#!/usr/bin/env python3
"""An independent NumPy float64 Llama: the reference the C and CUDA backends are checked against.

It shares no code with Folio or with the test fixture: it parses config.json and the safetensors
files itself (8-byte little-endian header length, JSON header, raw little-endian data; BF16 is the
top half of an IEEE float32), or reads a GGUF file with the gguf package (LlamaNumpyGGUF), and runs
the model the plain way: no paging, full causal attention, everything in float64 (greedy keeps the
keys and values of the tokens before in plain arrays rather than recomputing them). The maths
follows Hugging Face's LlamaForCausalLM (rotate-half RoPE, default/linear/llama3 rope scaling,
RMSNorm, SwiGLU), and Qwen2ForCausalLM's biases on the q, k and v projections (model_type qwen2).

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
    def __init__(self, model_dir, cfg=None, tensors=None):
        """A Hugging Face folder, or (LlamaNumpyGGUF) a config and tensors read elsewhere."""
        if cfg is None:
            cfg = json.loads((Path(model_dir) / "config.json").read_text())
        self.cfg = cfg
        self.hidden = cfg["hidden_size"]
        self.n_layers = cfg["num_hidden_layers"]
        self.n_heads = cfg["num_attention_heads"]
        self.n_kv = cfg.get("num_key_value_heads") or self.n_heads
        self.head_dim = cfg.get("head_dim") or self.hidden // self.n_heads
        self.eps = float(cfg.get("rms_norm_eps", 1e-6))
        self.qkv_bias = cfg.get("model_type") == "qwen2"
        self.w = load_tensors(model_dir) if tensors is None else tensors
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

    def hidden_states(self, ids, cache=None):
        """Final-normed hidden states [T, hidden] of the whole sequence ids. With cache (a list,
        empty at first), ids continue the sequence whose keys and values it holds, and the new
        ones are appended: the same arithmetic, without recomputing the prefix."""
        ids = np.asarray(ids, dtype=np.int64)
        T = len(ids)
        start = len(cache[0][0]) if cache else 0
        pos = np.arange(start, start + T)
        x = self.embed[ids]
        causal = np.triu(np.full((T, start + T), -np.inf), k=start + 1)
        group = self.n_heads // self.n_kv
        for layer in range(self.n_layers):
            p = f"model.layers.{layer}."
            w = lambda name: self.w[p + name]  # noqa: E731
            h = self.rmsnorm(x, w("input_layernorm.weight"))
            q, k, v = (h @ w(f"self_attn.{n}_proj.weight").T for n in "qkv")
            if self.qkv_bias:
                q, k, v = (t + w(f"self_attn.{n}_proj.bias")
                           for t, n in zip((q, k, v), "qkv"))
            q = q.reshape(T, self.n_heads, self.head_dim)
            k = k.reshape(T, self.n_kv, self.head_dim)
            v = v.reshape(T, self.n_kv, self.head_dim)
            q, k = self.rope(q, pos), self.rope(k, pos)
            if cache is not None:
                if len(cache) <= layer:
                    cache.append((k[:0], v[:0]))
                k = np.concatenate([cache[layer][0], k])
                v = np.concatenate([cache[layer][1], v])
                cache[layer] = (k, v)
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
        cache = []
        h = self.hidden_states(list(ids), cache)[-1]
        out, all_logits = [], []
        for _ in range(n):
            lg = h @ self.lm_head.T
            tok = int(np.argmax(lg))
            out.append(tok)
            all_logits.append(lg)
            if tok in eos_ids:
                break
            h = self.hidden_states([tok], cache)[-1]
        return out, np.array(all_logits)


# llama.cpp's tensor names -> Hugging Face's, written from the GGUF spec's naming table.
_GGUF_GLOBAL = {"token_embd.weight": "model.embed_tokens.weight",
                "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}
_GGUF_LAYER = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj",
               "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
               "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
               "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}


class LlamaNumpyGGUF(LlamaNumpy):
    """The same model from a GGUF file, read with the gguf package (GGUFReader and
    gguf.quants.dequantize), not with Folio. For llama, q_proj and k_proj stay in the file's row
    order, where llama.cpp's converter interleaved each head's two halves, and RoPE rotates
    adjacent pairs (2i, 2i+1) as llama.cpp does: an independent route to the same attention
    scores as Hugging Face's halves on the original rows, which is what Folio computes after
    putting the rows back. Agreement of the two is the proof that Folio undoes the permutation
    rightly. Qwen2 files keep Hugging Face's rows (llama.cpp ropes them by halves) and carry
    q/k/v biases."""

    def __init__(self, path):
        import gguf  # only this class needs the package

        reader = gguf.GGUFReader(str(path))
        meta = {k: f.contents() for k, f in reader.fields.items()
                if not k.startswith("tokenizer.ggml.") or k.endswith("_id")}
        arch = meta["general.architecture"]
        if arch not in ("llama", "qwen2"):
            raise ValueError(f"{path}: architecture {arch!r}, only llama and qwen2 are handled")
        self.pairwise_rope = arch == "llama"
        tokens = reader.fields["tokenizer.ggml.tokens"]
        names = {t.name for t in reader.tensors}
        cfg = {
            "model_type": arch,
            "hidden_size": meta[f"{arch}.embedding_length"],
            "num_hidden_layers": meta[f"{arch}.block_count"],
            "num_attention_heads": meta[f"{arch}.attention.head_count"],
            "num_key_value_heads": meta.get(f"{arch}.attention.head_count_kv"),
            "rms_norm_eps": meta[f"{arch}.attention.layer_norm_rms_epsilon"],
            "rope_theta": meta.get(f"{arch}.rope.freq_base", 10000.0),
            "vocab_size": meta.get(f"{arch}.vocab_size", len(tokens.data)),
            "tie_word_embeddings": "output.weight" not in names,
            "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
            "eos_token_id": meta.get("tokenizer.ggml.eos_token_id"),
        }
        if meta.get(f"{arch}.rope.scaling.type", "none") != "none":
            raise ValueError(f"{path}: rope scaling {meta[f'{arch}.rope.scaling.type']!r}")
        tensors = {}
        for t in reader.tensors:
            if t.name in _GGUF_GLOBAL:
                hf = _GGUF_GLOBAL[t.name]
            else:
                _, layer, base, kind = t.name.split(".")
                hf = f"model.layers.{int(layer)}.{_GGUF_LAYER[base]}.{kind}"
            arr = gguf.quants.dequantize(t.data, t.tensor_type)
            tensors[hf] = np.asarray(arr, dtype=np.float64).reshape(tuple(reversed(t.shape)))
        super().__init__(path, cfg=cfg, tensors=tensors)

    def rope(self, x, positions):
        """x: [T, heads, head_dim]; for llama, pairs (2i, 2i+1) rotated by position *
        inv_freq[i]; for qwen2, halves as Hugging Face does."""
        if not self.pairwise_rope:
            return super().rope(x, positions)
        angles = positions[:, None].astype(np.float64) * self.inv_freq[None, :]
        cos, sin = np.cos(angles)[:, None, :], np.sin(angles)[:, None, :]
        even, odd = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir", help="a Hugging Face folder, or a .gguf file")
    ap.add_argument("--ids", required=True, help="comma-separated prompt token ids")
    ap.add_argument("--greedy", type=int, default=1, help="tokens to generate")
    a = ap.parse_args(argv)
    gguf_file = a.model_dir.endswith(".gguf")
    model = LlamaNumpyGGUF(a.model_dir) if gguf_file else LlamaNumpy(a.model_dir)
    toks, _ = model.greedy([int(t) for t in a.ids.split(",")], a.greedy)
    print(json.dumps(toks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
