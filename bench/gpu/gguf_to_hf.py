#!/usr/bin/env python3
"""A Hugging Face folder (bf16 safetensors, config, tokenizer) written from a GGUF file, so that
vLLM serves the same trained weights Folio reads from the GGUF (SmolLM2-135M-Instruct in the
side-by-side runs and the speculative-decoding ablation of docs/ANALYSIS.md).

    gguf_to_hf.py FILE.gguf OUT_DIR

transformers dequantizes the GGUF through the `gguf` package (carried as a wheel, as
tests/gpu/check_gguf_cuda.sh does) and undoes its Q/K row order for RoPE. It marks the model as
GGUF-quantized, which save_pretrained refuses; the tensors it holds are plain bf16 by then, so the
marker is dropped before saving and the folder loads as an ordinary checkpoint.
"""
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    gguf, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
    if not gguf.is_file():
        sys.exit(f"gguf_to_hf: {gguf} is not a file")
    kw = {"gguf_file": gguf.name}
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), dtype=torch.bfloat16, **kw)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), **kw)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    print(f"gguf_to_hf: {out} ({sum(p.numel() for p in model.parameters()):,} parameters)")


if __name__ == "__main__":
    main()
