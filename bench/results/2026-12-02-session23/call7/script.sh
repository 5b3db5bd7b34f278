# Session 23, call 7: GuideLLM at f8326a8 (prepared with deploy/bundle.sh && bash
# bench/gpu/guidellm_bench.sh --stage && deploy/pack.sh; carry build-pack). Results unpacked in
# bench/results/2026-12-02-h200-f8326a8/.
tar xJf build-pack/carry.tar.xz && FOLIO_COMMIT=f8326a8 bash bench/gpu/guidellm_bench.sh --budget-s 380 2>&1 | tail -40
