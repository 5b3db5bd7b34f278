"""Tool calling and reasoning output end to end (issue 57): `folio serve` on the CPU backend with the
real default model, SmolLM2-135M-Instruct, behind the ChatML tool template Folio ships for it
(assets/templates/tool_chat_template_smollm2_hermes.jinja) with --enable-auto-tool-choice
--tool-call-parser hermes --reasoning-parser qwen3.

- tool_choice "required" and a named function: the grammar holds the model to calls whose
  arguments validate against the function's parameters (Python's jsonschema judges), at
  temperature 1 over several seeds, sent together.
- Streaming: the deltas of a stream (content, reasoning_content, tool_calls by index) joined as a
  client joins them equal the non-streamed message of the same seeded request, byte for byte, for
  required, a named function, auto (the hermes parser) and the reasoning parser.
- The round trip: an assistant's tool_calls and the tool's answer rendered back through the
  template (as jinja2 renders it), and answered.
- 400s naming the field: unknown tool_choice name, a schema the grammar refuses, a tool message
  without tool_call_id, auto on a server without a parser.
- The openai SDK's tool loop and LangChain's bind_tools agent loop against the server.
The parsers' split-point replays are tests/unit/test_tool_parsers.c."""
import concurrent.futures
import json
from typing import Literal

import httpx
import jinja2.ext
import jsonschema
import openai
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment
from pydantic import BaseModel, Field

from conftest import BUILD, REPO, smollm2_gguf
from test_serve_e2e import Server, free_port, sse_events

# The sanitizer build runs SmolLM2 at about a token a second: there the grammar's guarantees
# are checked on the tiny random-weight model, and the client libraries' tests (which do not
# depend on the build) run in the normal build only.
SANITIZED = "FOLIO_SANITIZE:BOOL=ON" in (BUILD / "CMakeCache.txt").read_text()
TEMPLATE = REPO / "assets" / "templates" / "tool_chat_template_smollm2_hermes.jinja"
MAX_TOKENS = 48

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
                   "properties": {"city": {"type": "string", "maxLength": 24},
                                  "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Get the local time of a time zone",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["tz"],
                   "properties": {"tz": {"type": "string", "maxLength": 24},
                                  "hour24": {"type": "boolean"}}}}}
TOOLS = [WEATHER, TIME]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "user", "content": "What is the weather in Paris right now?"}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


@pytest.fixture(scope="module")
def server(request):
    if not SANITIZED:
        smollm2_gguf()
    s = Server(request.getfixturevalue("tiny_model") if SANITIZED else None, free_port(),
               "--frontends", "1", "--chat-template", str(TEMPLATE), "--enable-auto-tool-choice",
               "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3")
    try:
        s.wait_health(200, timeout=180)
        s.model_name = httpx.get(s.base + "/v1/models", timeout=10).json()["data"][0]["id"]
        yield s
    finally:
        s.stop()


def post(server, body, timeout=900):
    return httpx.post(server.base + "/v1/chat/completions",
                      json={"model": server.model_name, **body}, timeout=timeout)


def chat(server, **body):
    r = post(server, body)
    assert r.status_code == 200, r.text
    return r.json()


def streamed(server, **body):
    """The stream's chunks joined as a client joins them: {"content", "reasoning_content",
    "tool_calls"} and the finish reason. Each call begins once (index in order, id, type, name) and
    only the call begun last grows."""
    msg = {"content": "", "reasoning_content": "", "tool_calls": []}
    finish = None
    with httpx.stream("POST", server.base + "/v1/chat/completions", timeout=900,
                      json={"model": server.model_name, **body, "stream": True}) as r:
        assert r.status_code == 200, r.read()
        events = sse_events(list(r.iter_lines()))
    assert events[-1] == "[DONE]"
    for e in events[:-1]:
        choice = json.loads(e)["choices"][0]
        delta = choice["delta"]
        for key in ("content", "reasoning_content"):
            msg[key] += delta.get(key) or ""
        for tc in delta.get("tool_calls", []):
            calls = msg["tool_calls"]
            if "id" in tc:
                assert tc["index"] == len(calls) and tc["type"] == "function", tc
                calls.append({"id": tc["id"], "type": "function",
                              "function": {"name": tc["function"]["name"], "arguments": ""}})
            assert tc["index"] == len(calls) - 1, tc
            calls[-1]["function"]["arguments"] += tc["function"].get("arguments", "")
        finish = choice["finish_reason"] or finish
    return msg, finish


