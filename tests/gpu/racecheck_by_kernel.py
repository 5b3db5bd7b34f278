#!/usr/bin/env python3
"""Attributes each hazard report of a compute-sanitizer racecheck log to the kernel it names.

    racecheck_by_kernel.py LOG

cuBLASLt's own kernels (nvjet, cutlass, cublas) report shared-memory hazards of their own on some
shapes (the group-3 fixture's prefill GEMMs at hidden 768: bench/results/2026-12-02-cuda-round25.md),
and leaving them uninstrumented makes their launches fail (round 26). So a racecheck run over a
whole step is read report by report: a report is the line that says a race or hazard was found
plus the indented lines after it (its accesses, each naming a kernel). Prints one line: the
reports in Folio's kernels and in cuBLASLt's, with the tool's summary. Exit status 0 when the
run finished (the summary is there), no report names a kernel of Folio's and every report could be
attributed; else 1.
"""
import re
import sys

FOREIGN = re.compile(r"nvjet|cutlass|cublas", re.I)
START = re.compile(r"Race reported|hazard detected", re.I)
CONTINUED = re.compile(r"^=========\s{3,}\S")
SUMMARY = re.compile(r"RACECHECK SUMMARY:.*")


def reports(lines):
    """Each report as the list of its lines."""
    cur = None
    for line in lines:
        if START.search(line):
            if cur:
                yield cur
            cur = [line]
        elif cur is not None and CONTINUED.match(line):
            cur.append(line)
        elif cur is not None:
            yield cur
            cur = None
    if cur:
        yield cur


def main():
    lines = open(sys.argv[1], errors="replace").read().splitlines()
    ours = foreign = 0
    kernels = {}
    for rep in reports(lines):
        text = " ".join(rep)
        if FOREIGN.search(text):
            foreign += 1
        else:
            ours += 1
            m = re.search(r"([A-Za-z_]\w*(?:<[^()]*>)?)\(", text.split(" at ", 1)[-1])
            name = m.group(1) if m else text[:120]
            kernels[name] = kernels.get(name, 0) + 1
    summary = next((m.group(0) for l in lines for m in [SUMMARY.search(l)] if m), None)
    errors = re.search(r"(\d+) errors?\b", summary or "")
    unattributed = errors and int(errors.group(1)) > 0 and ours + foreign == 0
    print(f"{ours} hazard reports in Folio's kernels, {foreign} in cuBLASLt's; "
          + (summary or "no summary: the run did not finish")
          + ("; reports not attributed" if unattributed else "")
          + "".join(f"; {k}: {n}" for k, n in sorted(kernels.items())))
    return 1 if ours or unattributed or not summary else 0


if __name__ == "__main__":
    sys.exit(main())
