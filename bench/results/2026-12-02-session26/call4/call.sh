# Session 26, call 4: GuideLLM at 884589e (main with l2-drop-128: the drops on the 65-128-row decode
# path), rate2, poisson 8/32/128 and max as far as --budget-s lets them; then one b256 decode_bench
# on the same card and checkpoint (cross-card data for issue 4's b256 target).
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session26/call4/call.sh
set -u
nvidia-smi --query-gpu=name,serial --format=csv,noheader
FOLIO_COMMIT=884589e bash bench/gpu/guidellm_bench.sh --budget-s 470 2>&1 | tail -30
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for i in 1 2; do timeout 40 bundle/bin/decode_bench /tmp/folio-tinyllama-ckpt decode 256 512 64 | grep RESULT; done
