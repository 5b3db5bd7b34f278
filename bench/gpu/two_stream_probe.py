"""Probe for a two-half-batch decode: do two chains of 128-row GEMMs on two streams finish sooner
than one chain of 256-row GEMMs? TinyLlama's four projections per layer (QKV 2560x2048, O 2048x2048,
gate/up 11264x2048, down 2048x5632) for 22 layers, each layer's weights distinct (2 GB in all, so
they come from device memory as in a decode step), bf16 through torch.matmul (cuBLAS), timed as CUDA
graph replays (median of 20). Prints one line per variant:
    PROBE name=<variant> ms=<median> chain_gemms=<n>
Variants: one256 (one stream, 256 rows), one128 (one stream, 128 rows), two128 (two streams, 128 rows
each, running side by side), seq128x2 (the two 128-row chains one after the other, one stream)."""
import statistics
import torch

LAYERS = 22
SHAPES = [(2560, 2048), (2048, 2048), (11264, 2048), (2048, 5632)]
dev = "cuda"
g = torch.Generator(device=dev).manual_seed(0)
weights = [[(torch.rand((n, k), device=dev, generator=g) * 0.04 - 0.02).to(torch.bfloat16)
            for (n, k) in SHAPES] for _ in range(LAYERS)]


def inputs(m):
    return [torch.rand((m, k), device=dev, generator=g).to(torch.bfloat16) for (_, k) in SHAPES]


def chain(xs, outs):
    for layer in weights:
        for i, w in enumerate(layer):
            torch.matmul(xs[i], w.t(), out=outs[i])


def outputs(m):
    return [torch.empty((m, n), device=dev, dtype=torch.bfloat16) for (n, _) in SHAPES]


def timed(capture_fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        capture_fn()  # warm-up: cuBLAS picks its kernels and workspaces outside the capture
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        capture_fn()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


x256, o256 = inputs(256), outputs(256)
xa, oa, xb, ob = inputs(128), outputs(128), inputs(128), outputs(128)


def two():
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    chain(xa, oa)
    with torch.cuda.stream(side):
        chain(xb, ob)
    torch.cuda.current_stream().wait_stream(side)


def seq():
    chain(xa, oa)
    chain(xb, ob)


n = LAYERS * len(SHAPES)
for name, fn in [("one256", lambda: chain(x256, o256)), ("one128", lambda: chain(xa, oa)),
                 ("two128", two), ("seq128x2", seq), ("one256_again", lambda: chain(x256, o256))]:
    print(f"PROBE name={name} ms={timed(fn):.4f} chain_gemms={n}", flush=True)