def whole_message(response):
    """The non-streamed message in the stream's terms (null as "", no calls as [])."""
    m = response["choices"][0]["message"]
    return {"content": m.get("content") or "", "reasoning_content": m.get("reasoning_content") or "",
            "tool_calls": m.get("tool_calls") or []}


def without_ids(msg):
    return {**msg, "tool_calls": [{**c, "id": None} for c in msg["tool_calls"]]}


def valid_call(call):
    """A call names one of the tools and its arguments validate against its parameters."""
    fn = call["function"]
    assert fn["name"] in SCHEMAS, call
    jsonschema.validate(json.loads(fn["arguments"]), SCHEMAS[fn["name"]])
    assert call["type"] == "function" and call["id"].startswith("chatcmpl-tool-"), call


# ---- the grammar's calls ---------------------------------------------------------------------

SEEDS = [1, 2]


def test_required_and_named_calls_validate(server):
    """At temperature 1 the model's calls under tool_choice required (with and without parallel
    calls) and a named function always parse and validate; requests go together."""
    bodies = []
    for seed in SEEDS:
        for choice, parallel in (("required", True), ("required", False), (NAMED, True)):
            bodies.append({"messages": ASK, "tools": TOOLS, "tool_choice": choice, "seed": seed,
                           "parallel_tool_calls": parallel, "temperature": 1,
                           "max_tokens": MAX_TOKENS})
    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as ex:
        results = list(ex.map(lambda b: chat(server, **b), bodies))
    length = 0
    for body, r in zip(bodies, results):
        choice = r["choices"][0]
        calls = choice["message"]["tool_calls"]
        if choice["finish_reason"] == "length":
            length += 1  # cut by max_tokens: the grammar's prefix, not judged
            continue
        named = isinstance(body["tool_choice"], dict)
        assert choice["finish_reason"] == ("stop" if named else "tool_calls"), choice
        assert choice["message"]["content"] is None, choice
        assert len(calls) >= 1 and (body["parallel_tool_calls"] or len(calls) == 1), calls
        for call in calls:
            valid_call(call)
            if named:
                assert call["function"]["name"] == "get_weather"
    assert SANITIZED or length <= 1, f"{length} of {len(bodies)} ended by max_tokens"


# ---- streaming equals the whole answer ---------------------------------------------------------

CASES = {
    "required": {"messages": ASK, "tools": TOOLS, "tool_choice": "required"},
    "named": {"messages": ASK, "tools": TOOLS, "tool_choice": NAMED},
    "auto": {"messages": ASK, "tools": TOOLS},
    # the model made to think by a regex, read by the qwen3 reasoning parser
    "reasoning": {"messages": ASK, "guided_regex": "<think>[a-z ]{1,40}</think>[A-Z][a-z ,.]{1,40}"},
}


@pytest.mark.parametrize("case", list(CASES))
def test_stream_equals_whole_response(server, case):
    """The same seeded request streamed and not: the stream's content, reasoning and every call's
    name and arguments, joined, equal the whole message byte for byte (ids differ per request)."""
    body = {**CASES[case], "temperature": 1, "seed": 11, "max_tokens": MAX_TOKENS}
    whole = chat(server, **body)
    msg, finish = streamed(server, **body)
    assert without_ids(msg) == without_ids(whole_message(whole))
    assert finish == whole["choices"][0]["finish_reason"]
    if case == "reasoning" and not SANITIZED:
        assert msg["reasoning_content"] and msg["content"], msg
        assert "<think>" not in msg["content"] + msg["reasoning_content"]


