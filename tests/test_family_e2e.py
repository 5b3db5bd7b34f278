"""A Llama-3-shaped and a Qwen2-shaped checkpoint (random weights, the real tokenizers) served
end to end by `folio serve --backend cpu` and driven with the openai client.

The models come from tests/fixtures/make_family_models.py, built into the build folder at test
time (rebuilt when the scripts that make them change). Checked for each family: the prompt token
counts of completions and chats against Hugging Face `tokenizers` and transformers'
apply_chat_template; a completion and a chat, streamed and not, that stop on the planted
end-of-sequence ids (two different ids of the model's EOS list, one of them only in
generation_config.json for Qwen2), with the text the NumPy reference's greedy tokens decode to;
and the same request with ignore_eos running on to max_tokens, which shows the stop came from the
EOS list."""

import functools
import hashlib
import json
import shutil
import subprocess
import sys

import openai
import pytest
from tokenizers import Tokenizer

from conftest import BUILD, REPO
from test_serve_e2e import Server, free_port

FAMILIES = ["llama3", "qwen2"]
PROMPTS = [
    "Hello",
    "The quick brown fox jumps over the lazy dog.",
    "  leading spaces, trailing spaces   ",
    "Numbers 1234567 and 3.14159, dates 2024-06-01",
    "emoji 🙂🎉 and 日本語のテキスト, Ελληνικά, кириллица",
    "code:\n\tdef f(x):\n\t\treturn x ** 2  # square\n\n",
    "Ünïcödé façade naïve café — “quotes” and ‘more’",
    "don't won't I'm you'll they've WE'RE",
]
CHATS = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"},
     {"role": "assistant", "content": "4"}, {"role": "user", "content": "And 3+3? 🙂"}],
]
SOURCES = ["tests/fixtures/make_family_models.py", "tests/fixtures/make_tiny_model.py",
           "tests/tokenizer_refs.py",
           "tests/reference/llama_numpy.py", "tests/fixtures/chat_templates/llama3_instruct.jinja",
           "tests/fixtures/chat_templates/qwen25_chatml.jinja"]


def family_model(family):
    """The family's fixture model under BUILD/test-models, made unless a stamp says it is
    current."""
    digest = hashlib.sha256()
    for rel in SOURCES:
        digest.update((REPO / rel).read_bytes())
    stamp = digest.hexdigest()
    out = BUILD / "test-models" / family
    if (out / "stamp").exists() and (out / "stamp").read_text() == stamp:
        return out
    shutil.rmtree(out, ignore_errors=True)
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests/fixtures/make_family_models.py"), family, str(out)],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (out / "stamp").write_text(stamp)
    return out


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    model = family_model(request.param)
    server = Server(model, free_port())
    try:
        server.wait_health(200)
        client = openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0,
                               timeout=120)
        name = client.models.list().data[0].id
        plants = json.loads((model / "plants.json").read_text())
        tok = hf_tokenizers(model)[1]
        yield dict(name=request.param, model=model, server=server, client=client, id=name,
                   plants=plants, tok=tok)
    finally:
        server.stop()


@functools.lru_cache(maxsize=None)
def hf_tokenizers(model):
    """(transformers' tokenizer, Hugging Face tokenizers' Tokenizer) of the model folder."""
    import transformers

    return (transformers.AutoTokenizer.from_pretrained(str(model)),
            Tokenizer.from_file(str(model / "tokenizer.json")))


def hf_chat_ids(model, messages):
    """The ids transformers' apply_chat_template gives (it tokenizes without special tokens)."""
    hf, tok = hf_tokenizers(model)
    text = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tok.encode(text, add_special_tokens=False).ids


def test_completion_prompt_tokens_match_hf(family):
    for prompt in PROMPTS:
        want = family["tok"].encode(prompt).ids
        r = family["client"].completions.create(model=family["id"], prompt=prompt, max_tokens=1,
                                                temperature=0)
        assert r.usage.prompt_tokens == len(want), (prompt, want)
    if family["name"] == "llama3":
        assert family["tok"].encode("Hello").ids[0] == 128000  # <|begin_of_text|>


