#!/usr/bin/env python3
"""Folio's decode attention against FlashAttention 3 as vLLM 0.26 runs it (issue 43's kernel level).

For each batch size: one layer's decode attention over BATCH sequences of CONTEXT tokens of
paged bf16 K/V (TinyLlama's 32 query heads over 4 KV heads, head_dim 64, blocks of 16 tokens,
scattered block tables), timed the same two ways for both:
- in a CUDA graph (20 launches captured, the graph replayed back to back, time a launch): the
  kernel's own time, as both engines run decode (vLLM captures FA3 in its full decode graphs);
- one launch between two CUDA events (the median of REPEATS after 3 warm-ups): the kernel plus
  whatever the host does between the first event and the launch, which for FA3 is a Python call
  (a first run on 2026-12-05 reported only this, and FA3's small batches were mostly that call).
- Folio: `decode_bench MODEL attention BATCH CONTEXT REPEATS` (the kernel the worker runs, its
  output checked there against Folio's reference kernel).
- FA3: `vllm.vllm_flash_attn.flash_attn_varlen_func(..., fa_version=3)` with vLLM's K/V layout
  ([blocks, 16, kv_heads, head_dim]), a query a sequence, its block table and context lengths, as
  vLLM's FlashAttention backend calls it for decode (without its ahead-of-time split schedule:
  FA3 picks its splits itself). Its output is checked against a PyTorch reference.
Both read the same bytes (K and V of every context token once); the floor is those bytes at the
card's copy bandwidth (bench/gpu/floors.py, measured in the same run).

Needs vLLM's packages on PYTHONPATH (../shared/tools/vllm/on_device.sh unpack: /tmp/vsite) and the
bundle. Prints one JSON line a batch, then a markdown table:
    PYTHONPATH=/tmp/vsite python3 bench/gpu/attention_vs_fa3.py bundle/bin/decode_bench /tmp/tl
"""
import argparse
import json
import math
import re
import subprocess
import sys

import torch

HEADS, KV_HEADS, HEAD_DIM, BLOCK = 32, 4, 64, 16


