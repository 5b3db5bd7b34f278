# Session 26, call 5: kernel timelines of the TMA path (b8, b32, b64) and the GEMV path (b1) at
# 884589e (main's GPU code), for the next session's work on the steps GuideLLM's poisson 8 and 32
# runs are made of (5 and 17 tokens a step).
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-02-session26/call5/call.sh
FOLIO_TIMELINE_BATCHES="8 32 64 1" FOLIO_LT_ARGS=skip bash bench/gpu/timeline_call.sh 2>&1 | tail -80
gzip "$OUT"/timeline_b*.txt
