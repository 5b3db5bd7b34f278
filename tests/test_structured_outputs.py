"""Structured outputs end to end (issue 54): `folio serve` on the CPU backend with the real default
model, SmolLM2-135M-Instruct, sampling at temperature 1 under every constraint a request can
carry, each output checked by an independent judge.

- Every JSON schema of tests/fixtures/grammar_schemas.py as response_format json_schema: each
  output that finishes ("stop") must be valid under its schema (Python's jsonschema with the
  draft's format checker); a few may run into max_tokens ("length": a string or a number whose
  digits the model does not stop), and there must be few.
- Regexes, choice lists and (bounded) Lark grammars through vLLM's structured_outputs and its
  older guided_* fields, judged by re.fullmatch, membership and Python's lark parser; each must
  end with "stop".
- Streaming gives the text a non-streamed request gives for the same seed; n=2; json_object.
- 400s naming the field for an invalid schema, regex or grammar and for two constraints, in
  bounded time.
- The openai SDK's beta.chat.completions.parse with a Pydantic model, and LangChain's
  with_structured_output over langchain-openai.

Requests go to the server at once (its 64 slots run them side by side): the engine's compile
cache, the masks of many sequences per step and their commits all run under load. The
preemption path (a recomputed sequence's matcher replays its tokens) is
tests/test_scheduler_sim.py's test_cpu_worker_grammar_across_preemptions."""
import concurrent.futures
import json
import re
import time
from typing import Literal

import httpx
import lark
import openai
import pytest
from pydantic import BaseModel, Field

from conftest import BUILD, smollm2_gguf
from grammar_schemas import CHOICES, REGEXES, SCHEMAS, schema_validator
from test_serve_e2e import Server, free_port, sse_events

# The sanitizer build (Debug, ASan) runs SmolLM2 at about a token a second: there the same
# requests go to the tiny random-weight model, whose outputs are just as constrained but, sampled
# from random logits, need not end (a JSON string may run to max_tokens); the client libraries'
# tests, which do not depend on the build, run in the normal build only.
SANITIZED = "FOLIO_SANITIZE:BOOL=ON" in (BUILD / "CMakeCache.txt").read_text()
SEED = 7
MAX_TOKENS = 96 if SANITIZED else 192
# At most this many of the schemas' outputs may end by max_tokens (one in six): 4 of 61 with the
# schema in the prompt, a count that moves with the batch a request shares (its float sums).
MAX_LENGTH_FINISHES = 10
SYSTEM = "You write short, compact JSON: brief strings, few items, short numbers."


def finished(finish):
    """Whether the output ended by itself ("stop"); SmolLM2's outputs here must."""
    assert finish == "stop" or (SANITIZED and finish == "length"), finish
    return finish == "stop"


@pytest.fixture(scope="module")
def server(request):
    if not SANITIZED:
        smollm2_gguf()  # folio serve's default model, which it serves without --model
    s = Server(request.getfixturevalue("tiny_model") if SANITIZED else None, free_port(),
               "--frontends", "1")
    try:
        s.wait_health(200, timeout=180)
        s.model_name = httpx.get(s.base + "/v1/models", timeout=10).json()["data"][0]["id"]
        yield s
    finally:
        s.stop()


def post(server, path, body, timeout=900):
    body = {"model": server.model_name, **body}
    return httpx.post(server.base + path, json=body, timeout=timeout)


def all_at_once(fn, items):
    with concurrent.futures.ThreadPoolExecutor(len(items)) as ex:
        return list(ex.map(fn, items))


def schema_messages(name):
    """The schema in the prompt, as clients write it: a model that reads it ends its values more
    often than one that only has the mask (half as many run into max_tokens)."""
    compact = json.dumps(SCHEMAS[name], separators=(",", ":"))
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Give one JSON value for this JSON schema: " + compact}]


@pytest.fixture(scope="module")
def schema_outputs(server):
    """name -> (finish_reason, text) of every schema's request, sent together."""
    def one(name):
        body = {"messages": schema_messages(name),
                "response_format": {"type": "json_schema",
                                    "json_schema": {"name": name, "schema": SCHEMAS[name], "strict": True}},
                "temperature": 1, "seed": SEED, "max_tokens": MAX_TOKENS}
        r = post(server, "/v1/chat/completions", body)
        assert r.status_code == 200, (name, r.text)
        choice = r.json()["choices"][0]
        return choice["finish_reason"], choice["message"]["content"]

    t0 = time.time()
    out = dict(zip(SCHEMAS, all_at_once(one, list(SCHEMAS))))
    length = sorted(n for n, (f, _) in out.items() if f == "length")
    print(f"\n{len(SCHEMAS)} schemas in {time.time() - t0:.0f} s; ended by max_tokens "
          f"({MAX_TOKENS}): {len(length)} {length}")
    return out


