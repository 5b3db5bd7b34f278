"""bench/report.py on saved GuideLLM 0.8.1 outputs (tests/fixtures/guidellm: a quick sharegpt-rate2
run against `folio serve --backend cpu` with its /metrics before and after and its debug log, and
the same run against GuideLLM's mock server, which does not honour max_tokens)."""
import gzip
import json
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest
from conftest import REPO

REPORT = REPO / "bench" / "report.py"
FIXTURES = REPO / "tests" / "fixtures" / "guidellm"
sys.path.insert(0, str(REPO / "bench"))
import report  # noqa: E402


def run_report(*args):
    return subprocess.run([sys.executable, str(REPORT), *map(str, args)], capture_output=True,
                          text=True, timeout=60)


def guidellm_doc(server):
    with gzip.open(FIXTURES / server / "sharegpt-rate2.json.gz", "rt") as f:
        return json.load(f)


def table_row(md, server, run):
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) > 2 and cells[0] == server and cells[1] == run:
            return cells
    raise AssertionError(f"no row for {server} {run} in:\n{md}")


@pytest.fixture
def workload(assets_dir):
    path = assets_dir / "data" / "sharegpt" / "workload_sharegpt_1000.jsonl"
    if not path.is_file():
        pytest.fail(f"{path} missing")
    return path


def test_table_holds_guidellm_statistics(tmp_path):
    md_path, html_path = tmp_path / "s.md", tmp_path / "r.html"
    r = run_report("--md", md_path, "--html", html_path, FIXTURES / "folio", FIXTURES / "mock")
    assert r.returncode == 0, r.stderr
    md = md_path.read_text()
    for server in ("folio", "mock"):
        m = guidellm_doc(server)["benchmarks"][0]["metrics"]
        row = table_row(md, server, "sharegpt-rate2")
        head = report.MAIN_HEAD
        ttft = m["time_to_first_token_ms"]["successful"]
        itl = m["inter_token_latency_ms"]["successful"]
        e2e = m["request_latency"]["successful"]
        assert row[head.index("benchmark")] == "constant@2"
        assert row[head.index("TTFT mean")] == report.fmt(ttft["mean"])
        assert row[head.index("TTFT p50")] == report.fmt(ttft["percentiles"]["p50"])
        assert row[head.index("TTFT p99")] == report.fmt(ttft["percentiles"]["p99"])
        assert row[head.index("ITL p99")] == report.fmt(itl["percentiles"]["p99"], 2)
        assert row[head.index("e2e p99 (s)")] == report.fmt(e2e["percentiles"]["p99"], 2)
        assert row[head.index("output tok/s")] == report.fmt(
            m["output_tokens_per_second"]["total"]["mean"])
        t = m["request_totals"]
        assert row[-1] == f"{t['successful']}/{t['incomplete']}/{t['errored']}"
    # Two servers: the side-by-side table and the ratio bullets.
    assert "## Side by side" in md
    assert re.search(r"\*\*folio / mock, sharegpt-rate2 constant@2\*\*: output tok/s ×[0-9.]+", md)


def test_time_breakdown_is_the_metrics_delta():
    servers = report.load_inputs([str(FIXTURES / "folio")])
    run = servers[0][1][0]
    br = report.server_breakdown(run)

    def value(fname, name):
        for line in (FIXTURES / "folio" / fname).read_text().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise AssertionError(name)

    d = {n: value("metrics_after_sharegpt-rate2.txt", n)
         - value("metrics_before_sharegpt-rate2.txt", n)
         for n in ("folio_steps_total", "folio_step_backend_seconds_total",
                   "folio_scheduler_prompt_tokens_total",
                   "folio_time_to_first_token_seconds_sum",
                   "folio_time_to_first_token_seconds_count")}
    assert d["folio_steps_total"] > 0
    assert br["steps"] == pytest.approx(d["folio_steps_total"])
    assert br["gpu_ms"] == pytest.approx(
        1e3 * d["folio_step_backend_seconds_total"] / d["folio_steps_total"])
    assert br["prompt_per_step"] == pytest.approx(
        d["folio_scheduler_prompt_tokens_total"] / d["folio_steps_total"])
    assert 0 < br["prompt_per_step"] <= br["tok_per_step"]
    assert br["ttft_server"] == pytest.approx(
        1e3 * d["folio_time_to_first_token_seconds_sum"]
        / d["folio_time_to_first_token_seconds_count"])
    # Queue waits come from the scheduler's submit/admitted log lines of the 20 requests.
    assert 0 <= br["queue"] < br["ttft_server"]
    assert 0 < br["gpu_busy"] <= 1.0
    # Nothing was cut off, so the client-side remainder is reported, and is what it says.
    assert br["outside"] == pytest.approx(br["ttft_client"] - br["ttft_server"])


