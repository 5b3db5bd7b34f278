"""nvidia-smi samples taken while one piece of work ran, summarized: what power_by_kernel.sh and
power_by_pattern.sh read. A sample is a line of
    nvidia-smi --query-gpu=timestamp,clocks.sm,POWER_FIELD,clocks_event_reasons.active
               --format=csv,noheader,nounits -lms 100
"""
import statistics
from datetime import datetime


def read(path):
    """(unix time, SM MHz, watts, clock-event reason bits) of each sample line in path."""
    samples = []
    for line in open(path):
        f = [x.strip() for x in line.split(",")]
        try:
            t = datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            samples.append((t, float(f[1]), float(f[2]), int(f[3], 16)))
        except (ValueError, IndexError):
            pass
    return samples


def window(samples, start, end):
    """(median W, median MHz, samples power-capped (reason 0x4), samples) between start and end,
    or None when none fell there."""
    busy = [s for s in samples if start <= s[0] <= end]
    if not busy:
        return None
    return (statistics.median(s[2] for s in busy), statistics.median(s[1] for s in busy),
            sum(1 for s in busy if s[3] & 0x4), len(busy))
