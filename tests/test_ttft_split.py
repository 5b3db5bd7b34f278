"""bench/ttft_split.py on the saved GuideLLM run of tests/fixtures/guidellm (folio, rate2)."""
import gzip
import json
import subprocess
import sys

from conftest import REPO

SCRIPT = REPO / "bench" / "ttft_split.py"
RUN = REPO / "tests" / "fixtures" / "guidellm" / "folio" / "sharegpt-rate2.json.gz"
sys.path.insert(0, str(REPO / "bench"))
import ttft_split  # noqa: E402


def requests():
    with gzip.open(RUN, "rt") as f:
        doc = json.load(f)
    return [r for b in doc["benchmarks"] for r in b["requests"]["successful"]]


def test_split_partitions_the_requests_by_start_time():
    reqs = requests()
    t0 = min(r["request_start_time"] for r in reqs)
    cut = sorted(r["request_start_time"] - t0 for r in reqs)[len(reqs) // 2]
    early, late = ttft_split.split(RUN, cut)
    assert len(early) + len(late) == len(reqs)
    assert early and late
    assert sorted(early + late) == sorted(r["time_to_first_token_ms"] for r in reqs)
    want_early = sorted(r["time_to_first_token_ms"] for r in reqs
                        if r["request_start_time"] - t0 < cut)
    assert early == want_early


def test_percentile_is_nearest_rank():
    assert ttft_split.percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 3.0
    assert ttft_split.percentile([1.0, 2.0, 3.0, 4.0], 0.99) == 4.0
    assert ttft_split.percentile([7.0], 0.0) == 7.0


def test_cli_prints_one_line_per_run():
    out = subprocess.run([sys.executable, str(SCRIPT), "--seconds", "0", str(RUN)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1
    assert "first 0 s: 0 requests" in lines[0]
    assert f"after: {len(requests())} requests" in lines[0]
    assert "sent: half by " in lines[0] and "last ended " in lines[0]


def test_spread_gives_the_median_and_last_start_and_the_last_end():
    reqs = requests()
    t0 = min(r["request_start_time"] for r in reqs)
    starts = sorted(r["request_start_time"] - t0 for r in reqs)
    half, last, end = ttft_split.spread(RUN)
    assert half == ttft_split.percentile(starts, 0.5)
    assert last == starts[-1] and 0 < half <= last
    assert end == max(r["request_end_time"] for r in reqs) - t0 and end > last


def test_slow_lists_the_requests_over_a_bound_by_start_time():
    reqs = requests()
    bound = sorted(r["time_to_first_token_ms"] for r in reqs)[len(reqs) // 2]
    s = ttft_split.slow(RUN, bound)
    assert len(s) == sum(1 for r in reqs if r["time_to_first_token_ms"] > bound)
    assert s and all(ttft > bound for _, ttft, _ in s)
    assert [start for start, _, _ in s] == sorted(start for start, _, _ in s)
    assert all(tokens > 0 for _, _, tokens in s)


def test_cli_over_prints_a_second_line():
    out = subprocess.run([sys.executable, str(SCRIPT), "--over", "0", str(RUN)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 2
    assert f"{len(requests())} requests over 0 ms, started 0.00-" in lines[1]