def test_step_timeline_leaves_idle_out_of_a_step(tmp_path):
    """The snapshots around a run span GuideLLM's start-up too: idle time is given in seconds, and
    a step's time is the busy phases only, which cannot exceed the window between the snapshots."""
    def prom(name, steps, idle, wait_gpu, gpu):
        lines = [f"folio_steps_total {steps}", f"folio_step_backend_seconds_total {gpu}"]
        for p in report.LOOP_PHASES:
            v = {"idle": idle, "wait_gpu": wait_gpu, "results": steps * 2e-4}.get(p, 0.0)
            lines.append(f'folio_scheduler_loop_seconds_total{{phase="{p}"}} {v}')
        (tmp_path / name).write_text("\n".join(lines) + "\n")
        return report.read_prom(tmp_path / name)
    import types
    run = types.SimpleNamespace(metrics_before=prom("b.txt", 100, 5.0, 0.1, 0.1),
                                metrics_after=prom("a.txt", 1100, 13.0, 3.1, 3.0))
    t = report.step_timeline(run)
    assert t["idle_s"] == pytest.approx(8.0)
    assert t["wait_gpu"] == pytest.approx(3.0)  # 3 s over 1000 steps
    assert t["results"] == pytest.approx(0.2)
    assert t["loop"] == pytest.approx(3.2)
    assert t["gpu"] == pytest.approx(2.9)
    head, rows = report.timeline_rows([("folio", [types.SimpleNamespace(name="max", **vars(run))])])
    assert head[-1] == "idle (s)" and "idle" not in head and rows[0][-1] == "8.00"


def test_prometheus_parsing():
    text = ('# HELP x\nfolio_requests_finished_total{reason="length"} 7\n'
            'folio_requests_finished_total{reason="stop"} 2\n'
            'vllm:num_requests_running{model_name="m",engine="0"} 3\n'
            'h_bucket{le="+Inf"} 5\nh_sum 1.5e-1\nnot a metric line\n')
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
    m = report.read_prom(f.name)
    assert report.prom_sum(m, "folio_requests_finished_total") == 9
    assert report.prom_sum(m, "folio_requests_finished_total", reason="length") == 7
    assert report.prom_sum(m, "vllm:num_requests_running", model_name="m") == 3
    assert report.prom_sum(m, "h_sum") == pytest.approx(0.15)
    assert report.prom_sum(m, "absent") is None


def test_check_passes_on_folio_and_fails_on_the_mock(workload):
    r = run_report("--check", "--data", workload, FIXTURES / "folio")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ignore_eos missing in 0" in r.stdout
    assert "server log: 20 of 20" in r.stdout
    # GuideLLM's mock server answers with its own lengths: the check must say so.
    r = run_report("--check", "--data", workload, FIXTURES / "mock")
    assert r.returncode == 1
    assert re.search(r"FAIL mock/sharegpt-rate2: .*output tokens != max_tokens in [1-9]", r.stdout)


@pytest.mark.parametrize("tamper, message", [
    ("ignore_eos", "ignore_eos missing in 1"),
    ("max_tokens", "max_tokens != the prompt's output_tokens_count in 1"),
    ("output_tokens", "output tokens != max_tokens in 1"),
])
def test_check_finds_a_tampered_request(tmp_path, workload, tamper, message):
    folder = tmp_path / "folio"
    shutil.copytree(FIXTURES / "folio", folder)
    doc = guidellm_doc("folio")
    rec = doc["benchmarks"][0]["requests"]["successful"][3]
    args = json.loads(rec["request_args"])
    if tamper == "ignore_eos":
        args["body"]["ignore_eos"] = False
    elif tamper == "max_tokens":
        args["body"]["max_completion_tokens"] += 1
        rec["output_tokens"] += 1
    else:
        rec["output_tokens"] -= 1
    rec["request_args"] = json.dumps(args)
    with gzip.open(folder / "sharegpt-rate2.json.gz", "wt") as f:
        json.dump(doc, f)
    r = run_report("--check", "--data", workload, folder)
    assert r.returncode == 1, r.stdout
    assert message in r.stdout
    if tamper == "max_tokens":  # the server's log saw the true value, not the tampered one
        assert "server log: 19 of 20" in r.stdout


