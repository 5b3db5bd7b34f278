"""Folio's chat-template interpreter against Python jinja2, set up exactly as
Hugging Face transformers' apply_chat_template sets it up.

Every case goes through tests/tools/render_template (one process per batch,
so this also runs quickly under the ASan build) and must equal jinja2's
rendering byte for byte; where jinja2 raises, the C renderer must fail too,
with the very message when the template called raise_exception."""

import json
import pathlib
import random
import subprocess
from datetime import datetime

import jinja2
import jinja2.ext
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from conftest import bin_path

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEMPLATES = sorted((ROOT / "tests" / "fixtures" / "chat_templates").glob("*.jinja"))


class RaisedByTemplate(Exception):
    pass


class GenerationTag(jinja2.ext.Extension):
    """transformers' AssistantTracker: {% generation %} renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("_generation", [])
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _generation(self, caller):
        return caller()


def hf_environment():
    """transformers.utils.chat_template_utils._compile_jinja_template."""

    def raise_exception(message):
        raise RaisedByTemplate(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = hf_environment()


_COMPILED = {}


def reference(case):
    """("output", text) or ("raised", message) or ("error", description)."""
    try:
        src = case["template"]
        if src not in _COMPILED:
            _COMPILED[src] = ENV.from_string(src)
        tmpl = _COMPILED[src]
        ctx = {"tools": None, "documents": None}
        ctx.update(case.get("vars", {}))
        for k in ("messages", "add_generation_prompt", "bos_token", "eos_token"):
            if k in case:
                ctx[k] = case[k]
        return "output", tmpl.render(**ctx)
    except RaisedByTemplate as e:
        return "raised", str(e)
    except Exception as e:  # noqa: BLE001 - any jinja2 failure is an expected error
        return "error", f"{type(e).__name__}: {e}"


def render_batch(cases):
    proc = subprocess.run([str(bin_path("render_template"))], input=json.dumps(cases).encode(),
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    results = json.loads(proc.stdout)
    assert len(results) == len(cases)
    return results


def compare(cases, names):
    failures = []
    for case, got, name in zip(cases, render_batch(cases), names):
        kind, want = reference(case)
        if kind == "output":
            if got.get("output") != want:
                failures.append(f"{name}: jinja2 {want!r}\n   folio {got!r}")
        elif kind == "raised":
            if got.get("error") != want:
                failures.append(f"{name}: jinja2 raised {want!r}, folio {got!r}")
        elif "error" not in got:
            failures.append(f"{name}: jinja2 failed ({want}), folio rendered {got!r}")
    return failures


# ---- conversations ----

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
            },
            "required": ["city"],
        },
        "return": {"type": "object"},
    },
}, {
    "type": "function",
    "function": {"name": "noop", "description": "Does nothing \"at all\" — ünïcode",
                 "parameters": {"type": "object", "properties": {}}},
}]


def m(role, content):
    return {"role": role, "content": content}


LONG = [m("system", "You are a careful assistant.")]
for i in range(40):
    LONG.append(m("user", f"Question number {i}: what is {i} * {i}?"))
    LONG.append(m("assistant", f"  {i * i}  "))
LONG.append(m("user", "Thanks!"))

CONVERSATIONS = {
    "user": [m("user", "Hello!")],
    "system_user": [m("system", "You are a pirate."), m("user", "Hi there")],
    "turns": [m("user", "Hi"), m("assistant", "Hello! How can I help?"), m("user", "Tell a joke")],
    "system_turns": [m("system", "  Be brief.  "), m("user", "What is 2+2?"),
                     m("assistant", "4"), m("user", "And 3+3?"), m("assistant", "6")],
    "empty_content": [m("system", ""), m("user", ""), m("assistant", ""), m("user", "")],
    "unicode": [m("user", "héllo wörld — 中文测试 🎉 Ελληνικά кириллица"),
                m("assistant", "\u3000全角スペース\u3000"), m("user", "\xa0nbsp\u2003em\u2009")],
    "jinja_text": [m("user", "{{ x }} {% if true %}yes{% endif %} {# c #} {{- y -}}"),
                   m("assistant", "{% raw %}{{ not rendered }}{% endraw %}"),
                   m("user", "'quotes' \"double\" \\backslash\\ \t tab")],
    "whitespace": [m("user", "  leading and trailing  \n\n"), m("assistant", "\n\nanswer\n"),
                   m("user", "line1\r\nline2\rline3\n")],
    "long": LONG,
    "not_alternating": [m("user", "one"), m("user", "two")],
    "assistant_first": [m("assistant", "I start"), m("user", "ok")],
    "system_only": [m("system", "Only a system prompt")],
    "unknown_role": [m("user", "hi"), m("critic", "bad")],
    "none_content": [m("user", None)],
    "think": [m("user", "Solve it"),
              m("assistant", "<think>\nLet me think.\n</think>\n\nThe answer is 4."),
              m("user", "Again?")],
}

TOOL_CONVERSATIONS = {
    "tool_call": [
        m("system", "You can call tools."),
        m("user", "Weather in Paris?"),
        {"role": "assistant", "content": "", "tool_calls": [{
            "id": "abcdefghi", "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
        {"role": "tool", "tool_call_id": "abcdefghi", "content": "{\"temp\": 21}"},
        {"role": "tool", "tool_call_id": "abcdefghi", "content": "second result"},
        m("assistant", "It is 21 °C in Paris."),
        m("user", "Thanks"),
    ],
    "no_tool_calls": [m("user", "Just chat"), m("assistant", "Sure"), m("user", "ok")],
}


def template_cases():
    cases, names = [], []
    for path in TEMPLATES:
        src = path.read_text()
        for conv_name, conv in CONVERSATIONS.items():
            for agp in (True, False):
                cases.append({"template": src, "messages": conv, "add_generation_prompt": agp,
                              "bos_token": "<s>", "eos_token": "</s>"})
                names.append(f"{path.stem}/{conv_name}/agp={agp}")
        for conv_name, conv in TOOL_CONVERSATIONS.items():
            for extra in ({"tools": TOOLS}, {"tools": TOOLS, "tools_in_user_message": False,
                                             "date_string": "01 Jan 2025"},
                          {"builtin_tools": ["brave_search", "code_interpreter"]},
                          {"enable_thinking": False}, {}):
                cases.append({"template": src, "messages": conv, "add_generation_prompt": True,
                              "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                              "vars": extra})
                names.append(f"{path.stem}/{conv_name}/{sorted(extra)}")
    return cases, names


def test_fixture_templates_exist():
    stems = {p.stem for p in TEMPLATES}
    assert {"tinyllama", "llama2_chat", "llama3_instruct", "llama31_instruct", "zephyr",
            "qwen25_chatml", "phi3", "gemma", "mistral_instruct_v01"} <= stems


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.stem)
def test_template_matches_jinja2(path):
    cases, names = template_cases()
    keep = [i for i, n in enumerate(names) if n.startswith(path.stem + "/")]
    failures = compare([cases[i] for i in keep], [names[i] for i in keep])
    assert not failures, "\n".join(failures[:10])


def test_tinyllama_from_tokenizer_config(assets_dir):
    """The template the server will actually load, read from tokenizer_config.json."""
    cfg = json.loads((assets_dir / "models" / "llama2-tokenizer" /
                      "tokenizer_config.json").read_text())
    cases = [{"template": cfg["chat_template"], "messages": conv, "add_generation_prompt": agp,
              "bos_token": cfg["bos_token"], "eos_token": cfg["eos_token"]}
             for conv in CONVERSATIONS.values() for agp in (True, False)]
    failures = compare(cases, [f"case {i}" for i in range(len(cases))])
    assert not failures, "\n".join(failures[:10])


# ---- language features, one snippet each ----

SNIPPETS = [
    # output and literals
    "{{ 'a' }}{{ \"b\" }}{{ 'c' 'd' }}{{ 1 }}{{ 1.5 }}{{ -2 }}{{ true }}{{ none }}{{ False }}",
    "{{ 1.0 }} {{ 1e20 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1/3 }} {{ 2.5e-7 }}",
    "{{ 3//2 }} {{ -3//2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2**10 }} {{ 2**-1 }} {{ 7/2 }} {{ 1_000 }}",
    "{{ [1, 'a', none, true, {'k': 'v'}] }} {{ (1, 2) }} {{ ('a',) }} {{ {} }} {{ [] }}",
    "{{ [\"it's\", 'a\"b', 'x\\ny', 'both\\'\"', '\\t\\\\'] }}",
    "{{ 'esc: \\x41\\u00e9\\n\\t\\101\\q' }}",
    "{{ 1 + 2 * 3 - 4 / 2 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 10 - 2 - 3 }}",
    "{{ 'a' ~ 1 ~ none ~ true ~ undefined_var }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ [1] + [2, 3] }}",
    "{{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}",
    "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ not 1 }}",
    "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' or [] }} {{ none and 1 }} {{ 'a' if 0 else 'b' }}|{{ 'x' if false }}|",
    # whitespace control, trim_blocks, lstrip_blocks
    "  {% if true %}\n  x\n  {% endif %}\n  y  \n",
    "a\n{# comment #}\nb\n  {# indented comment #}\nc",
    "a  {%- if true -%}  b  {%- endif -%}  c\n\n",
    "a\n    {{- ' b ' -}}\n    c",
    "{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\n",
    "{%+ if true %}  kept\n{% endif +%}\nafter",
    "  {%- if true %}\n  x{% endif %}\n  {{ 'v' }}\n",
    "x{% if true %}\r\ny{% endif %}\r\n",
    "{% raw %}{{ not parsed }} {% if %}{% endraw %}\n after raw",
    "line\n",
    "line\n\n",
    "   {% set x = 1 %}   {{ x }}   \n",
    "\t {% if true %}tab-indented{% endif %}\n",
    # variables and scopes
    "{% set x = 0 %}{% for i in range(3) %}[{{ x }}]{% set x = i + 10 %}({{ x }}){% endfor %}{{ x }}",
    "{% for i in range(3) %}{% if i == 1 %}{% set y = 5 %}{% endif %}[{{ y }}]{% endfor %}{{ y }}",
    "{% if true %}{% set z = 3 %}{% endif %}{{ z }}",
    "{% set ns = namespace(a=1, b='x') %}{% for i in range(4) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }} {{ ns.b }} {{ ns }}",
    "{% set ns = namespace() %}{% set ns.found = false %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c }}",
    "{% set s %}block {{ 1 + 1 }}{% endset %}[{{ s }}]",
    "{% set messages = messages[1:] %}{{ messages | length }}",
    # loops
    "{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }} {% endfor %}",
    "{% for m in messages %}{{ loop.previtem.role if loop.previtem is defined else '-' }}>{{ loop.nextitem.role if loop.nextitem is defined else '-' }} {% endfor %}",
    "{% for x in [] %}never{% else %}empty{% endfor %}{% for x in [1] %}once{% else %}no{% endfor %}",
    "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}",
    "{% for k, v in {'a': 1, 'b': 2} | items %}{{ k }}={{ v }};{% endfor %}{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}",
    "{% for c in 'héllo' %}{{ c }}.{% endfor %}",
    "{% for i in range(10) if i % 3 == 0 %}{{ i }}/{{ loop.length }} {% endfor %}",
    "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}",
    "{% for i in range(2) %}{% for j in range(2) %}{{ loop.index }}{{ i }}{{ j }} {% endfor %}{{ loop.index }}|{% endfor %}",
    "{% for i in range(5) %}{{ loop.cycle('odd', 'even') }} {% endfor %}",
    "{{ range(5) | list }} {{ range(2, 10, 3) | list }} {{ range(5, 0, -2) | list }}",
    # access
    "{{ messages[0]['role'] }} {{ messages[0].content }} {{ messages[-1].role }} {{ messages[99] }}|",
    "{{ messages[1:] | length }} {{ messages[:1] | length }} {{ messages[::-1][0].role }} {{ messages[::2] | length }}",
    "{{ 'héllo wörld'[1:4] }} {{ 'abcdef'[::-2] }} {{ 'abc'[-1] }} {{ 'abc'[5:] }}| {{ [1,2,3][1:-1] }}",
    "{{ messages[0].missing }}|{{ messages[0].missing is defined }}|{{ messages[0]['missing'] is defined }}",
    "{{ {'a': {'b': [10, 20]}}.a.b.1 }} {{ {'items': 5}['items'] }} {{ {'get': 1}.get('get') }}",
    "{{ messages[0].get('role') }} {{ messages[0].get('nope', 'dflt') }} {{ messages[0].get('nope') }}",
    "{{ messages[0].keys() | list }} {{ messages[0].values() | list | length }}",
    # tests
    "{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ 'a' is iterable }} {{ 1 is number }} {{ true is number }}",
    "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 1 is integer }} {{ 1.0 is float }}",
    "{{ none is not none }} {{ undefined_thing is undefined }} {{ [] is sequence }} {{ true is boolean }} {{ false is false }} {{ true is true }}",
    "{{ 'a' is equalto 'a' }} {{ 1 is eq 2 }} {{ 2 is gt 1 }} {{ 2 is ge 2 }} {{ 1 is lt 2 }} {{ 'a' is in 'abc' }} {{ 1 is in [2] }} {{ none is sameas none }}",
    "{{ raise_exception is callable }} {{ 'x' is callable }} {{ messages is iterable }} {{ 5 is iterable }}",
    # filters
    "{{ '  x  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ '\u3000\xa0wide\u2003' | trim }}|",
    "{{ 'abc' | length }} {{ 'héllo' | length }} {{ [1, 2] | count }} {{ {'a': 1} | length }}",
    "{{ 'hello world-foo (bar)' | title }} {{ 'hELLO' | capitalize }} {{ 'Ab' | upper }} {{ 'Ab' | lower }}",
    "{{ undefined_thing | default('d') }} {{ '' | default('e') }} {{ '' | default('e', true) }} {{ none | default('n') }} {{ 0 | d(5, boolean=true) }}",
    "{{ [1, 2, 3] | join(', ') }} {{ ['a', 'b'] | join }} {{ messages | join('|', attribute='role') }}",
    "{{ [3, 1, 2] | first }} {{ [3, 1, 2] | last }} {{ 'abc' | first }} {{ 'abc' | last }} {{ [] | first }}|",
    "{{ 'aaa' | replace('a', 'b') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 'ab' | replace('', '-') }}",
    "{{ {'a': [1, 2.5, none, true], 'b': 'é\"\\n'} | tojson }}",
    "{{ {'a': [1, {'c': []}], 'b': {}} | tojson(indent=2) }}",
    "{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }} {{ 'x' | tojson }} {{ none | tojson }} {{ [] | tojson(indent=4) }}",
    "{{ 5 | string }}{{ none | string }}{{ [1] | string | length }} {{ '42' | int + 1 }} {{ '3.9' | int }} {{ 'x' | int }} {{ 3.9 | int }} {{ '0x1A' | int(0, 16) }} {{ 'ff' | int(base=16) }}",
    "{{ '1.5' | float }} {{ 'x' | float }} {{ 2 | float }} {{ 'abc' | list }} {{ {'a': 1} | list }}",
    "{{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ messages | rejectattr('role', 'equalto', 'user') | map(attribute='role') | list }}",
    "{{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 0, 2] | select | list }} {{ [1, 2, 3] | reject('equalto', 2) | list }}",
    "{{ ['a', 'B'] | map('upper') | list }} {{ messages | map(attribute='nope', default='d') | list }}",
    "{{ 'a\nb\n\nc' | indent }}|{{ 'a\nb' | indent(2, true) }}|{{ 'a\n\nb' | indent('> ', blank=true) }}",
    "{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ messages | sort(attribute='role') | map(attribute='role') | join(',') }}",
    "{{ [1, 2, 2, 'a', 'A'] | unique | list }} {{ [1, 2, 3] | sum }} {{ [1, 5, 2] | max }} {{ [4, 2, 8] | min }} {{ -3 | abs }}",
    "{{ [1, 2, 3] | reverse | list }} {{ 'abc' | reverse }} {{ 2.567 | round(1) }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.1 | round(method='ceil') }}",
    "{{ '<a href=\"x\">&</a>' | escape }} {{ 'x' | safe }} {{ 'one two  three' | wordcount }} {{ {'b': 1, 'a': 2} | dictsort }}",
    # methods
    "{{ '  x  '.strip() }}|{{ '  x  '.lstrip() }}|{{ '  x  '.rstrip() }}|{{ 'xxhixx'.strip('x') }}|{{ '\\n\\nhi\\n'.strip('\\n') }}",
    "{{ 'a,b,,c'.split(',') }} {{ '  a  b c '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a<x>b<x>c'.split('<x>')[-1] }}",
    "{{ 'hello'.startswith('he') }} {{ 'hello'.endswith('lo') }} {{ 'hello'.startswith(('x', 'h')) }} {{ 'Hello World'.upper() }} {{ 'Hello'.lower() }}",
    "{{ 'hello world'.title() }} {{ 'hello'.capitalize() }} {{ 'a-b-c'.replace('-', '+') }} {{ 'abcabc'.find('c') }} {{ 'abcabc'.count('bc') }}",
    "{{ ', '.join(['a', 'b']) }} {{ 'a\\nb\\r\\nc'.splitlines() }} {{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ '  '.isspace() }}",
    # macros
    "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet(name='X') }}",
    "{% macro item(m) -%}\n<{{ m.role }}>{{ m.content | trim }}</{{ m.role }}>\n{%- endmacro %}{% for m in messages %}{{ item(m) }}{% endfor %}",
    "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n }}*{{ fact(n - 1) }}{% endif %}{% endmacro %}{{ fact(5) }}",
    # globals
    "{{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}{{ tools }}{{ documents }}",
    "{{ dict(a=1, b='x') }} {{ namespace(x=1).x }}",
    "{% if messages | length > 1 %}{{ raise_exception('too many: ' ~ messages | length) }}{% endif %}",
    "{{ strftime_now('%Y') | length }}",
    "{% generation %}gen {{ 1 }}{% endgeneration %}",
    # errors that jinja2 reports at render time
    "{{ 'a' + 1 }}",
    "{{ none + 'a' }}",
    "{{ undefined_thing + 'a' }}",
    "{{ undefined_thing.attr }}",
    "{{ messages[0].missing.deeper }}",
    "{{ 1 / 0 }}",
    "{{ 'a' < 1 }}",
    "{% for x in 5 %}{% endfor %}",
    "{{ {'a': 1} | items | list }} {{ undefined_thing | items | list }}",
    "{{ range(1000000) | length }}",
]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # jinja2 on the "\\q" escape
def test_snippets_match_jinja2():
    msgs = CONVERSATIONS["system_turns"]
    cases = [{"template": s, "messages": msgs, "add_generation_prompt": True,
              "bos_token": "<s>", "eos_token": "</s>"} for s in SNIPPETS]
    failures = compare(cases, [repr(s) for s in SNIPPETS])
    assert not failures, "\n".join(failures)


SYNTAX_ERRORS = [
    "{% if x %}unclosed",
    "{% for x in y %}",
    "{{ x ",
    "{% endif %}",
    "{% unknown_tag %}",
    "{{ x | no_such_filter }}",
    "{{ x is no_such_test }}",
    "{{ 'unterminated }}",
    "{# no end",
    "{{ (1, 2 }}",
    "{{ 1 + }}",
    "{% set %}",
]


def test_syntax_errors_are_reported_with_a_position():
    cases = [{"template": s, "messages": []} for s in SYNTAX_ERRORS]
    for src, got in zip(SYNTAX_ERRORS, render_batch(cases)):
        with pytest.raises(jinja2.TemplateSyntaxError):
            ENV.from_string(src)
        assert got.get("stage") == "compile", (src, got)
        assert "line 1" in got["error"], (src, got)


def test_limits_stop_hostile_templates():
    hostile = [
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
         "steps"),
        ("{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}"
         "{% endfor %}{{ ns.s | length }}", "memory"),
        ("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "output"),
        ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nested"),
    ]
    cases = [{"template": t, "messages": [],
              "limits": {"max_steps": 2000000, "max_memory_bytes": 64 << 20,
                         "max_output_bytes": 1 << 20}} for t, _ in hostile]
    for (src, word), got in zip(hostile, render_batch(cases)):
        assert got.get("stage") == "render", (src, got)
        assert word in got["error"], (src, got)


def test_mutated_templates_match_jinja2():
    """Differential fuzzing: the fixture templates with random edits must
    compile where jinja2 compiles them, fail where it fails, and render the
    same bytes (the renderer must also never crash on them)."""
    rng = random.Random(20240601)
    sources = [p.read_text() for p in TEMPLATES]
    pieces = list("{}%#-+()[]'\".|:,=~*/ \n") + [
        "{{", "}}", "{%", "%}", "{#", "#}", "-%}", "{%-", "{{-", "-}}", "loop", "ns", "messages",
        "if ", "endif", "for ", "endfor", "not ", "in ", "is ", "  "]
    msgs = [m("system", "s"), m("user", "hi"), m("assistant", "yo")]
    cases = []
    for _ in range(600):
        s = list(rng.choice(sources))
        for _ in range(rng.randint(1, 4)):
            op, pos = rng.random(), rng.randrange(len(s) + 1)
            if op < 0.4:
                del s[pos:pos + rng.randint(1, 5)]
            elif op < 0.8:
                s[pos:pos] = list(rng.choice(pieces))
            else:
                i, j = rng.randrange(len(s)), rng.randrange(len(s))
                s[i], s[j] = s[j], s[i]
        cases.append({"template": "".join(s), "messages": msgs, "add_generation_prompt": True,
                      "bos_token": "<s>", "eos_token": "</s>",
                      "vars": {"tools": [{"type": "function", "function": {"name": "f"}}]}})
    failures = compare(cases, [f"mutation {i}" for i in range(len(cases))])
    assert not failures, "\n".join(failures[:5])


# ---- the families' templates against transformers itself ----

FAMILY_CONVERSATIONS = ["user", "system_user", "turns", "system_turns", "empty_content", "unicode",
                        "whitespace", "long", "not_alternating", "assistant_first", "system_only"]


def smollm2_template():
    """SmolLM2-Instruct's ChatML template and special tokens, from the GGUF's metadata."""
    from conftest import smollm2_gguf
    from gguf_metadata import read_gguf_metadata

    meta = read_gguf_metadata(smollm2_gguf())
    tokens = meta["tokenizer.ggml.tokens"]
    return (meta["tokenizer.chat_template"], tokens[meta["tokenizer.ggml.bos_token_id"]],
            tokens[meta["tokenizer.ggml.eos_token_id"]])


def family_templates():
    """(name, template, bos_token, eos_token) as each family's tokenizer_config.json has them."""
    fixture = ROOT / "tests" / "fixtures" / "chat_templates"
    out = [
        ("llama3_instruct", (fixture / "llama3_instruct.jinja").read_text(),
         "<|begin_of_text|>", "<|eot_id|>"),
        ("llama31_instruct", (fixture / "llama31_instruct.jinja").read_text(),
         "<|begin_of_text|>", "<|eot_id|>"),
        ("qwen25_chatml", (fixture / "qwen25_chatml.jinja").read_text(), None, "<|im_end|>"),
        ("mistral_instruct_v01", (fixture / "mistral_instruct_v01.jinja").read_text(),
         "<s>", "</s>"),
        ("mistral_instruct_v03", (fixture / "mistral_instruct_v03.jinja").read_text(),
         "<s>", "</s>"),
    ]
    out.append(("smollm2_gguf", *smollm2_template()))
    return out


