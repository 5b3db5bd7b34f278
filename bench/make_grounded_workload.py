#!/usr/bin/env python3
"""Writes the input-grounded workload (issue 56): requests whose answer quotes and reworks their
prompt, where an n-gram proposer's drafts come true, beside the ShareGPT workload where they mostly
do not. Built from the same ShareGPT first turns (assets/data/sharegpt), so the two differ in the
task only:

- proofread: "reply with the full text, correcting only spelling and punctuation" over a prose turn;
- code edit: "reply with the complete code, unchanged except for a one-line comment above each
  function" over a turn that carries code;
- quoted summary: "summarize in bullet points, each quoting one sentence word for word".

Each line is GuideLLM's json_file layout as workload_sharegpt_1000.jsonl's (`id`, `prompt`,
`output_tokens_count`); the output length is the quoted text's length in Llama-2 tokens (a rewrite
says it all again) or 160 for a summary, clipped to [64, 768].

    python3 bench/make_grounded_workload.py [--out assets/data/grounded/workload_grounded_300.jsonl]
                                            [--count 300] [--seed 56]
"""
import argparse
import json
import os
import random

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SOURCE = os.path.join(ROOT, "assets/data/sharegpt/sharegpt_v3_first_turns_1000.json")
TOKENIZER = os.path.join(ROOT, "assets/models/llama2-tokenizer/tokenizer.json")

PROOFREAD = ("Proofread the text below. Reply with the full text, correcting only spelling and "
             "punctuation and keeping every other word as it is.\n\n---\n{text}\n---")
CODE_EDIT = ("Here is some code. Reply with the complete code, unchanged except that every "
             "function gets a one-line comment above it.\n\n{text}")
QUOTED_SUMMARY = ("Summarize the text below in five bullet points. Each bullet quotes one "
                  "sentence of the text word for word, in double quotes.\n\n---\n{text}\n---")

CODE_MARKS = ("def ", "function ", "import ", "class ", "#include", "public ", "const ", "=>",
              "SELECT ", "</")


def looks_like_code(text):
    return "\n" in text and sum(text.count(m) for m in CODE_MARKS) >= 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(
        ROOT, "assets/data/grounded/workload_grounded_300.jsonl"))
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--seed", type=int, default=56)
    args = ap.parse_args()

    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(TOKENIZER)
    turns = [(t["id"], t["conversations"][0]["value"].strip())
             for t in json.load(open(SOURCE))]
    rng = random.Random(args.seed)
    rng.shuffle(turns)

    rows, kinds = [], {"proofread": 0, "code_edit": 0, "quoted_summary": 0}
    for ident, text in turns:
        n = len(tok.encode(text).ids)
        if n < 64:  # too short to quote at length
            continue
        if looks_like_code(text):
            kind, prompt, out = "code_edit", CODE_EDIT.format(text=text), n + n // 8
        elif rng.random() < 0.6:
            kind, prompt, out = "proofread", PROOFREAD.format(text=text), n
        else:
            kind, prompt, out = "quoted_summary", QUOTED_SUMMARY.format(text=text), 160
        kinds[kind] += 1
        rows.append({"id": f"{ident}-{kind}", "prompt": prompt,
                     "output_tokens_count": max(64, min(768, out))})
        if len(rows) == args.count:
            break
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    outs = sorted(r["output_tokens_count"] for r in rows)
    print(f"{os.path.relpath(args.out)}: {len(rows)} requests ({', '.join(f'{k} {v}' for k, v in kinds.items())}); "
          f"output tokens mean {sum(outs) / len(outs):.0f}, median {outs[len(outs) // 2]}")


if __name__ == "__main__":
    main()