def test_suite_size():
    assert len(SCHEMAS) >= 50


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_schema_output_is_valid(schema_outputs, name):
    finish, text = schema_outputs[name]
    assert finish in ("stop", "length"), finish
    if finish == "length":
        return  # counted below: a prefix of a valid value, cut
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        pytest.fail(f"{name}: not JSON ({e}): {text!r}")
    errors = [e.message for e in schema_validator(SCHEMAS[name]).iter_errors(value)]
    assert not errors, f"{name}: {text!r} breaks its schema: {errors}"


def test_few_schema_outputs_end_by_length(schema_outputs):
    length = [n for n, (f, _) in schema_outputs.items() if f == "length"]
    assert SANITIZED or len(length) <= MAX_LENGTH_FINISHES, length


def judge(kind, name, text):
    if kind == "regex":
        return re.fullmatch(REGEXES[name], text) is not None
    if kind == "choice":
        return text in CHOICES[name]
    try:
        lark.Lark(BOUNDED_LARK[name], start="start").parse(text)
        return True
    except lark.exceptions.LarkError:
        return False


# Lark grammars whose texts are bounded: the fixture's (tests/test_grammar.py walks them) repeat
# without end, which a model at temperature 1 may well do until max_tokens.
BOUNDED_LARK = {
    "sum": 'start: NUMBER " + " NUMBER " = " NUMBER\nNUMBER: /[0-9]{1,4}/\n',
    "sql_select": ('start: "SELECT " NAME (", " NAME)? (", " NAME)? " FROM " NAME where? ";"\n'
                   'where: " WHERE " NAME " = " NUMBER\nNAME: /[a-z_]{1,10}/\nNUMBER: /[0-9]{1,5}/\n'),
    "key_value_lines": ('start: pair pair? pair?\npair: KEY "=" VALUE "\\n"\nKEY: /[a-z]{1,8}/\n'
                        'VALUE: /[0-9]{1,5}/\n'),
}
TABLES = {"regex": REGEXES, "choice": CHOICES, "grammar": BOUNDED_LARK}
# Each grammar twice: in structured_outputs on chat, in guided_* on completions.
GRAMMARS = [(k, n) for k, table in TABLES.items() for n in table]


def grammar_value(kind, name):
    return TABLES[kind][name]


@pytest.fixture(scope="module")
def grammar_outputs(server):
    def one(case):
        (kind, name), endpoint = case
        value = grammar_value(kind, name)
        if endpoint == "chat":
            body = {"messages": [{"role": "user", "content": f"Write a short {name.replace('_', ' ')}."}],
                    "structured_outputs": {kind: value}}
            path = "/v1/chat/completions"
        else:
            body = {"prompt": f"A short {name.replace('_', ' ')}:", f"guided_{kind}": value}
            path = "/v1/completions"
        body.update(temperature=1, seed=SEED, max_tokens=MAX_TOKENS)
        r = post(server, path, body)
        assert r.status_code == 200, (case, r.text)
        choice = r.json()["choices"][0]
        text = choice["message"]["content"] if endpoint == "chat" else choice["text"]
        return choice["finish_reason"], text

    cases = [(g, e) for g in GRAMMARS for e in ("chat", "completions")]
    return dict(zip(cases, all_at_once(one, cases)))


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
@pytest.mark.parametrize("kind,name", GRAMMARS)
def test_grammar_output_is_valid(grammar_outputs, kind, name, endpoint):
    finish, text = grammar_outputs[((kind, name), endpoint)]
    assert finish == "stop", (finish, text)
    assert judge(kind, name, text), f"{kind} {name}: {text!r}"


def test_json_object(server):
    r = post(server, "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Describe a cat as a JSON object."}],
        "response_format": {"type": "json_object"}, "temperature": 1, "seed": SEED,
        "max_tokens": MAX_TOKENS})
    choice = r.json()["choices"][0]
    if finished(choice["finish_reason"]):
        assert isinstance(json.loads(choice["message"]["content"]), dict)


PERSON = SCHEMAS["person"]


