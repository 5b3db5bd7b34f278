# Session 30, call 5: power while the TMA decode attention kernel loops alone (kv_read_probe's
# folio_rope_norm_key1, the b256 step form) against main's cp.async kernel (kv_read_probe_base,
# 7957aef's build), and a bare-read pattern on each for the card's scale; power_by_pattern.sh each.
#   tar xJf build-pack/carry.tar.xz && export OUT && bash bench/results/2026-12-03-session30/call5/call.sh
set -u
head -3 bundle/SOURCE.txt
echo "== TMA kernel (this build)"
OUT=$OUT/tma FOLIO_PATTERNS=warp1_swizzle_read,folio_rope_norm_key1 FOLIO_POWER_SECONDS=4 \
  bash bench/gpu/power_by_pattern.sh 2>&1 | tail -5
cp bundle/bin/kv_read_probe_base bundle/bin/kv_read_probe
echo "== cp.async kernel (main, 7957aef)"
OUT=$OUT/base FOLIO_PATTERNS=warp1_swizzle_read,folio_rope_norm_key1 FOLIO_POWER_SECONDS=4 \
  bash bench/gpu/power_by_pattern.sh 2>&1 | tail -5