def test_family_templates_match_transformers():
    """Each family's template as transformers' own apply_chat_template renders it (a tokenizer
    object carries the template and the special tokens; its one-word vocabulary plays no part
    when tokenize=False), for conversations with and without a system prompt, multi-turn, and with
    add_generation_prompt both ways; where transformers raises, Folio must fail with the same
    message."""
    import tokenizers
    import transformers

    carrier = tokenizers.Tokenizer(tokenizers.models.WordLevel({"<unk>": 0}, unk_token="<unk>"))
    cases, names, wants = [], [], []
    for name, src, bos, eos in family_templates():
        tok = transformers.PreTrainedTokenizerFast(tokenizer_object=carrier, bos_token=bos,
                                                   eos_token=eos, chat_template=src)
        for conv_name in FAMILY_CONVERSATIONS:
            for agp in (True, False):
                conv = CONVERSATIONS[conv_name]
                try:
                    want = ("output", tok.apply_chat_template(conv, tokenize=False,
                                                              add_generation_prompt=agp))
                except jinja2.exceptions.TemplateError as e:
                    want = ("raised", str(e))
                case = {"template": src, "messages": conv, "add_generation_prompt": agp}
                if bos is not None:
                    case["bos_token"] = bos
                case["eos_token"] = eos
                cases.append(case)
                names.append(f"{name}/{conv_name}/agp={agp}")
                wants.append(want)
    failures = []
    rendered = 0
    for name, (kind, want), got in zip(names, wants, render_batch(cases)):
        if kind == "output":
            rendered += 1
            if got.get("output") != want:
                failures.append(f"{name}: transformers {want!r}\n   folio {got!r}")
        elif got.get("error") != want:
            failures.append(f"{name}: transformers raised {want!r}, folio {got!r}")
    assert not failures, "\n".join(failures[:10])
    assert rendered >= len(cases) // 2  # most conversations render; a few are refused
