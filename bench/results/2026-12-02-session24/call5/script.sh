tar xJf build-pack/carry.tar.xz && export OUT && FOLIO_COMMIT=ad78b22 bash bench/gpu/guidellm_bench.sh --budget-s 320