def folio_attention(decode_bench, model, batch, ctx, repeats):
    """decode_bench's RESULT, LOOP and CHECK lines for one batch:
    (one-launch median ms, graph ms a launch, bytes, check line)."""
    out = subprocess.run([decode_bench, "--loop-seconds", "0.5", model, "attention", str(batch),
                          str(ctx), str(repeats)],
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit(f"decode_bench attention {batch}: exit {out.returncode}\n{out.stderr[-2000:]}")
    m = re.search(rf"RESULT name=attention_b{batch}_ctx{ctx} ms=\S+ median_ms=(\S+) bytes=(\S+)",
                  out.stdout)
    loop = re.search(rf"LOOP name=attention_b{batch}_ctx{ctx} .* ms=(\S+)", out.stdout)
    check = re.search(r"CHECK attention\S* .*", out.stdout)
    if not m or not loop or not check:
        sys.exit(f"decode_bench attention {batch}: no RESULT/LOOP/CHECK line\n"
                 f"{out.stdout[-2000:]}")
    return float(m.group(1)), float(loop.group(1)), float(m.group(2)), check.group(0)


def paged_inputs(batch, ctx, device):
    """A decode batch in vLLM's layout, with block tables scattered as decode_bench's are."""
    nb = (ctx + BLOCK - 1) // BLOCK
    nblocks = batch * nb
    g = torch.Generator(device="cpu").manual_seed(batch)
    # Values in +-[1, 2), as decode_bench's, so the scores are not all alike.
    def fill(*shape):
        x = torch.rand(*shape, generator=g) + 1.0
        sign = torch.randint(0, 2, shape, generator=g) * 2 - 1
        return (x * sign).to(torch.bfloat16).to(device)
    k_cache = fill(nblocks, BLOCK, KV_HEADS, HEAD_DIM)
    v_cache = fill(nblocks, BLOCK, KV_HEADS, HEAD_DIM)
    q = fill(batch, HEADS, HEAD_DIM) * 0.125
    order = [(i * 7919) % nblocks for i in range(nblocks)]
    block_table = torch.tensor(order, dtype=torch.int32).view(batch, nb).to(device)
    seqused_k = torch.full((batch,), ctx, dtype=torch.int32, device=device)
    cu_seqlens_q = torch.arange(batch + 1, dtype=torch.int32, device=device)
    return q, k_cache, v_cache, block_table, seqused_k, cu_seqlens_q


def reference(q, k_cache, v_cache, block_table, ctx):
    """Decode attention in float32 over the gathered blocks: [batch, heads, head_dim]."""
    batch = q.shape[0]
    k = k_cache[block_table.long()].reshape(batch, -1, KV_HEADS, HEAD_DIM)[:, :ctx].float()
    v = v_cache[block_table.long()].reshape(batch, -1, KV_HEADS, HEAD_DIM)[:, :ctx].float()
    group = HEADS // KV_HEADS
    k = k.repeat_interleave(group, dim=2)  # [batch, ctx, heads, head_dim]
    v = v.repeat_interleave(group, dim=2)
    scores = torch.einsum("bhd,bthd->bht", q.float(), k) / math.sqrt(HEAD_DIM)
    return torch.einsum("bht,bthd->bhd", scores.softmax(dim=-1), v)


def fa3_attention(batch, ctx, repeats):
    """FA3's one-launch median ms over REPEATS, its graph ms a launch, and its check against
    the reference."""
    from vllm.vllm_flash_attn import flash_attn_varlen_func

    q, k_cache, v_cache, block_table, seqused_k, cu_seqlens_q = paged_inputs(batch, ctx, "cuda")
    out = torch.empty_like(q)

    def run():
        flash_attn_varlen_func(q, k_cache, v_cache, max_seqlen_q=1, cu_seqlens_q=cu_seqlens_q,
                               max_seqlen_k=ctx, seqused_k=seqused_k,
                               softmax_scale=1.0 / math.sqrt(HEAD_DIM), causal=True,
                               block_table=block_table, out=out, fa_version=3)

    times = []
    for i in range(repeats + 3):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        if i >= 3:
            times.append(a.elapsed_time(b))
    times.sort()
    # 20 launches in one graph, replayed back to back: no host time between the kernels.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(20):
            run()
    graph.replay()
    replays = max(10, repeats)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(replays):
        graph.replay()
    b.record()
    b.synchronize()
    graph_ms = a.elapsed_time(b) / (20 * replays)
    rows = min(batch, 8)  # the reference over a few sequences is enough to catch a wrong layout
    ref = reference(q[:rows], k_cache, v_cache, block_table[:rows], ctx)
    diff = (out[:rows].float() - ref).abs().max().item()
    scale = ref.abs().max().item()
    check = (f"CHECK fa3_b{batch}_ctx{ctx} max_abs_diff={diff:.3e} max_abs_ref={scale:.3e} "
             f"{'PASS' if diff <= 2e-2 * scale else 'FAIL'}")
    return times[len(times) // 2], graph_ms, check


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("decode_bench")
    ap.add_argument("model", help="a TinyLlama-shaped checkpoint (its shape sets decode_bench's)")
    ap.add_argument("--batches", default="1,8,64,256")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--copy-tb-s", type=float, help="the copy bandwidth (default: floors.py now)")
    a = ap.parse_args()
    copy = a.copy_tb_s
    if copy is None:
        floors = subprocess.run([sys.executable, "bench/gpu/floors.py"], capture_output=True,
                                text=True, check=True)
        copy = json.loads(floors.stdout)["copy_tb_s"]
    rows, failed = [], 0
    for batch in [int(b) for b in a.batches.split(",")]:
        folio_one, folio_ms, nbytes, folio_check = folio_attention(a.decode_bench, a.model, batch,
                                                                   a.ctx, a.repeats)
        fa3_one, fa3_ms, fa3_check = fa3_attention(batch, a.ctx, a.repeats)
        failed += "FAIL" in folio_check or "FAIL" in fa3_check
        floor_ms = nbytes / (copy * 1e12) * 1e3
        row = {"batch": batch, "ctx": a.ctx, "bytes": nbytes, "floor_ms": floor_ms,
               "folio_ms": folio_ms, "fa3_ms": fa3_ms, "folio_one_launch_ms": folio_one,
               "fa3_one_launch_ms": fa3_one, "folio_check": folio_check, "fa3_check": fa3_check}
        print(json.dumps(row), flush=True)
        rows.append(row)
    print(f"\nDecode attention, one layer, {a.ctx} tokens of context, {HEADS} heads over "
          f"{KV_HEADS} KV heads, head_dim {HEAD_DIM}, bf16; copy bandwidth {copy:.3f} TB/s\n")
    print("In a CUDA graph (a launch's time, replays back to back); one launch between events "
          "in the last two columns (host launch time included).\n")
    print("| batch | MB of K/V | floor ms | Folio ms | of floor | FA3 (vLLM 0.26) ms | of floor "
          "| Folio / FA3 time | one launch: Folio / FA3 ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['batch']} | {r['bytes'] / 1e6:.1f} | {r['floor_ms']:.4f} | "
              f"{r['folio_ms']:.4f} | {r['floor_ms'] / r['folio_ms']:.2f} | {r['fa3_ms']:.4f} | "
              f"{r['floor_ms'] / r['fa3_ms']:.2f} | {r['folio_ms'] / r['fa3_ms']:.2f} | "
              f"{r['folio_one_launch_ms']:.4f} / {r['fa3_one_launch_ms']:.4f} |")
    print(f"\n{'FAIL' if failed else 'PASS'}: outputs checked against the references")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
