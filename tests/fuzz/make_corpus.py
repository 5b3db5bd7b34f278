#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/.

The seeds are small valid (and a few nearly valid) inputs from which libFuzzer
mutates: request bodies, configs, safetensors files, step records, templates and
texts. The output is committed; run this again after changing it. It writes its
named seeds only: the inputs bench/fuzz_deep.sh merged in beside them (named by
their SHA-1, each one adding coverage) stay. The chat template target also reads
tests/fixtures/chat_templates.
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def tokenizer():
    texts = {
        "ascii": b"Hello world! The quick brown fox jumps over the lazy dog.",
        "spaces": b"  leading and  double   spaces\tand\ttabs\n\nnewlines  ",
        "scripts": "h\u00e9llo \u65e5\u672c\u8a9e \u0440\u0443\u0441\u0441\u043a\u0438\u0439 "
                   "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0939\u093f\u0928\u094d\u0926\u0940"
                   .encode(),
        "emoji": "\U0001F600\U0001F468\u200d\U0001F469\u200d\U0001F467 \u2581x".encode(),
        "special": b"<s>[INST] hi [/INST]</s><unk> <s>x",
        "invalid_utf8": b"ab\xff\xfe\xc3(\xe2\x82 \xf0\x9f\x98 \xed\xa0\x80 z\x00nul",
        "long_word": b"a" * 300 + b" " + b"xyz" * 80,
        "code": b"def f(x):\n    return {'k': [1, 2, 3]}  # comment\r\n",
    }
    for k, v in texts.items():
        write("fuzz_tokenizer", k, v)


def openai_request():
    bodies = {
        "completion": {"model": "m", "prompt": "Hello", "max_tokens": 16, "temperature": 0.7,
                       "top_p": 0.9, "stream": True,
                       "stream_options": {"include_usage": True, "continuous_usage_stats": True}},
        "completion_ids": {"prompt": [[1, 15043, 3186]], "max_tokens": 4, "logprobs": 5,
                           "stop": ["\n", "END"], "stop_token_ids": [2], "ignore_eos": True,
                           "seed": -3, "min_tokens": 2},
        "completion_all": {"prompt": ["x"], "max_completion_tokens": 8, "n": 1, "best_of": 1,
                           "echo": False, "top_k": 40, "min_p": 0.05, "presence_penalty": 0.5,
                           "frequency_penalty": -0.5, "repetition_penalty": 1.1,
                           "skip_special_tokens": False, "stop": None},
        "chat": {"model": "m", "messages": [{"role": "system", "content": "Be brief."},
                                            {"role": "user", "content": "Hi \u00e9\u65e5"}],
                 "max_tokens": 32, "logprobs": True, "top_logprobs": 3, "stream": False},
        "chat_parts": {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                                 {"type": "text", "text": "b"}]},
                                    {"role": "assistant", "content": None}],
                       "add_generation_prompt": False, "stop": "x"},
    }
    for k, v in bodies.items():
        write("fuzz_openai_request", k, json.dumps(v))
    write("fuzz_openai_request", "bad_json", b'{"prompt": "unterminated \xc3\xa9\xc3\xa9')
    write("fuzz_openai_request", "bad_types", b'{"prompt": 5, "max_tokens": "x", "n": 2}')
    # Found by this fuzzer: jansson's error text cut a UTF-8 character in two, and the error
    # body was not valid UTF-8 (fixed in frontend/openai_api.c).
    write("fuzz_openai_request", "regress_error_utf8",
          b'{"mopt: \\u0\xc9\x8be09\\\xd3\xdf9\\\xd3\xdf\xdd\x93\x8c\x97}')


