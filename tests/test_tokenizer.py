"""Folio's tokenizer against Hugging Face `tokenizers` (the reference for ids).

Everything goes through `folio tokenize` as a subprocess, one call per batch of
lines, so the comparison over 1,500 ShareGPT prompts takes a second or two and
also runs under the ASan build."""

import copy
import json
import os
import pathlib
import subprocess

import pytest
from tokenizers import Tokenizer

ROOT = pathlib.Path(__file__).resolve().parent.parent
ASSETS = ROOT / "assets"
BUILD = pathlib.Path(os.environ.get("FOLIO_BUILD", ROOT / "build"))
FOLIO = BUILD / "bin" / "folio"
LLAMA2 = ASSETS / "models" / "llama2-tokenizer"
SHAREGPT = ["sharegpt_v3_first_turns_1000.json", "sharegpt_v3_first_turns_500.json"]

EDGE_CASES = [
    "",
    " ",
    "  ",
    "   ",
    " " * 17,
    "a  b",
    "a   b    c",
    "  leading spaces",
    "trailing spaces  ",
    "\n",
    "\n\n\n",
    "\t",
    "a\tb\n c\r\n d",
    " \n \t ",
    "Hello, world! How are you?",
    "中文测试，你好世界。",
    "日本語のテキストです",
    "한국어 텍스트",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "Привет, мир!",
    "Γειά σου Κόσμε",
    "สวัสดีชาวโลก",
    "😀",
    "😀😃😄 smile",
    "👨‍👩‍👧‍👦 family",
    "🏳️‍🌈 flags 🇫🇷🇯🇵",
    "e\u0301 combining",
    "ℌ𝔢𝔩𝔩𝔬 𝕨𝕠𝕣𝕝𝕕",
    "ｆｕｌｌｗｉｄｔｈ",
    "\u00a0nbsp\u3000ideographic space\u200bzwsp",
    "<s>",
    "</s>",
    "<unk>",
    "a<s>b",
    "Hello </s> world <s>",
    "<s><s></s><unk>",
    " <s> ",
    "  <s>  x",
    "<s",
    "s>",
    "</s",
    "x" * 10000,
    "ab" * 5000,
    "é" * 3000,
    "中" * 2000,
    "\U0001F600" * 500,
    "\x00",
    "a\x00b\x00",
    "\x01\x02\x1b[0m\x7f",
    "\ufffd",
    "a\ufffdb",
    "\ufeffBOM",
    "def f(x):\n    return x ** 2  # square\n",
    "1234567890 3.14159 1e-10",
    "<0x41> <0xFF>",
    "▁already▁metaspace",
    "▁▁",
]


def run_folio(args, lines, check=True, model=LLAMA2):
    """Feeds lines (JSON values) to `folio tokenize` and returns its output lines."""
    if not FOLIO.exists():
        pytest.fail(f"{FOLIO} is not built (set FOLIO_BUILD)")
    text = "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in lines)
    proc = subprocess.run(
        [str(FOLIO), "tokenize", "--model", str(model), *args],
        input=text.encode(),
        capture_output=True,
        timeout=600,
    )
    if check and proc.returncode != 0:
        pytest.fail(f"folio tokenize failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    out = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    assert len(out) == len(lines)
    return out if check else (out, proc)


def load_prompts(name):
    with open(ASSETS / "data" / "sharegpt" / name) as f:
        data = json.load(f)
    return [row["conversations"][0]["value"] for row in data]


@pytest.fixture(scope="module")
def hf():
    return Tokenizer.from_file(str(LLAMA2 / "tokenizer.json"))


def compare_encode(hf_tok, texts, model=LLAMA2):
    """Returns (identical count, first mismatch) over both add_special modes."""
    got_special = run_folio([], texts, model=model)
    got_plain = run_folio(["--no-special"], texts, model=model)
    identical, first_bad = 0, None
    for text, a, b in zip(texts, got_special, got_plain):
        want_a = hf_tok.encode(text, add_special_tokens=True).ids
        want_b = hf_tok.encode(text, add_special_tokens=False).ids
        if a == want_a and b == want_b:
            identical += 1
        elif first_bad is None:
            first_bad = (text[:200], a[:40], want_a[:40], b[:40], want_b[:40])
    return identical, first_bad


@pytest.mark.parametrize("name", SHAREGPT)
def test_sharegpt_prompts_identical(hf, name):
    prompts = load_prompts(name)
    identical, first_bad = compare_encode(hf, prompts)
    print(f"{name}: {identical} of {len(prompts)} prompts identical")
    assert identical == len(prompts), first_bad


def test_edge_cases_identical(hf):
    identical, first_bad = compare_encode(hf, EDGE_CASES)
    print(f"edge cases: {identical} of {len(EDGE_CASES)} identical")
    assert identical == len(EDGE_CASES), first_bad


def test_decode_matches_hf_and_round_trips(hf):
    texts = load_prompts(SHAREGPT[1]) + EDGE_CASES
    id_lists = [hf.encode(t, add_special_tokens=True).ids for t in texts]
    # Ids out of order and partial byte sequences too: HF's ByteFallback rules.
    id_lists += [[0x84 + 3], [0xE4 + 3, 0xB8 + 3], [0xE4 + 3, 0xB8 + 3, 0xAD + 3, 0x80 + 3, 29874],
                 [1, 2, 0, 29871, 29871, 13], [29871], [2, 29871, 29871], []]
    for skip in (False, True):
        got = run_folio(["--decode"] + (["--skip-special"] if skip else []), id_lists)
        want = [hf.decode(ids, skip_special_tokens=skip) for ids in id_lists]
        bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if g != w]
        assert not bad, bad[:3]
    # Round trip: without the BOS, decode(encode(x)) gives x back for text
    # without special tokens or "▁" (which decodes as a space), as in
    # Hugging Face.
    plain = [t for t in texts
             if not any(s in t for s in ("<s>", "</s>", "<unk>", "\u2581"))]
    assert [hf.decode(hf.encode(t, add_special_tokens=False).ids) for t in plain] == plain
    got = run_folio(["--decode"], [hf.encode(t, add_special_tokens=False).ids for t in plain])
    assert got == plain


