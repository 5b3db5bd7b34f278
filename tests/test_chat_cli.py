"""`folio chat` (an interactive terminal chat), `folio generate --chat` and the default model.

The chat is driven by piping lines to its stdin: each reply must be the NumPy reference's greedy
continuation of the whole conversation as transformers renders it through the model's chat
template (so the second turn checks that the history and the KV cache kept between turns are
right); /exit and end of input end it. The demo model (--demo) stands in for a trained one here;
SmolLM2, the real default, answers a real question through `folio generate --chat` and through
`folio serve` with no --model."""

import json
import re
import subprocess

import httpx
import openai
import pytest
from tokenizers import Tokenizer

from conftest import BUILD, REPO, bin_path, smollm2_gguf
from llama_numpy import LlamaNumpy
from test_serve_e2e import Server, free_port

REPLY_TOKENS = 6


def folio(*args, stdin=None, timeout=300):
    return subprocess.run([str(bin_path("folio")), *map(str, args)], input=stdin,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def demo():
    model = BUILD / "demo-model"
    assert (model / "config.json").exists(), "the build makes the demo model"
    return model


def reference_reply(model, messages):
    """The greedy reply to messages: transformers renders the template, the NumPy reference
    generates, Hugging Face tokenizers decodes."""
    import transformers

    hf = transformers.AutoTokenizer.from_pretrained(str(model))
    text = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    ids = tok.encode(text, add_special_tokens=not text.startswith(hf.bos_token)).ids
    eos = json.loads((model / "config.json").read_text())["eos_token_id"]
    out, _ = LlamaNumpy(model).greedy(ids, REPLY_TOKENS, eos_ids=[eos])
    return tok.decode([t for t in out if t != eos], skip_special_tokens=True)


def test_chat_turns_equal_the_reference(demo):
    proc = folio("chat", "--demo", "--temperature", 0, "--max-tokens", REPLY_TOKENS, "--stats",
                 "--threads", 1, "--system", "You are terse.",
                 stdin="Hello there!\nAnd what about 2+2?\n/exit\nnot read\n")
    assert proc.returncode == 0, proc.stderr
    replies = proc.stdout.split("\n")
    assert replies[2:] == [""], proc.stdout  # two replies, each ended by a newline

    history = [{"role": "system", "content": "You are terse."},
               {"role": "user", "content": "Hello there!"}]
    assert replies[0] == reference_reply(demo, history)
    history += [{"role": "assistant", "content": replies[0]},
                {"role": "user", "content": "And what about 2+2?"}]
    assert replies[1] == reference_reply(demo, history)
    # The second turn prefilled only what the first left out of the cache.
    stats = [line for line in proc.stderr.splitlines() if line.startswith("[prompt")]
    assert len(stats) == 2 and "(0 reused)" in stats[0] and "(0 reused)" not in stats[1]


def test_chat_ends_at_end_of_input_and_resets(demo):
    args = ["chat", "--demo", "--temperature", 0, "--max-tokens", REPLY_TOKENS, "--threads", 1]
    once = folio(*args, stdin="Hello there!\n")
    assert once.returncode == 0, once.stderr
    # /reset forgets the conversation: the same message gets the same first reply.
    again = folio(*args, stdin="Hi\n/reset\n\nHello there!")
    assert again.returncode == 0, again.stderr
    assert again.stdout.split("\n")[1] == once.stdout.split("\n")[0]
    assert folio(*args, stdin="").stdout == ""


def test_generate_chat_equals_the_reference(demo):
    proc = folio("generate", "--demo", "--chat", "--prompt", "Hello there!", "--max-tokens",
                 REPLY_TOKENS, "--threads", 1)
    assert proc.returncode == 0, proc.stderr
    want = reference_reply(demo, [{"role": "user", "content": "Hello there!"}])
    assert proc.stdout == want + "\n"


@pytest.mark.parametrize("command", ["chat", "generate", "serve"])
def test_model_and_demo_exclude_each_other(demo, command):
    extra = ["--prompt", "hi", "--max-tokens", 1] if command == "generate" else []
    proc = folio(command, "--model", demo, "--demo", *extra, timeout=60)
    assert proc.returncode == 2 and "exclude each other" in proc.stderr, proc.stderr


def test_chat_bad_arguments(demo):
    for args, message in ((["--max-tokens", 0], "--max-tokens"),
                          (["--max-tokens", 5000, "--max-context", 4096], "--max-context"),
                          (["--bogus", 1], "--bogus"), (["--temperature"], "needs a value")):
        proc = folio("chat", "--demo", *args, stdin="")
        assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)


def test_smollm2_answers_in_english():
    """The real default: no --model, the question through SmolLM2's chat template."""
    smollm2_gguf()
    proc = folio("generate", "--chat", "--prompt",
                 "What is the capital of France? Answer in one sentence.", "--max-tokens", 32,
                 "--temperature", 0, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "Paris" in proc.stdout, proc.stdout


def readme_quickstart():
    """(path, request body, the answer shown) of the README's quickstart curl command, taken
    literally from README.md."""
    readme = (REPO / "README.md").read_text()
    block = readme.split("## Quickstart", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    path = re.search(r"curl -s localhost:8000(/v1/\S+)", block).group(1)
    body = json.loads(re.search(r"-d '([^']*)'", block).group(1))
    shown = re.search(r'^# \.\.\. "content":"([^"]*)" \.\.\.$', block, re.M).group(1)
    return path, body, shown


def test_serve_without_model_serves_smollm2():
    """`folio serve` alone: the README's quickstart request, sent as the README writes it, gets
    the answer the README shows, every time (a newcomer sees what the README promises)."""
    smollm2_gguf()
    path, body, shown = readme_quickstart()
    server = Server(None, free_port())
    try:
        server.wait_health(200)
        client = openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0,
                               timeout=300)
        name = client.models.list().data[0].id
        assert "SmolLM2" in name and body["model"] == name
        for _ in range(3):
            r = httpx.post(server.base + path, json=body, timeout=120)
            assert r.status_code == 200, r.text
            choice = r.json()["choices"][0]
            assert choice["message"]["content"] == shown, (body, choice)
            assert choice["finish_reason"] == "stop"  # <|im_end|>, SmolLM2's EOS
        assert "the model recommends no sampling settings" in server.logs()
    finally:
        server.stop()