def safetensors():
    def st(tensors, pad_to=8, meta=True):
        header, blobs, off = {}, [], 0
        if meta:
            header["__metadata__"] = {"format": "pt"}
        for name, dtype, shape, data in tensors:
            header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
            blobs.append(data)
            off += len(data)
        h = json.dumps(header, separators=(",", ":")).encode()
        h += b" " * (-len(h) % pad_to)
        return struct.pack("<Q", len(h)) + h + b"".join(blobs)

    f32 = struct.pack("<4f", 1.0, -2.5, 0.0, float("inf"))
    bf16 = struct.pack("<4H", 0x3F80, 0xC020, 0x7FC0, 0x0001)
    f16 = struct.pack("<2H", 0x3C00, 0x7C00)
    write("fuzz_safetensors", "three_dtypes",
          st([("a.f32", "F32", [2, 2], f32), ("b.bf16", "BF16", [4], bf16),
              ("c.f16", "F16", [1, 2], f16)]))
    write("fuzz_safetensors", "scalar_and_empty",
          st([("s", "F32", [], f32[:4]), ("e", "BF16", [0, 3], b"")], meta=False))
    write("fuzz_safetensors", "misaligned", st([("h", "F16", [1], f16[:2]),
                                                ("w", "F32", [1], f32[:4])], pad_to=1))
    write("fuzz_safetensors", "bad_dtype", st([("x", "I64", [1], b"\0" * 8)]))
    write("fuzz_safetensors", "truncated", st([("x", "F32", [4], f32)])[:-3])


