"""Where sample_kernel's warps wait and what it executes (call 8's Nsight Compute source page):
    python3 top_sass.py src_sass.csv.gz"""
import csv, gzip, sys, collections
rows = list(csv.reader(gzip.open(sys.argv[1], "rt", errors="replace")))
hdr, body = rows[1], rows[2:]
sc, src, ie = (hdr.index("Warp Stall Sampling (All Samples)"), hdr.index("Source"),
               hdr.index("Instructions Executed"))
samples = sum(float(r[sc] or 0) for r in body)
executed = sum(float(r[ie] or 0) for r in body)
print(f"stall samples {samples:.0f}, warp instructions executed {executed:.0f}")
print("SASS lines with the most stall samples:")
for v, i, s in sorted(((float(r[sc] or 0), i, r[src].strip()[:80]) for i, r in enumerate(body)),
                      reverse=True)[:12]:
    print(f"  {v:6.0f} {100 * v / samples:5.1f}%  line {i:5d}  {s}")
print("warp instructions executed, by how often a line ran:")
by_count = collections.Counter()
for r in body:
    by_count[int(float(r[ie] or 0))] += float(r[ie] or 0)
for count, total in by_count.most_common(4):
    print(f"  lines run {count} times: {100 * total / executed:.1f}% of all")
