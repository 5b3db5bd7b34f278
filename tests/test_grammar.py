"""Structured outputs' engine (grammar/, over llguidance) with the real SmolLM2 tokenizer.

tests/tools/grammar_walk.c walks random token paths through each grammar as the worker will:
the grammar's mask, folio_logits_apply_mask, the CPU sampler, a commit. Every walk that
finishes must be valid text for its grammar: json.loads and Python's jsonschema (with the
schema's draft's format checker, plus hostname, uri and duration) for the 61 schemas of
tests/fixtures/grammar_schemas.py, re.fullmatch for its regexes, membership for its choice
lists, and Python's lark parser for its Lark grammars. Walks are seeded, so a run repeats.
Refusals name the problem (tests/unit/test_grammar.c has more, with a pathological schema
refused at once, masks, commits and threads)."""
import json
import re
import subprocess

import lark
import pytest

from conftest import bin_path, smollm2_gguf
from grammar_schemas import CHOICES, LARK, REGEXES, SCHEMAS, schema_validator

WALKS = 3
MAX_TOKENS = 600


def run_walks(requests):
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    out = subprocess.run(
        [str(bin_path("grammar_walk")), str(smollm2_gguf()), "--threads", "2"],
        input=lines,
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    ).stdout.splitlines()
    assert len(out) == len(requests)
    return [json.loads(line) for line in out]


@pytest.fixture(scope="module")
def walked():
    """Every grammar's walks, in one run of the tool (the vocab is built once)."""
    cases = [("json_schema", k, json.dumps(v)) for k, v in SCHEMAS.items()]
    cases += [("regex", k, v) for k, v in REGEXES.items()]
    cases += [("choice", k, json.dumps(v)) for k, v in CHOICES.items()]
    cases += [("lark", k, v) for k, v in LARK.items()]
    requests = [
        {"kind": kind, "text": text, "walks": WALKS, "seed": i, "max_tokens": MAX_TOKENS}
        for i, (kind, _, text) in enumerate(cases)
    ]
    return {(kind, name): res for (kind, name, _), res in zip(cases, run_walks(requests))}


def finished_texts(res):
    assert "error" not in res and "walk_error" not in res, res
    assert len(res["walks"]) == WALKS
    texts = [w["text"] for w in res["walks"] if w["finished"]]
    # The walk leans towards closing tokens and EOS; a grammar none of whose walks ends
    # within MAX_TOKENS would say that EOS or a closing token is never offered.
    assert texts, f"no walk finished within {MAX_TOKENS} tokens: {res['walks']}"
    return texts


def test_suite_size():
    assert len(SCHEMAS) >= 50 and REGEXES and CHOICES and LARK


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_json_schema_walks(walked, name):
    schema = SCHEMAS[name]
    validator = schema_validator(schema)
    for text in finished_texts(walked[("json_schema", name)]):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            pytest.fail(f"{name}: not JSON ({e}): {text!r}")
        errors = [e.message for e in validator.iter_errors(value)]
        assert not errors, f"{name}: {text!r} breaks its schema: {errors}"


def test_json_schema_walks_mostly_finish(walked):
    walks = [w for (kind, _), r in walked.items() if kind == "json_schema" for w in r["walks"]]
    done = sum(w["finished"] for w in walks)
    assert done >= 0.75 * len(walks), f"{done} of {len(walks)} walks finished"


@pytest.mark.parametrize("name", list(REGEXES))
def test_regex_walks(walked, name):
    for text in finished_texts(walked[("regex", name)]):
        assert re.fullmatch(REGEXES[name], text), f"{name}: {text!r} does not match {REGEXES[name]!r}"


@pytest.mark.parametrize("name", list(CHOICES))
def test_choice_walks(walked, name):
    for text in finished_texts(walked[("choice", name)]):
        assert text in CHOICES[name], f"{name}: {text!r} is none of {CHOICES[name]}"


@pytest.mark.parametrize("name", list(LARK))
def test_lark_walks(walked, name):
    parser = lark.Lark(LARK[name], start="start")
    for text in finished_texts(walked[("lark", name)]):
        try:
            parser.parse(text)
        except lark.exceptions.LarkError as e:
            pytest.fail(f"{name}: {text!r} is not in the grammar: {e}")


def test_json_object_walks():
    (res,) = run_walks([{"kind": "json_object", "text": "", "walks": WALKS, "seed": 7, "max_tokens": MAX_TOKENS}])
    for text in finished_texts(res):
        assert isinstance(json.loads(text), dict), text


REFUSED = [
    ("json_schema", '{"type": "object", "properties": {', "invalid json_schema: "),
    ("json_schema", '{"type": "strin"}', "strin"),
    ("json_schema", '{"type": "string", "format": "credit-card"}', "credit-card"),
    ("json_schema", '{"type": "array", "uniqueItems": true}', "uniqueItems"),
    ("json_schema", '{"$ref": "#/$defs/nowhere"}', "nowhere"),
    ("json_schema", '{"type": "array", "maxItems": 5000000}', "maxItems 5e+06 is over the limit of 10000"),
    ("regex", "[a-z", "unclosed character class"),
    ("regex", "(?<=a)b", "invalid regex: "),
    ("choice", '"yes"', "invalid choice: not a non-empty JSON array of strings"),
    ("choice", '["yes", null]', "invalid choice: item 1 is not a string"),
    ("lark", "start: item\n", 'unknown name: "item"'),
    ("lark", 'start: "a" %json {"maxItems": 20000}', "maxItems 20000 is over the limit of 10000"),
]


def test_refusals_name_the_problem():
    results = run_walks([{"kind": k, "text": t, "walks": 1, "seed": 0, "max_tokens": 10} for k, t, _ in REFUSED])
    for (kind, text, want), res in zip(REFUSED, results):
        assert "error" in res and "walks" not in res, (kind, text, res)
        assert res["error"].startswith(f"invalid {kind}: "), res["error"]
        assert want in res["error"], (kind, text, res["error"])
        assert "<non-verbose/>" not in res["error"] and "backtrace" not in res["error"], res["error"]
