# Session 21 call 4: kv_read_probe's copy-destination patterns at b256/512 (twice), to split
# warp1_attnload's 1.7 us over warp1_zfill into row padding and shared-memory footprint.
set -u
B=$PWD/bundle/bin
export LD_LIBRARY_PATH=$PWD/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for r in 1 2; do
  $B/kv_read_probe 256 512 | grep -E "warp1_tab |warp1_attnload|warp1_zfill|warp1_pitch|warp1_swizzle|folio " | sed "s/^RESULT /RESULT run=$r /"
done | tee $OUT/kv_read_probe.txt