def test_stream_equals_whole_response(server):
    body = {"messages": schema_messages("person"), "temperature": 1, "seed": 11, "max_tokens": MAX_TOKENS,
            "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}}
    whole = post(server, "/v1/chat/completions", body).json()["choices"][0]
    with httpx.stream("POST", server.base + "/v1/chat/completions", timeout=600,
                      json={"model": server.model_name, **body, "stream": True}) as r:
        assert r.status_code == 200
        events = [json.loads(e) for e in sse_events(r.iter_lines()) if e != "[DONE]"]
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    finish = [e["choices"][0]["finish_reason"] for e in events if e["choices"]][-1]
    assert (text, finish) == (whole["message"]["content"], whole["finish_reason"])
    if finished(finish):
        assert not list(schema_validator(PERSON).iter_errors(json.loads(text)))


def test_n_samples_each_valid(server):
    r = post(server, "/v1/chat/completions", {
        "messages": schema_messages("person"), "n": 2, "temperature": 1, "seed": SEED,
        "max_tokens": MAX_TOKENS,
        "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}})
    choices = r.json()["choices"]
    assert [c["index"] for c in choices] == [0, 1]
    for c in choices:
        if finished(c["finish_reason"]):
            assert not list(schema_validator(PERSON).iter_errors(json.loads(c["message"]["content"])))


def test_max_tokens_ends_with_length(server):
    r = post(server, "/v1/chat/completions", {
        "messages": schema_messages("person"), "temperature": 1, "seed": SEED, "max_tokens": 3,
        "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}})
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"].lstrip().startswith("{")


REFUSED = [
    # (body, param, what the message says)
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "strin"}}}},
     "response_format", "invalid json_schema: "),
    ({"structured_outputs": {"json": {"type": "array", "maxItems": 5000000}}},
     "structured_outputs.json", "maxItems 5e+06 is over the limit of 10000"),
    ({"guided_json": '{"type": "object", "properties": {'}, "guided_json", "invalid json_schema: "),
    ({"structured_outputs": {"regex": "[a-z"}}, "structured_outputs.regex", "unclosed character class"),
    ({"guided_regex": "(a"}, "guided_regex", "invalid regex: "),
    ({"guided_choice": ["yes", None]}, "guided_choice", "item 1 is not a string"),
    ({"structured_outputs": {"choice": []}}, "structured_outputs.choice", "invalid choice: "),
    ({"structured_outputs": {"grammar": "start: item\n"}}, "structured_outputs.grammar", 'unknown name: "item"'),
    ({"guided_grammar": 'root ::= "a"'}, "guided_grammar", "invalid lark: "),
    ({"response_format": {"type": "json_object"}, "guided_regex": "a+"}, "guided_regex",
     "'response_format' and 'guided_regex'"),
    ({"structured_outputs": {"regex": "a", "json": {}}}, "structured_outputs.regex",
     "'structured_outputs.json' and 'structured_outputs.regex'"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "response_format",
     "must be a JSON schema"),
    ({"structured_outputs": {"structural_tag": "{}"}}, "structured_outputs",
     "'structured_outputs.structural_tag' is not supported"),
]


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_invalid_constraints_are_400s(server, endpoint):
    for extra, param, want in REFUSED:
        body = ({"messages": [{"role": "user", "content": "hi"}]} if endpoint == "chat"
                else {"prompt": "hi"})
        t0 = time.time()
        r = post(server, "/v1/chat/completions" if endpoint == "chat" else "/v1/completions",
                 {**body, **extra}, timeout=30)
        assert time.time() - t0 < 10, extra
        assert r.status_code == 400, (extra, r.text)
        err = r.json()["error"]
        assert err["param"] == param and want in err["message"], (extra, err)
        assert "<non-verbose/>" not in err["message"] and "backtrace" not in err["message"]


class Pet(BaseModel):
    name: str = Field(max_length=16)
    species: Literal["cat", "dog", "bird"]
    age: int = Field(ge=0, le=30)


clients_only_in_normal_build = pytest.mark.skipif(
    SANITIZED, reason="the clients' requests do not depend on the build; SmolLM2 runs in the normal one")


@clients_only_in_normal_build
def test_openai_sdk_parse(server):
    client = openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0, timeout=600)
    completion = client.beta.chat.completions.parse(
        model=server.model_name, response_format=Pet, temperature=1, seed=SEED,
        max_tokens=MAX_TOKENS,
        messages=[{"role": "user", "content": "Invent a pet. Answer in JSON."}])
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "stop"
    assert isinstance(message.parsed, Pet), message
    assert message.parsed == Pet.model_validate_json(message.content)


@clients_only_in_normal_build
def test_langchain_with_structured_output(server):
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model=server.model_name, base_url=server.base + "/v1", api_key="none",
                     temperature=1, seed=SEED, max_tokens=MAX_TOKENS, max_retries=0, timeout=600)
    pet = llm.with_structured_output(Pet, method="json_schema").invoke(
        "Invent a pet. Answer in JSON.")
    assert isinstance(pet, Pet), pet