def test_auto_answer_without_calls_is_content(server):
    """tool_choice auto where the model answers in words: content as without tools."""
    r = chat(server, messages=[{"role": "user", "content": "Say hello."}], tools=TOOLS,
             temperature=0, max_tokens=24)
    m = r["choices"][0]["message"]
    if "<tool_call>" not in (m["content"] or ""):  # SmolLM2 answers in words here
        assert "tool_calls" not in m and m["content"], m
        assert r["choices"][0]["finish_reason"] in ("stop", "length")


# ---- the round trip ----------------------------------------------------------------------------

def render_like_transformers(messages, tools):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, **kw: json.dumps(x, ensure_ascii=False, **kw)
    return env.from_string(TEMPLATE.read_text()).render(
        messages=messages, tools=tools, add_generation_prompt=True, bos_token="<|im_start|>",
        eos_token="<|im_end|>")


def test_round_trip_through_the_template(server):
    """A required call comes back as the assistant's tool_calls with the tool's answer: the
    prompt is the template's rendering (jinja2's, arguments parsed), and the model answers."""
    first = chat(server, messages=ASK, tools=TOOLS, tool_choice=NAMED, temperature=0,
                 max_tokens=MAX_TOKENS)
    call = first["choices"][0]["message"]["tool_calls"][0]
    if first["choices"][0]["finish_reason"] == "length":
        assert SANITIZED, first  # the random-weight model's arguments may run to max_tokens
        call["function"]["arguments"] = '{"city": "Paris", "unit": "celsius"}'
    messages = ASK + [{"role": "assistant", "content": None, "tool_calls": [call]},
                      {"role": "tool", "tool_call_id": call["id"], "content": "18 celsius, sunny"}]
    r = httpx.post(server.base + "/tokenize", json={"model": server.model_name,
                                                    "messages": messages, "tools": TOOLS,
                                                    "add_special_tokens": False},
                   timeout=30)
    assert r.status_code == 200, r.text
    text = httpx.post(server.base + "/detokenize", json={"model": server.model_name,
                                                         "tokens": r.json()["tokens"]},
                      timeout=30).json()["prompt"]
    template_messages = [
        ASK[0], {"role": "assistant", "content": "", "tool_calls": [
            {**call, "function": {"name": call["function"]["name"],
                                  "arguments": json.loads(call["function"]["arguments"])}}]},
        {"role": "tool", "tool_call_id": call["id"], "content": "18 celsius, sunny"}]
    assert text == render_like_transformers(template_messages, TOOLS)
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": ' in text
    assert "<tool_response>\n18 celsius, sunny\n</tool_response>" in text
    r = chat(server, messages=messages, tools=TOOLS, tool_choice="none", temperature=0,
             max_tokens=32)
    assert r["choices"][0]["message"]["content"], r
    assert "tool_calls" not in r["choices"][0]["message"]


# ---- bad requests ------------------------------------------------------------------------------

BAD_SCHEMA_TOOL = {"type": "function", "function": {
    "name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "strin"}}}}}
REFUSED = [
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_news"}}},
     "tool_choice", "'get_news', which is not in 'tools'"),
    ({"tools": [BAD_SCHEMA_TOOL], "tool_choice": "required"}, "tools[0].function.parameters",
     "invalid json_schema"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}]},
     "tools[0].function.parameters", "a JSON schema object"),
    ({"tools": TOOLS, "messages": ASK + [{"role": "tool", "content": "18 C"}]}, "messages",
     "'messages[1].tool_call_id' is required"),
    ({"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}},
     "tool_choice", "one structured output constraint"),
]


def test_bad_tool_requests_are_400s(server):
    for extra, param, want in REFUSED:
        r = post(server, {"messages": ASK, **extra}, timeout=60)
        assert r.status_code == 400, (extra, r.text)
        err = r.json()["error"]
        assert err["param"] == param and want in err["message"], (extra, err)


