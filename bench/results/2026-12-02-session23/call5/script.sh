# Session 23, call 5 (the device tool's command, on call 4's warm machine with call 4's bundle:
# f8326a8 as bundle/bin/decode_bench): check_and_time in full at main.
tar xJf build-pack/carry.tar.xz && mkdir -p /tmp/ct && OUT=/tmp/ct FOLIO_PREFILL_SIZES="512 4096" FOLIO_CUBLAS_BATCHES= FOLIO_SANITIZE_TIMEOUT=60 timeout 330 bash bench/gpu/check_and_time.sh > $OUT/ct.log 2>&1; echo "check_and_time rc $?"; cp /tmp/ct/check.log /tmp/ct/table.txt /tmp/ct/env.txt $OUT/ 2>/dev/null; grep -E "^FAIL|correctness:|memcheck|racecheck|smoke" $OUT/ct.log | cut -c1-200; cat $OUT/table.txt