def config():
    base = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
            "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 32000, "max_position_embeddings": 2048,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False,
            "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "rope_scaling": None,
            "attention_bias": False, "mlp_bias": False, "torch_dtype": "bfloat16"}
    write("fuzz_config", "tiny", json.dumps(base, indent=1))
    l3 = dict(base, vocab_size=128256, head_dim=16, rope_theta=500000.0, bos_token_id=128000,
              eos_token_id=[128001, 128008, 128009], tie_word_embeddings=True,
              rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
    write("fuzz_config", "llama3", json.dumps(l3))
    mistral = dict(base, model_type="mistral", sliding_window=None,
                   rope_scaling={"type": "linear", "factor": 2.0})
    write("fuzz_config", "mistral_linear", json.dumps(mistral))
    tl = os.path.join(HERE, "..", "..", "assets", "models", "tinyllama-1.1b-shape", "config.json")
    if os.path.exists(tl):
        with open(tl, "rb") as f:
            write("fuzz_config", "tinyllama", f.read())


PLAN_MAGIC, RESULT_MAGIC, EVENT_MAGIC = 0x504C414E, 0x52534C54, 0x45564E54


def ipc_records():
    # struct folio_plan_header (32 bytes) and folio_plan_seq (72 bytes)
    def plan(seqs, step=7):
        toks, blocks, body = [], [], b""
        for i, (nt, nb) in enumerate(seqs):
            body += struct.pack("<Qiiiiii6fiiQ", 0x10000 + i, i, nt, 16 + nt, nb, i, 1,
                                0.8, 0.9, 0.0, 1.0, 0.0, 0.0, 40, 2, 1234)
            toks += list(range(100, 100 + nt))
            blocks += list(range(nb))
        hdr = struct.pack("<IiiiQQ", PLAN_MAGIC, len(seqs), len(toks), len(blocks), step, 1)
        return hdr + body + struct.pack(f"<{len(toks)}i", *toks) + struct.pack(
            f"<{len(blocks)}i", *blocks)

    write("fuzz_ipc_records", "plan_prefill_decode", plan([(5, 1), (1, 2), (0, 0)]))
    write("fuzz_ipc_records", "plan_empty", plan([]))

    # struct folio_result_header (40 bytes), folio_result_seq (16 bytes)
    def result(seqs, status=0, msg=b""):
        ntop = sum(n for _, n in seqs)
        body, ids, lps, off = b"", [], [], 0
        for tok, n in seqs:
            body += struct.pack("<ifii", tok, -0.25, n, off)
            ids += list(range(off, off + n))
            lps += [-1.0] * n
            off += n
        hdr = struct.pack("<IiiiQQQ", RESULT_MAGIC, len(seqs), ntop, status, 7, 1000, 1)
        return (hdr + body + struct.pack(f"<{ntop}i", *ids) + struct.pack(f"<{ntop}f", *lps) +
                msg)

    write("fuzz_ipc_records", "result_top", result([(42, 2), (-1, 0), (7, 3)]))
    write("fuzz_ipc_records", "result_error", result([], status=-1, msg=b"worker: CUDA error"))

    # struct folio_event_header (48 bytes)
    def event(ntok, ntop, finish, msg=b"", status=0):
        hdr = struct.pack("<IIQIIIIIIII", EVENT_MAGIC, ntok, 0x0001000000000002, finish, status,
                          12, ntok, 4, ntop, len(msg), 0)
        return (hdr + struct.pack(f"<{ntok}i", *range(ntok)) + struct.pack(f"<{ntok}f", *[-0.5] * ntok)
                + struct.pack(f"<{ntok * ntop}i", *range(ntok * ntop))
                + struct.pack(f"<{ntok * ntop}f", *[-1.5] * (ntok * ntop)) + msg)

    write("fuzz_ipc_records", "event_tokens", event(3, 2, 0))
    write("fuzz_ipc_records", "event_rejected", event(0, 0, 5, b"queue full", status=429))


def chat_template():
    templates = {
        "loop_filters": "{{ bos_token }}{% for m in messages %}{% if loop.first %}[{{ loop.length }}]"
                        "{% endif %}<|{{ m['role'] | upper }}|>{{ m.content | trim | tojson }}"
                        "{{ eos_token if not loop.last }}\n{% endfor %}"
                        "{% if add_generation_prompt %}<|assistant|>{% endif %}",
        "macro_ns": "{% set ns = namespace(n=0, s='') %}{% macro f(x, d=1) -%}{{ x * d }}"
                    "{%- endmacro %}{% for m in messages|selectattr('role','equalto','user') %}"
                    "{% set ns.n = ns.n + 1 %}{% set ns.s = ns.s ~ f(m.content|length, 2) %}"
                    "{% endfor %}{{ ns.n }}:{{ ns.s }}{{ range(3)|list|join(',') }}",
        "raise": "{% if messages[0]['role'] != 'user' %}{{ raise_exception('Conversation roles "
                 "must alternate user/assistant/user/assistant/...') }}{% endif %}",
        "strings": "{{ messages[1].content.split(' ')|reverse|join('_') }}"
                   "{{ 'abc'.replace('b', 'B').startswith('a') }}{{ '%s-%d'|format('x', 3) }}"
                   "{{ messages[-1]['content'][2:6] }}{{ {'a': [1, 2.5, none, true]}|tojson }}"
                   "{{ strftime_now('%Y') | length }}{{ 7 // 2 }}{{ 2 ** 10 }}{{ 'x' in 'xyz' }}",
        "whitespace": "  {%- for m in messages -%}\n  {{ m.role }}\n  {%- endfor %}\n"
                      "{# comment #}{% raw %}{{ not rendered }}{% endraw %}",
        "loopcontrols": "{% for i in range(10) %}{% if i is odd %}{% continue %}{% endif %}"
                        "{% if i > 6 %}{% break %}{% endif %}{{ i }}{% else %}none{% endfor %}",
        "limit_steps": "{% for i in range(1000000000) %}{{ i }}{% endfor %}",
        "limit_output": "{{ 'x' * 100000000 }}",
        "limit_recursion": "{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}",
        "limit_memory": "{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
                        "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
        "nested": "{{ ((((((((((1)))))))))) }}{{ [[[[[[[[1]]]]]]]] }}{% if a %}{% if b %}"
                  "{% if c %}x{% endif %}{% endif %}{% endif %}",
    }
    for k, v in templates.items():
        write("fuzz_chat_template", k, v)
    # Found while fuzzing: left-associative chains (attribute/subscript postfixes, binary
    # operators, filters) are built by loops that MAX_NESTING does not count, so the tree gets
    # arbitrarily deep and the recursive walkers (eval; check_names at compile) overflow the
    # stack: about 5,500 links under ASan, 50,000 without. 8,000 links each (16-32 KB).
    n = 8000
    write("fuzz_chat_template", "crash_deep_attr", "{{ messages" + ".b" * n + " }}")
    write("fuzz_chat_template", "crash_deep_concat", "{{ 1" + " ~ 1" * n + " }}")
    write("fuzz_chat_template", "crash_deep_filter", "{{ 1" + "|abs" * n + " }}")


def text_stream():
    # settings byte: number of stops (low 3 bits, mod 5), min_tokens (bits 3-4), skip_special
    # (bit 7); then each stop string and a 0 byte; then little-endian 16-bit token ids.
    def ids(*xs):
        return b"".join(struct.pack("<H", x) for x in xs)

    hello = ids(1, 15043, 3186, 29991, 13, 450, 4996, 17354, 1701, 29916, 2)
    write("fuzz_text_stream", "no_stops", b"\x00" + hello)
    write("fuzz_text_stream", "no_stops_skip_special", b"\x80" + hello)
    write("fuzz_text_stream", "one_stop", b"\x01world\x00" + hello)
    write("fuzz_text_stream", "two_stops_overlap", b"\x02lo w\x00o\x00" + hello)
    write("fuzz_text_stream", "stop_min_tokens", b"\x09Hello\x00" + hello)
    # byte-fallback pieces of one multi-byte character (U+00E9 is <0xC3><0xA9>)
    write("fuzz_text_stream", "utf8_bytes", b"\x01\xc3\xa9\x00" + ids(198, 172, 29871, 198, 172))
    write("fuzz_text_stream", "unknown_id", b"\x00" + ids(15043, 40000, 3186))


def ipc_proto():
    # Protocol Buffers wire format by hand (no protobuf package needed): the first byte picks
    # the message (its index in fuzz_ipc_proto.c's table), the rest is the encoding.
    def varint(x):
        out = b""
        while True:
            b = x & 0x7F
            x >>= 7
            out += bytes([b | (0x80 if x else 0)])
            if not x:
                return out

    def f_varint(field, x):
        return varint(field << 3) + varint(x)

    def f_bytes(field, data):
        return varint(field << 3 | 2) + varint(len(data)) + data

    def f_float(field, x):
        return varint(field << 3 | 5) + struct.pack("<f", x)

    sampling = f_float(1, 0.7) + f_varint(2, 40) + f_float(3, 0.9) + f_varint(8, 1) + f_varint(9, 7)
    submit = (f_varint(1, 0x1000000000005) + f_varint(2, 1) +
              f_bytes(3, b"".join(varint(t) for t in (1, 15043, 3186))) + f_bytes(4, sampling) +
              f_varint(5, 16) + f_bytes(7, varint(2)) + f_varint(8, 1))
    register = f_varint(1, 1) + f_varint(2, 3) + f_varint(3, 4242) + f_varint(4, 9) + \
        f_bytes(5, b"0.1.0") + f_bytes(6, b"/folio-1-events-fe3")
    status = f_varint(1, 1) + f_bytes(2, b"ready") + f_varint(3, 2) + f_varint(5, 512) + \
        varint(11 << 3 | 1) + struct.pack("<d", 1.5) + f_varint(19, 2048)
    load = f_bytes(1, b"/models/x") + f_bytes(2, b"cpu") + f_varint(3, 64) + f_varint(5, 100)
    write("fuzz_ipc_proto", "sampling", b"\x00" + sampling)
    write("fuzz_ipc_proto", "submit", b"\x01" + submit)
    write("fuzz_ipc_proto", "abort", b"\x02" + f_varint(1, 77) + f_varint(2, 1))
    write("fuzz_ipc_proto", "register", b"\x03" + register)
    write("fuzz_ipc_proto", "register_reply", b"\x04" + f_varint(1, 1) + f_varint(3, 5) +
          f_bytes(4, b"tiny") + f_varint(5, 2048) + f_varint(6, 32000))
    write("fuzz_ipc_proto", "status_reply", b"\x07" + status)
    write("fuzz_ipc_proto", "load", b"\x08" + load)
    write("fuzz_ipc_proto", "envelope_submit", b"\x0a" + f_bytes(1, submit))
    write("fuzz_ipc_proto", "envelope_register", b"\x0a" + f_bytes(3, register))
    write("fuzz_ipc_proto", "truncated", b"\x01" + submit[:-3])


def gguf():
    """Small GGUF files built with struct (no gguf package needed): a Llama-shaped one with
    every metadata kind and tensors of several types, and a few nearly valid ones."""
    def string(s):
        b = s.encode("utf-8") if isinstance(s, str) else s
        return struct.pack("<Q", len(b)) + b

    def value(vtype, v):
        fmt = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
               12: "d"}
        if vtype == 8:
            return string(v)
        if vtype == 9:
            et, items = v
            return struct.pack("<IQ", et, len(items)) + b"".join(value(et, x) for x in items)
        return struct.pack("<" + fmt[vtype], v)

    def gguf_file(kvs, tensors, align=32, version=3):
        out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
        for key, vtype, v in kvs:
            out += string(key) + struct.pack("<I", vtype) + value(vtype, v)
        data, infos = b"", b""
        for name, ggml_type, ne, blob in tensors:
            data += b"\0" * (-len(data) % align)
            infos += string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
            infos += struct.pack("<IQ", ggml_type, len(data))
            data += blob
        out += infos
        return out + b"\0" * (-len(out) % align) + data

    q8 = struct.pack("<e", 0.5) + bytes(range(32))
    q4_1 = struct.pack("<ee", 0.25, -1.0) + bytes(range(16))
    llama_kvs = [
        ("general.architecture", 8, "llama"), ("general.alignment", 4, 32),
        ("llama.block_count", 4, 1), ("llama.context_length", 4, 128),
        ("llama.embedding_length", 4, 32), ("llama.feed_forward_length", 4, 64),
        ("llama.attention.head_count", 4, 4), ("llama.attention.head_count_kv", 4, 2),
        ("llama.rope.freq_base", 6, 10000.0),
        ("llama.attention.layer_norm_rms_epsilon", 6, 1e-5),
        ("tokenizer.ggml.model", 8, "gpt2"),
        ("tokenizer.ggml.tokens", 9, (8, ["<s>", "</s>", "\u0120a", "b"])),
        ("tokenizer.ggml.token_type", 9, (5, [3, 3, 1, 1])),
        ("tokenizer.ggml.scores", 9, (6, [0.0, -1.5, 2.0, 3.0])),
        ("tokenizer.ggml.bos_token_id", 4, 0), ("tokenizer.ggml.eos_token_id", 4, 1),
        ("t.all", 9, (9, [(0, [1, 2]), (8, ["x"])])), ("t.bool", 7, True), ("t.i64", 11, -5),
        ("t.f64", 12, 0.5), ("t.u16", 2, 7), ("t.i8", 1, -1),
    ]
    tensors = [
        ("token_embd.weight", 8, [32, 4], q8 * 4),
        ("output_norm.weight", 0, [32], struct.pack("<32f", *range(32))),
        ("blk.0.attn_q.weight", 3, [32, 32], q4_1 * 32),
        ("blk.0.attn_norm.weight", 1, [32], struct.pack("<32e", *range(32))),
        ("blk.0.ffn_up.weight", 30, [32, 2], bytes(128)),
        ("blk.0.ffn_down.weight", 2, [64, 1], (struct.pack("<e", 1.0) + bytes(16)) * 2),
    ]
    write("fuzz_gguf", "llama", gguf_file(llama_kvs, tensors))
    write("fuzz_gguf", "v2_align64", gguf_file(llama_kvs[:1] + [("general.alignment", 4, 64)],
                                               tensors[:2], align=64, version=2))
    write("fuzz_gguf", "empty", gguf_file([], []))
    good = gguf_file(llama_kvs, tensors)
    write("fuzz_gguf", "truncated", good[: len(good) - 40])
    write("fuzz_gguf", "bad_type", gguf_file(llama_kvs[:3], [("x", 99, [32], bytes(64))]))
    # One block of each k-quant (Q2_K..Q6_K), bytes that vary.
    kquants = [(f"k{t}", t, [256], bytes((i * 37 + t) & 255 for i in range(size)))
               for t, size in ((10, 84), (11, 110), (12, 144), (13, 176), (14, 210))]
    write("fuzz_gguf", "kquants", gguf_file(llama_kvs[:2], kquants))