def test_html_is_self_contained_with_charts(tmp_path):
    html_path = tmp_path / "r.html"
    r = run_report("--html", html_path, FIXTURES / "folio", FIXTURES / "mock")
    assert r.returncode == 0, r.stderr
    page = html_path.read_text()
    svgs = re.findall(r"<svg.*?</svg>", page, re.S)
    titles = [ET.fromstring(s).find("{http://www.w3.org/2000/svg}text").text for s in svgs]
    assert titles[0] == "Change against folio" and svgs[0].count("<rect") == 4 + 4
    # The time budgets: a bar a run with its parts, Folio's token split into GPU, planning, IPC
    # and the rest.
    assert titles[1:3] == ["Where the first token's time goes (share of the client's mean)",
                           "Where a token's time goes (share of the client's mean)"]
    for part in ("GPU", "planning", "IPC", "outside the step"):
        assert f"<title>{part}: " in svgs[2]
    assert len(svgs) == 9
    svgs, titles = svgs[3:], titles[3:]
    assert titles[:2] == ["TTFT distribution (CDF)",
                          "ITL distribution (CDF of each request's mean ITL)"]
    assert "Output throughput vs request rate" in titles
    # Each CDF has one curve a server, with a point for every measured request it plots.
    assert all(s.count("<polyline") >= 2 for s in svgs)
    # Nothing fetched from elsewhere: no scripts, stylesheets or images by URL.
    assert not re.search(r"<(script|link|img)\b", page)
    assert not re.search(r"(src|href)=", page)


def test_frontend_phases_per_request_and_token(tmp_path):
    """The frontends' admit time a request and event time and CPU a generated token, from the
    metrics a newer frontend writes (added here to a copy of the fixture run)."""
    run_dir = tmp_path / "folio"
    shutil.copytree(FIXTURES / "folio", run_dir)
    for when, (admit, events, cpu) in (("before", (0.0012, 0.0031, 0.42)),
                                       ("after", (0.0192, 0.1203, 1.6))):
        with open(run_dir / f"metrics_{when}_sharegpt-rate2.txt", "a") as f:
            f.write(f'folio_frontend_seconds_total{{phase="admit"}} {admit}\n'
                    f'folio_frontend_seconds_total{{phase="events"}} {events}\n'
                    f"folio_frontend_cpu_seconds_total {cpu}\n")
    br = report.server_breakdown(report.load_inputs([str(run_dir)])[0][1][0])
    requests = 21 - 1  # folio_time_to_first_token_seconds_count after and before
    assert br["admit_ms"] == pytest.approx((0.0192 - 0.0012) / requests * 1e3)
    assert br["events_us"] == pytest.approx((0.1203 - 0.0031) / br["gen_tokens"] * 1e6)
    assert br["fe_cpu_us"] == pytest.approx((1.6 - 0.42) / br["gen_tokens"] * 1e6)
    parts = dict(report.time_budget(br)["first token"])
    assert parts["parse, template, tokenize"] == pytest.approx(br["admit_ms"])
    assert sum(parts.values()) == pytest.approx(br["ttft_client"])


def test_vllm_steps_and_api_server_cpu(tmp_path):
    """vLLM's engine steps (its histogram of tokens a step) and its API server's CPU a
    generated token, read from the /metrics vLLM writes (added to a copy of the mock run)."""
    run_dir = tmp_path / "vllm"
    shutil.copytree(FIXTURES / "mock", run_dir)
    for when, (steps, toks, gen, cpu) in (("before", (10, 40, 30, 2.0)),
                                          ("after", (510, 52040, 50030, 6.5))):
        (run_dir / f"metrics_{when}_sharegpt-rate2.txt").write_text(
            f'vllm:iteration_tokens_total_count{{engine="0"}} {steps}\n'
            f'vllm:iteration_tokens_total_sum{{engine="0"}} {toks}\n'
            f'vllm:generation_tokens_total{{engine="0"}} {gen}\n'
            f"process_cpu_seconds_total {cpu}\n")
    br = report.server_breakdown(report.load_inputs([str(run_dir)])[0][1][0])
    assert br["steps"] == 500 and br["tok_per_step"] == pytest.approx(104.0)
    assert br["fe_cpu_us"] == pytest.approx(4.5 / 50000 * 1e6)
    assert "gpu_ms" not in br


