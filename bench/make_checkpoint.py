#!/usr/bin/env python3
"""Writes the benchmark checkpoint: a Llama (or Qwen2) model of the shape in CONFIG with seeded random bf16
weights, saved by transformers' save_pretrained (safetensors) next to the Llama-2 tokenizer files,
so Folio and vLLM load exactly what a user's TinyLlama download looks like.

    python3 bench/make_checkpoint.py OUT_DIR [--config CONFIG_JSON] [--tokenizer-dir DIR]
                                     [--seed 0] [--device auto|cuda|cpu]

CONFIG defaults to bundle/models/tinyllama-1.1b-shape/config.json (the GPU machine) or
assets/models/tinyllama-1.1b-shape/config.json; the tokenizer likewise.

Why PyTorch on the GPU rather than tests/fixtures/make_tiny_model.py --like: the fixture draws the
1.1 B weights with NumPy on one core (185 s here on 2 busy cores); torch draws them on the GPU in
well under a second, and the import, the bf16 copy and the 2.2 GB write take the rest (about
20 s). Without torch this script falls back to the fixture with --like, the same shape and scheme.

Weight scheme, the fixture's (so a random model's logits spread out the way a trained model's do,
instead of the near-uniform softmax that HF's default std 0.02 init gives at this width):
embedding N(0, 1), every linear N(0, 1/fan_in), RMSNorm weights 1 + 0.1 N(0, 1). After writing,
one forward pass over a short prompt checks that the logits are finite and not degenerate.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "tokenizer.model")


def default_models_dir():
    bundle = REPO_ROOT / "bundle" / "models"
    if (bundle / "tinyllama-1.1b-shape" / "config.json").is_file():
        return bundle
    return REPO_ROOT / "assets" / "models"


def copy_tokenizer(tokenizer_dir, out):
    found = 0
    for name in TOKENIZER_FILES:
        src = Path(tokenizer_dir) / name
        if src.is_file():
            shutil.copyfile(src, out / name)
            found += 1
    if not (Path(tokenizer_dir) / "tokenizer.json").is_file():
        sys.exit(f"make_checkpoint: {tokenizer_dir}/tokenizer.json not found")
    return found


def write_with_torch(cfg_dict, out, seed, device):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    # The architecture the config names: Llama as it always was built (the benchmark checkpoint's
    # bytes stay the same), others (qwen2, with its Q/K/V biases) through the Auto classes.
    llama = cfg_dict.get("model_type", "llama") == "llama"
    if llama:
        cfg = LlamaConfig(**cfg_dict)
    else:
        cfg_fields = {k: v for k, v in cfg_dict.items() if k != "model_type"}
        cfg = AutoConfig.for_model(cfg_dict["model_type"], **cfg_fields)
    torch.manual_seed(seed)
    t0 = time.time()
    # Build directly in bf16 on the device: HF's own init runs there too, and is overwritten.
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(cfg) if llama else AutoModelForCausalLM.from_config(cfg)
    finally:
        torch.set_default_dtype(prev)
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=gen, device=device, dtype=torch.float32)
            if "norm" in name:
                r = 1.0 + 0.1 * r
            elif p.dim() == 1:  # a projection's bias (Qwen2's Q/K/V)
                r = 0.5 * r
            elif "embed_tokens" not in name:
                r = r / float(p.shape[1]) ** 0.5
            p.copy_(r.to(torch.bfloat16))
    t_init = time.time() - t0

    # A forward pass over a few tokens: logits finite, spread out, not one token taking it all.
    with torch.no_grad():
        ids = torch.tensor([[1, 450, 4996, 17354, 1701, 29916, 432, 17204]], device=device)
        logits = model(input_ids=ids).logits[0, -1].float()
    probs = torch.softmax(logits, dim=-1)
    check = {
        "logit_std": float(logits.std()),
        "top1_prob": float(probs.max()),
        "entropy_nats": float(-(probs * torch.log(probs.clamp_min(1e-30))).sum()),
    }
    if not torch.isfinite(logits).all() or check["logit_std"] < 0.1 or check["top1_prob"] > 0.99:
        sys.exit(f"make_checkpoint: degenerate logits {check}")

    t0 = time.time()
    model.save_pretrained(out, safe_serialization=True)
    t_save = time.time() - t0
    return {"device": device, "torch": torch.__version__, "init_s": round(t_init, 2),
            "save_s": round(t_save, 2), **{k: round(v, 4) for k, v in check.items()}}


def write_with_fixture(config_path, out, seed):
    fixture = REPO_ROOT / "tests" / "fixtures" / "make_tiny_model.py"
    if not fixture.is_file():
        fixture = REPO_ROOT / "bundle" / "tests" / "make_tiny_model.py"
    subprocess.run([sys.executable, str(fixture), str(out), "--like", str(config_path),
                    "--seed", str(seed), "--dtype", "bf16"], check=True, stdout=subprocess.DEVNULL)
    return {"device": "numpy (tests/fixtures/make_tiny_model.py --like)"}


def main():
    models = default_models_dir()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--config", default=str(models / "tinyllama-1.1b-shape" / "config.json"))
    ap.add_argument("--tokenizer-dir", default=str(models / "llama2-tokenizer"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    a = ap.parse_args()

    config_path = Path(a.config)
    try:
        cfg_dict = json.loads(config_path.read_text())
    except (OSError, ValueError) as e:
        sys.exit(f"make_checkpoint: cannot read {config_path}: {e}")
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
        info = write_with_torch(cfg_dict, out, a.seed, a.device)
    except ImportError as e:
        print(f"make_checkpoint: no torch/transformers ({e}); using the NumPy fixture",
              file=sys.stderr)
        info = write_with_fixture(config_path, out, a.seed)
    # The original config.json, not the one save_pretrained writes (newer transformers rename
    # fields, e.g. rope_theta into rope_parameters): the checkpoint looks like a user's download.
    shutil.copyfile(config_path, out / "config.json")
    copy_tokenizer(a.tokenizer_dir, out)
    size = sum(f.stat().st_size for f in out.glob("*.safetensors"))
    info.update({"out": str(out), "safetensors_bytes": size, "total_s": round(time.time() - t0, 1),
                 "seed": a.seed, "config": str(config_path)})
    print(json.dumps(info))


if __name__ == "__main__":
    main()
