#!/usr/bin/env python3
"""Writes a TinyLlama-shaped checkpoint with seeded random bf16 weights through PyTorch and
save_pretrained, next to the Llama-2 tokenizer files:

    make_checkpoint.py CONFIG_JSON TOKENIZER_DIR OUT_DIR [--seed 0]

Weights follow tests/fixtures/make_tiny_model.py's scheme so the logits spread out (a real
model's are not near-equal): embedding N(0, 1), linears N(0, 1/fan_in), norms 1 + 0.1 N(0, 1)."""
import argparse
import json
import shutil
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("tokenizer_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    cfg = LlamaConfig(**json.loads(Path(a.config).read_text()))
    torch.manual_seed(a.seed)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    g = torch.Generator(device="cuda").manual_seed(a.seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g, device="cuda", dtype=torch.float32)
            if "norm" in name:
                r = 1.0 + 0.1 * r
            elif "embed_tokens" not in name:
                r = r / p.shape[1] ** 0.5
            p.copy_(r.to(torch.bfloat16))
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    # The original config.json, not the one save_pretrained writes (newer transformers rename
    # fields, e.g. rope_theta into rope_parameters): the checkpoint looks like a user's download.
    shutil.copyfile(a.config, out / "config.json")
    for f in Path(a.tokenizer_dir).iterdir():
        if f.is_file():
            shutil.copyfile(f, out / f.name)
    print(out)


if __name__ == "__main__":
    main()