def test_bad_lines_are_reported_and_skipped():
    text = '"ok"\nnot json\n42\n"again"\n'
    proc = subprocess.run(
        [str(FOLIO), "tokenize", "--model", str(LLAMA2)],
        input=text.encode(), capture_output=True, timeout=60)
    assert proc.returncode == 1
    lines = proc.stdout.decode().splitlines()
    assert lines == ["[1, 3431]", "null", "null", "[1, 1449]"]
    err = proc.stderr.decode()
    assert "line 2" in err and "line 3" in err and "2 of 4 lines were bad" in err
    proc = subprocess.run(
        [str(FOLIO), "tokenize", "--model", str(LLAMA2), "--decode"],
        input=b"[1, 99999999]\n[-1]\n[\"x\"]\n[15043]\n", capture_output=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stdout.decode().splitlines() == ["null", "null", "null", '"Hello"']


def test_help_and_missing_model(tmp_path):
    proc = subprocess.run([str(FOLIO), "tokenize", "--help"], capture_output=True, timeout=60)
    assert proc.returncode == 0 and b"--decode" in proc.stdout
    proc = subprocess.run([str(FOLIO), "tokenize", "--model", str(tmp_path)],
                          input=b"", capture_output=True, timeout=60)
    assert proc.returncode != 0 and b"tokenizer.json" in proc.stderr


def variant_dir(tmp_path, name, edit):
    """A copy of the Llama-2 tokenizer.json changed by edit(dict)."""
    with open(LLAMA2 / "tokenizer.json") as f:
        j = json.load(f)
    j = edit(copy.deepcopy(j)) or j
    d = tmp_path / name
    d.mkdir()
    with open(d / "tokenizer.json", "w") as f:
        json.dump(j, f, ensure_ascii=False)
    return d


VARIANT_TEXTS = EDGE_CASES[:48] + [
    "I read a book Yesterday<sep>and today",
    "call <tool> now,<tool>and<tool>  <tool>  x",
    "mid word foo<tool>bar and ends <tool>",
    "single word: hello HELLO helloworld (hello) hello_x hello.",
    "Day day DAY daytime today",
    "rstrip: [R]   spaces  [R]\n\nnext",
    "lstrip:   [L] and\t[L]x",
    " <tool>",
    "<tool>",
    "a [R][L] b",
] + load_prompts(SHAREGPT[1])[:60]


def added_tokens_edit(j):
    next_id = 32000
    for content, opts in [
        ("<tool>", dict(special=True, normalized=False)),
        ("<sep>", dict(special=False, normalized=False)),
        ("hello", dict(special=False, normalized=False, single_word=True)),
        ("Day", dict(special=False, normalized=True)),
        ("[R]", dict(special=True, normalized=False, rstrip=True)),
        ("[L]", dict(special=False, normalized=False, lstrip=True)),
    ]:
        tok = dict(id=next_id, content=content, single_word=False, lstrip=False, rstrip=False,
                   normalized=False, special=False)
        tok.update(opts)
        j["added_tokens"].append(tok)
        next_id += 1


def metaspace_edit(scheme, split):
    def edit(j):
        j["normalizer"] = None
        j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁",
                              "prepend_scheme": scheme, "split": split}
        j["decoder"] = {"type": "Metaspace", "replacement": "▁",
                        "prepend_scheme": scheme, "split": split}
        # The pair form of merges, as newer files write them.
        j["model"]["merges"] = [m.split(" ") for m in j["model"]["merges"]]
    return edit


@pytest.mark.parametrize("name,edit", [
    ("added_tokens", added_tokens_edit),
    ("metaspace_first_nosplit", metaspace_edit("first", False)),
    ("metaspace_always_split", metaspace_edit("always", True)),
    ("metaspace_never_split", metaspace_edit("never", True)),
    ("no_post_processor_no_decoder", lambda j: j.update(post_processor=None, decoder=None)),
])
def test_tokenizer_json_variants(tmp_path, name, edit):
    d = variant_dir(tmp_path, name, edit)
    ref = Tokenizer.from_file(str(d / "tokenizer.json"))
    identical, first_bad = compare_encode(ref, VARIANT_TEXTS, model=d)
    print(f"{name}: {identical} of {len(VARIANT_TEXTS)} identical")
    assert identical == len(VARIANT_TEXTS), first_bad
    id_lists = [ref.encode(t).ids for t in VARIANT_TEXTS]
    for skip in (False, True):
        got = run_folio(["--decode"] + (["--skip-special"] if skip else []), id_lists, model=d)
        want = [ref.decode(ids, skip_special_tokens=skip) for ids in id_lists]
        bad = [(i, g, w) for i, (g, w) in enumerate(zip(got, want)) if g != w]
        assert not bad, bad[:3]


def test_config_add_bos_token_false(tmp_path):
    d = tmp_path / "nobos"
    d.mkdir()
    (d / "tokenizer.json").write_bytes((LLAMA2 / "tokenizer.json").read_bytes())
    cfg = json.loads((LLAMA2 / "tokenizer_config.json").read_text())
    cfg.update(add_bos_token=False, add_eos_token=True, eos_token={"content": "</s>"})
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    assert run_folio([], ["Hello"], model=d) == [[15043, 2]]
    assert run_folio(["--no-special"], ["Hello"], model=d) == [[15043]]
