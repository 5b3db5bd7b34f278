"""Tensor parallelism's sharding (common/tp_shard.c) on the CPU backend, which emulates the ranks
in one process: each rank holds its heads' Q/K/V rows and O columns, its share of the MLP and of
the vocabulary, and its KV heads' cache; a sum stands where GPUs would all-reduce and a copy where
they would gather. Checked: the same logits and greedy tokens as one rank (a sum split over ranks
rounds differently, so within 1e-5 relative L2), for a prompt and decode steps, for sequences
batched with a chunked prefill over scattered blocks, with GQA, Qwen2's biases and tied
embeddings; served end to end by `folio serve --tensor-parallel-size 2`; and clear errors where
the size does not divide the model or the backend cannot shard.
"""

import subprocess

import httpx
import numpy as np
import pytest

from conftest import bin_path
from make_tiny_model import make_tiny_model
from test_cpu_backend import FROM_PREV, greedy_script, prompt_ids, rel_err, run_steps, seq
from test_serve_e2e import Server, free_port

TP_TOL = 1e-5

MODELS = {
    "gqa-4-2": dict(),
    "gqa-8-4": dict(heads=8, kv_heads=4, hidden=64, intermediate=128),
    "qwen2-biases-tied": dict(qwen2=True, heads=4, kv_heads=2, tie_embeddings=True,
                              rope_theta=1000000.0),
}


@pytest.fixture(scope="module", params=list(MODELS))
def model(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"tp-{request.param}")
    make_tiny_model(str(out), seed=11, **MODELS[request.param])
    return out, MODELS[request.param].get("kv_heads", 2)


def sizes(kv_heads):
    return [n for n in (2, 4) if kv_heads % n == 0]


def test_prompt_and_decode_equal_one_rank(tmp_path, model):
    path, kv_heads = model
    steps = greedy_script(prompt_ids(37, seed=1), 12, [9, 3, 17, 25])
    one, one_logits = run_steps(tmp_path, path, steps)
    for n in sizes(kv_heads):
        got, got_logits = run_steps(tmp_path, path, steps, tensor_parallel_size=n)
        assert [r["token_ids"] for r in got] == [r["token_ids"] for r in one], n
        for a, b in zip(got_logits, one_logits):
            assert rel_err(a, b) < TP_TOL, n


def test_batched_chunked_steps_equal_one_rank(tmp_path, model):
    path, kv_heads = model
    a, b = prompt_ids(9, seed=2), prompt_ids(30, seed=3)
    blocks_a, blocks_b = [21, 4], [7, 30, 12]
    steps = [
        [seq(0, a, 9, blocks_a, output_index=0), seq(1, b[:17], 17, blocks_b, sample=False)],
        [seq(0, [FROM_PREV], 10, blocks_a, output_index=1), seq(1, b[17:], 30, blocks_b,
                                                                 output_index=0)],
        [seq(1, [FROM_PREV], 31, blocks_b, output_index=1),
         seq(0, [FROM_PREV], 11, blocks_a, output_index=2)],
    ]
    one, one_logits = run_steps(tmp_path, path, steps, max_seqs=2)
    for n in sizes(kv_heads):
        got, got_logits = run_steps(tmp_path, path, steps, max_seqs=2, tensor_parallel_size=n)
        assert [r["token_ids"] for r in got] == [r["token_ids"] for r in one], n
        for x, y in zip(got_logits, one_logits):
            assert rel_err(x, y) < TP_TOL, n


def test_a_size_that_does_not_divide_is_a_clear_error(tmp_path, tiny_model):
    steps = greedy_script(prompt_ids(5, seed=4), 1, [0])
    proc = run_steps(tmp_path, tiny_model, steps, expect_ok=False, tensor_parallel_size=3)
    assert proc.returncode != 0
    assert "--tensor-parallel-size 3 does not divide the model's num_attention_heads (4)" in \
        proc.stderr, proc.stderr
    proc = run_steps(tmp_path, tiny_model, steps, expect_ok=False, tensor_parallel_size=4)
    assert "num_key_value_heads (2)" in proc.stderr, proc.stderr


def test_the_cuda_worker_refuses_to_shard(tiny_model):
    proc = subprocess.run([str(bin_path("folio-scheduler")), "--model", str(tiny_model),
                           "--backend", "cuda", "--tensor-parallel-size", "2"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--tensor-parallel-size 2" in proc.stderr and "not built yet" in proc.stderr


def test_served_with_two_ranks_answers_as_one(tiny_model):
    """`folio serve --tensor-parallel-size 2` on the CPU backend: the same greedy completion."""
    body = {"model": "m", "prompt": "The capital of France is", "max_tokens": 16,
            "temperature": 0, "ignore_eos": True}
    texts = []
    for extra in ((), ("--tensor-parallel-size", "2")):
        server = Server(tiny_model, free_port(), *extra)
        try:
            server.wait_health(200)
            if extra:
                assert "tensor-parallel ranks emulated" in server.logs()
            name = httpx.get(server.base + "/v1/models", timeout=10).json()["data"][0]["id"]
            r = httpx.post(server.base + "/v1/completions", json=dict(body, model=name),
                           timeout=120)
            assert r.status_code == 200, r.text
            texts.append(r.json()["choices"][0]["text"])
        finally:
            server.stop()
    assert texts[0] == texts[1] and len(texts[0]) > 0, texts