def test_chat_prompt_tokens_match_transformers(family):
    for messages in CHATS:
        want = hf_chat_ids(family["model"], messages)
        r = family["client"].chat.completions.create(model=family["id"], messages=messages,
                                                     max_tokens=1, temperature=0)
        assert r.usage.prompt_tokens == len(want), messages


def collect_stream(stream):
    text, finish, usage = "", None, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            piece = choice.text if hasattr(choice, "text") else choice.delta.content
            text += piece or ""
            finish = choice.finish_reason or finish
    return text, finish, usage


@pytest.mark.parametrize("stream", [False, True])
def test_completion_stops_on_the_eos_list(family, stream):
    plant = family["plants"]["completion"]
    args = dict(model=family["id"], prompt=plant["prompt"], max_tokens=len(plant["tokens"]) + 8,
                temperature=0)
    client = family["client"]
    if stream:
        text, finish, usage = collect_stream(client.completions.create(
            stream=True, stream_options={"include_usage": True}, **args))
    else:
        r = client.completions.create(**args)
        text, finish, usage = r.choices[0].text, r.choices[0].finish_reason, r.usage
    assert (text, finish) == (plant["text"], "stop")
    assert usage.prompt_tokens == len(plant["ids"])
    assert usage.completion_tokens == len(plant["tokens"]) + 1  # the EOS token counts


@pytest.mark.parametrize("stream", [False, True])
def test_chat_stops_on_the_eos_list(family, stream):
    plant = family["plants"]["chat"]
    assert hf_chat_ids(family["model"], plant["prompt"]) == plant["ids"]
    args = dict(model=family["id"], messages=plant["prompt"],
                max_tokens=len(plant["tokens"]) + 8, temperature=0)
    client = family["client"]
    if stream:
        text, finish, usage = collect_stream(client.chat.completions.create(
            stream=True, stream_options={"include_usage": True}, **args))
    else:
        r = client.chat.completions.create(**args)
        text, finish, usage = r.choices[0].message.content, r.choices[0].finish_reason, r.usage
    assert (text, finish) == (plant["text"], "stop")
    assert usage.prompt_tokens == len(plant["ids"])
    assert usage.completion_tokens == len(plant["tokens"]) + 1


def test_ignore_eos_runs_past_the_stop(family):
    for kind in ("completion", "chat"):
        plant = family["plants"][kind]
        n = len(plant["tokens"]) + 3
        args = dict(model=family["id"], max_tokens=n, temperature=0,
                    extra_body={"ignore_eos": True})
        if kind == "completion":
            r = family["client"].completions.create(prompt=plant["prompt"], **args)
            text = r.choices[0].text
        else:
            r = family["client"].chat.completions.create(messages=plant["prompt"], **args)
            text = r.choices[0].message.content
        assert r.choices[0].finish_reason == "length", kind
        assert r.usage.completion_tokens == n, kind
        assert text.startswith(plant["text"]), kind


def test_sliding_window_is_served_only_within_it(tmp_path, tiny_model):
    """Mistral-7B-v0.1-style: a sliding_window shorter than the model's context is refused by
    name, and served once --max-model-len keeps every sequence inside the window."""
    model = tmp_path / "mistral"
    shutil.copytree(tiny_model, model)
    cfg = json.loads((model / "config.json").read_text())
    cfg.update(model_type="mistral", architectures=["MistralForCausalLM"], sliding_window=1024)
    (model / "config.json").write_text(json.dumps(cfg))

    refused = Server(model, free_port())
    assert refused.proc.wait(timeout=60) == 1
    assert '"sliding_window" is 1024, shorter than the 2048-token context' in refused.logs()
    assert "--max-model-len" in refused.logs()

    served = Server(model, free_port(), "--max-model-len", "1024")
    try:
        served.wait_health(200)
        client = openai.OpenAI(base_url=served.base + "/v1", api_key="none", max_retries=0)
        r = client.completions.create(model="mistral", prompt="Hello", max_tokens=3,
                                      temperature=0, extra_body={"ignore_eos": True})
        assert r.usage.completion_tokens == 3
    finally:
        served.stop()