def test_speculative_decoding_acceptance(tmp_path):
    """vLLM's n-gram proposer: the share of drafted tokens accepted and the tokens a
    verification step yields, from its spec_decode counters; absent without them."""
    run_dir = tmp_path / "vllm-ngram"
    shutil.copytree(FIXTURES / "mock", run_dir)
    for when, (drafts, drafted, accepted) in (("before", (5, 25, 10)), ("after", (105, 525, 160))):
        (run_dir / f"metrics_{when}_sharegpt-rate2.txt").write_text(
            f'vllm:spec_decode_num_drafts_total{{engine="0"}} {drafts}\n'
            f'vllm:spec_decode_num_draft_tokens_total{{engine="0"}} {drafted}\n'
            f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {accepted}\n')
    br = report.server_breakdown(report.load_inputs([str(run_dir)])[0][1][0])
    assert br["spec_accept"] == pytest.approx(150 / 500)
    assert br["spec_tok_per_draft"] == pytest.approx(1 + 150 / 100)
    head, rows, _ = report.breakdown_rows([("vllm-ngram", report.load_inputs([str(run_dir)])[0][1])])
    assert "drafts accepted %" in head and rows[0][head.index("drafts accepted %")] == "30"
    plain = report.server_breakdown(report.load_inputs([str(FIXTURES / "folio")])[0][1][0])
    assert "spec_accept" not in plain


def test_time_budget_parts_add_up_to_the_client_figures():
    servers = report.load_inputs([str(FIXTURES / "folio")])
    br = report.server_breakdown(servers[0][1][0])
    b = report.time_budget(br)
    assert sum(v for _, v in b["first token"]) == pytest.approx(br["ttft_client"])
    assert sum(v for _, v in b["a token"]) == pytest.approx(max(br["itl_client"], br["step_ms"]))
    assert dict(b["a token"])["GPU"] == pytest.approx(br["gpu_ms"])
    # A server with no step metrics (vLLM) splits a token into inside and outside the server.
    vllm = {"itl_client": 2.3, "itl_server": 2.0, "ttft_client": 20.0, "outside": 3.0,
            "queue": 1.0}
    b = report.time_budget(vllm)
    assert b["a token"] == [("in the server", 2.0), ("outside the server", pytest.approx(0.3))]
    assert b["first token"][2] == ("prefill", pytest.approx(16.0))
    assert report.time_budget({}) == {}


def test_ablation_rows_are_changes_against_the_first_server():
    """An ablation runs as another server; its row gives each figure and its change in percent
    against the first server's same run and benchmark."""
    base = report.load_inputs([str(FIXTURES / "folio")])[0]
    off = report.load_inputs([str(FIXTURES / "folio")])[0][1]
    for run in off:
        for b in run.benches:
            b.out_tok_s *= 0.8
            b.itl = dict(b.itl, mean=b.itl["mean"] * 1.5)
    head, rows, deltas = report.ablation_rows([base, ("folio-no-chunks", off)])
    assert head[:5] == ["server", "run", "benchmark", "output tok/s", "vs folio"]
    assert len(rows) == 1 and rows[0][:3] == ["folio-no-chunks", "sharegpt-rate2", "constant@2"]
    assert rows[0][4] == "-20.0%" and rows[0][8] == "+50.0%" and rows[0][6] == "+0.0%"
    assert deltas[0][1]["output tok/s"] == pytest.approx(-20.0)
    assert report.ablation_rows([base]) is None


def test_a_client_at_a_full_core_is_named_as_the_bound():
    """A run whose GuideLLM main process had a full core during the benchmark (its start-up and
    wind-down left out) is said to be bounded by the client, with the server's cores beside it;
    a lighter client is not."""
    base = report.load_inputs([str(FIXTURES / "folio")])[0]
    run = base[1][0]
    lo, hi = report.run_window(run)
    def series(during, outside=1.0):
        # Busy before the window (start-up), `during` inside it, idle after.
        return ([[lo - 5 + 0.5 * i, outside] for i in range(10)] +
                [[lo + (hi - lo) * i / 10, during] for i in range(11)] +
                [[hi + 1 + 0.5 * i, 0.0] for i in range(10)])
    def groups(client):
        return {"guidellm": {"cores": 1.1, "peak_process_cores": 1.2,
                             "series": {"10": series(client), "11": series(0.2)}},
                "folio-frontend": {"cores": 0.3, "peak_process_cores": 0.5,
                                   "series": {"20": series(0.3, 0.0)}},
                "folio-scheduler": {"cores": 0.2, "peak_process_cores": 0.4,
                                    "series": {"21": series(0.2, 0.0)}}}
    run.cpu = {"cores_online": 2, "groups": groups(0.95)}
    assert report.client_bound(run) == pytest.approx((0.95, 0.5))
    lines = report.analysis([base], report.breakdown_rows([base])[2])
    assert any("the client bounds this run" in line and "0.95 of a core" in line
               for line in lines), lines
    head, rows = report.cpu_rows([base])
    per_tok = 1.15 / base[1][0].benches[0].out_tok_s * 1e6  # the group's CPU a generated token
    assert f"guidellm 1.10 (in the run 1.15, {per_tok:.0f} us/tok, busiest 0.95; peak 1.20)" \
        in rows[0][3]
    # Busy only at start-up: not the bound.
    run.cpu = {"cores_online": 2, "groups": groups(0.5)}
    assert report.client_bound(run) is None
    lines = report.analysis([base], report.breakdown_rows([base])[2])
    assert not any("the client bounds" in line for line in lines)


def test_a_throughput_run_the_client_did_not_fill_is_named():
    """A throughput benchmark whose GuideLLM kept far fewer requests in flight than its
    max_concurrency says so; one that filled it does not."""
    base = report.load_inputs([str(FIXTURES / "folio")])[0]
    b = base[1][0].benches[0]
    b.kind, b.max_concurrency, b.concurrency = "throughput", 1024, 41.5
    lines = report.analysis([base], report.breakdown_rows([base])[2])
    assert any("kept 42 requests in flight on average of the 1024" in x for x in lines), lines
    b.concurrency = 1000.0
    lines = report.analysis([base], report.breakdown_rows([base])[2])
    assert not any("in flight on average" in x for x in lines)


def test_cdf_points():
    pts = report.cdf_points([3.0, 1.0, 2.0, None, 4.0])
    assert pts == [(1.0, 0.25), (2.0, 0.5), (3.0, 0.75), (4.0, 1.0)]


def test_bad_input_is_a_clear_error(tmp_path):
    bad = tmp_path / "x"
    bad.mkdir()
    (bad / "sharegpt-rate2.json").write_text('{"not": "guidellm"}')
    r = run_report(bad)
    assert r.returncode != 0
    assert "not a GuideLLM report" in r.stderr
    assert "no GuideLLM results" in r.stderr


def test_proc_cpu_names_the_busy_process(tmp_path):
    """bench/proc_cpu.py, sampling while a shell spins, finds that shell's group busy and
    writes a table that names it."""
    out = tmp_path / "cpu.json"
    sampler = subprocess.Popen([sys.executable, str(REPO / "bench" / "proc_cpu.py"), str(out),
                                "--interval", "0.2"])
    time.sleep(0.5)
    spin = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    time.sleep(2.5)
    spin.kill()
    spin.wait()
    sampler.send_signal(signal.SIGINT)
    assert sampler.wait(timeout=30) == 0
    doc = json.loads(out.read_text())
    sh = doc["groups"]["sh"]
    assert sh["cpu_s"] > 0.3 and sh["peak_process_cores"] > 0.3, doc["groups"]
    # The spinning shell's own samples: busy for most of them (shared cores: not always whole).
    samples = [c for _, c in sh["series"][str(spin.pid)]]
    assert sorted(samples)[len(samples) // 2] > 0.2, sh
    assert doc["wall_s"] >= 2.5
    text = subprocess.run([sys.executable, str(REPO / "bench" / "proc_cpu.py"), "--table",
                           str(out)], capture_output=True, text=True, check=True).stdout
    assert "\nsh " in text
