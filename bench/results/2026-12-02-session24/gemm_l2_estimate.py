"""Round 30's estimate (arithmetic, not a measurement) of the L2 -> SM bytes of cuBLASLt's b256
GEMMs and the rate they imply, from the kernels' tiles (their names in the b256 timeline) and
their measured times (round 29's b256 timeline of main, session 23's call 1: us each).

A GEMM of M tokens, N features, depth K in tiles of W features x T tokens reads N M K / T weight
elements and N M K / W token elements; a cluster of two along the tokens (1x2) shares the weight
tile, along the features (2x1) the token tile. RAMP_US is an assumed fixed cost a launch.

    python3 bench/results/2026-12-02-session24/gemm_l2_estimate.py"""
M, RAMP_US, GEMM_TFLOPS = 256, 2.0, 778.0  # GEMM rate: call 4's check_and_time card
GEMMS = [  # name, N, K, W, T, cluster, us
    ("QKV", 2560, 2048, 80, 64, "1x2", 7.96),
    ("O", 2048, 2048, 64, 64, "2x1", 6.7),
    ("gate/up", 11264, 2048, 176, 128, "1x2", 18.76),
    ("down", 2048, 5632, 64, 64, "2x1", 12.3),
]
print("| GEMM | tile (W x T), cluster | us | L2 -> SM MB | rate if ramp-free | of GEMM rate |")
print("|---|---|---|---|---|---|")
for name, n, k, w, t, cl, us in GEMMS:
    weights = 2.0 * n * M * k / t / (2 if cl == "1x2" else 1)
    tokens = 2.0 * n * M * k / w / (2 if cl == "2x1" else 1)
    mb = (weights + tokens) / 1e6
    rate = mb / 1e6 / ((us - RAMP_US) * 1e-6)
    frac = 2.0 * M * n * k / (us * 1e-6) / (GEMM_TFLOPS * 1e12)
    print(f"| {name} | {w} x {t}, {cl} | {us} | {mb:.0f} | {rate:.0f} TB/s | {frac:.0%} |")