def test_auto_needs_a_parser(tiny_model):
    """Without --enable-auto-tool-choice, tools with tool_choice auto (the default) are vLLM's
    400; required and named still work (the grammar needs no parser)."""
    s = Server(tiny_model, free_port(), "--frontends", "1")
    try:
        s.wait_health(200, timeout=120)
        name = httpx.get(s.base + "/v1/models", timeout=10).json()["data"][0]["id"]
        for choice in (None, "auto"):
            body = {"model": name, "messages": ASK, "tools": TOOLS, "max_tokens": 4,
                    **({"tool_choice": choice} if choice else {})}
            r = httpx.post(s.base + "/v1/chat/completions", json=body, timeout=60)
            assert r.status_code == 400, r.text
            assert r.json()["error"]["param"] == "tool_choice"
            assert "--enable-auto-tool-choice" in r.json()["error"]["message"]
        r = httpx.post(s.base + "/v1/chat/completions", timeout=300,
                       json={"model": name, "messages": ASK, "tools": TOOLS, "tool_choice": NAMED,
                             "max_tokens": 48})
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["tool_calls"], r.text
    finally:
        s.stop()


# ---- the clients' agent loops ------------------------------------------------------------------

clients_only_in_normal_build = pytest.mark.skipif(
    SANITIZED, reason="the clients' requests do not depend on the build; SmolLM2 runs in the normal one")


def get_weather(city: str, unit: str = "celsius") -> str:
    """Get the current weather in a city."""
    return f"18 {unit}, sunny in {city}"


@clients_only_in_normal_build
def test_openai_sdk_tool_loop(server):
    """The openai SDK's loop: ask with tools, run the function the model calls, send its result
    back as a tool message, get the answer."""
    client = openai.OpenAI(base_url=server.base + "/v1", api_key="none", max_retries=0, timeout=600)
    messages = list(ASK)
    first = client.chat.completions.create(model=server.model_name, messages=messages,
                                           tools=[WEATHER], tool_choice="required",
                                           parallel_tool_calls=False, temperature=0,
                                           max_tokens=MAX_TOKENS)
    message = first.choices[0].message
    assert first.choices[0].finish_reason == "tool_calls" and message.tool_calls, first
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls:
        assert call.function.name == "get_weather"
        result = get_weather(**json.loads(call.function.arguments))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    second = client.chat.completions.create(model=server.model_name, messages=messages,
                                            tools=[WEATHER], temperature=0, max_tokens=48)
    assert second.choices[0].message.content, second
    assert second.choices[0].finish_reason in ("stop", "length", "tool_calls")


class WeatherArgs(BaseModel):
    city: str = Field(max_length=24, description="the city")
    unit: Literal["celsius", "fahrenheit"] = "celsius"


@clients_only_in_normal_build
def test_langchain_bind_tools_agent(server):
    """LangChain's bind_tools agent: the model's AIMessage.tool_calls run as tools, their
    ToolMessages go back, and the model answers. strict=True is OpenAI's strict mode, which
    LangChain turns into additionalProperties false: without it the schema lets the model add
    properties of its own, and SmolLM2 does."""
    from langchain_core.messages import HumanMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    weather = tool(get_weather, args_schema=WeatherArgs)
    llm = ChatOpenAI(model=server.model_name, base_url=server.base + "/v1", api_key="none",
                     temperature=0, max_tokens=MAX_TOKENS, max_retries=0, timeout=600)
    agent = llm.bind_tools([weather], tool_choice="get_weather", strict=True)
    messages = [HumanMessage("What is the weather in Paris right now?")]
    ai = agent.invoke(messages)
    assert ai.tool_calls and ai.tool_calls[0]["name"] == "get_weather", ai
    WeatherArgs.model_validate(ai.tool_calls[0]["args"])
    messages.append(ai)
    for call in ai.tool_calls:
        messages.append(weather.invoke(call))  # a ToolMessage answering the call's id
    answer = llm.bind_tools([weather]).invoke(messages)
    assert answer.content, answer
    # streamed, the chunks add up to the same call
    chunks = None
    for chunk in agent.stream(messages[:1]):
        chunks = chunk if chunks is None else chunks + chunk
    assert [(c["name"], c["args"]) for c in chunks.tool_calls] == \
        [(c["name"], c["args"]) for c in ai.tool_calls], chunks