def tool_parsers():
    """A selector byte (parser, reasoning parser, call limit), two split bytes, then a model's text."""
    call = '{"name": "get_weather", "arguments": {"city": "Paris", "n": [1, -2.5e3, true, null]}}'
    texts = {
        "hermes": (1, "Sure.\n<tool_call>\n" + call + "\n</tool_call>\n<tool_call>" + call),
        "hermes_broken": (1, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": tru"),
        "llama3": (2, "<|python_tag|>" + call.replace("arguments", "parameters") + "; " + call),
        "mistral": (3, "ok [TOOL_CALLS] [" + call + ", " + call + "]"),
        "required": (4, "[\n  " + call.replace("arguments", "parameters") + "\n]"),
        "named": (5, '{"city": "Paris"}'),
        "r1_hermes": (1 + 6, "I will call it.</think>\n\n<tool_call>" + call + "</tool_call>"),
        "qwen3_hermes_one": (1 + 12 + 18, "<think>a</think><tool_call>" + call + "</tool_call>" * 2),
    }
    for name, (selector, text) in texts.items():
        write("fuzz_tool_parsers", name, bytes([selector, 0, 7]) + text.encode())


def main():
    tool_parsers()
    tokenizer()
    openai_request()
    safetensors()
    config()
    ipc_records()
    chat_template()
    text_stream()
    ipc_proto()
    gguf()
    return 0


if __name__ == "__main__":
    sys.exit(main())
