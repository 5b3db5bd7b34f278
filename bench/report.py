#!/usr/bin/env python3
"""GuideLLM results -> one markdown summary and one self-contained HTML page, with the analysis of
where the time goes, from the measured numbers and the servers' own /metrics.

    python3 bench/report.py [--md OUT.md] [--html OUT.html] [--meta meta.json] [--data JSONL]
                            INPUT [INPUT ...]
    python3 bench/report.py --check INPUT [INPUT ...]

INPUT is a server's result folder as bench/gpu/guidellm_bench.sh leaves it (NAME/ holding
<run>.json from GuideLLM, metrics_before_<run>.txt and metrics_after_<run>.txt from the server's
/metrics, and server.log[.gz]), or one GuideLLM json file; LABEL=INPUT names the server (default:
the folder's name). Two or more servers give a side-by-side table.

--check verifies that the output lengths really were fixed: every request GuideLLM sent carried
ignore_eos and max_tokens equal to its prompt's output_tokens_count in the workload file, every
completed request got exactly that many tokens (a constrained one, of a json_schema workload, at
most that many, and JSON where its grammar ended it sooner), and the server's own log (Folio at
debug level) saw the same max_tokens values. Exit status 1 when a check fails.

Only the standard library: the charts are inline SVG drawn here, so the page needs nothing else.
"""

import argparse
import collections
import gzip
import html
import json
import math
import os
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
RUN_ORDER = ["sharegpt-rate2", "sharegpt-poisson", "sharegpt-max", "sharegpt-saturate",
             "sharegpt-sweep"]


# ---------------------------------------------------------------- reading GuideLLM outputs


def dig(d, *keys, default=None):
    for k in keys:
        if isinstance(d, dict) and k in d:
            d = d[k]
        else:
            return default
    return d


def dist(metrics, name, group="successful"):
    """mean, p50, p99 of one GuideLLM distribution (None where absent)."""
    d = dig(metrics, name, group) or {}
    pct = d.get("percentiles") or {}
    return {"mean": d.get("mean"), "p50": pct.get("p50", d.get("median")), "p99": pct.get("p99"),
            "count": d.get("count")}


def bench_label(cfg):
    s = cfg.get("strategy") or {}
    kind = s.get("type_", "?")
    rate = s.get("rate")
    if rate is not None and kind in ("constant", "poisson", "async"):
        return f"{kind}@{rate:g}" if rate >= 10 else f"{kind}@{rate:.3g}"
    if kind == "concurrent" and s.get("streams"):
        return f"concurrent@{s['streams']}"
    return kind


class Bench:
    """One GuideLLM benchmark (one strategy: a rate, or throughput, ...)."""

    def __init__(self, b):
        cfg = b.get("config") or {}
        m = b.get("metrics") or {}
        sm = b.get("scheduler_metrics") or {}
        self.label = bench_label(cfg)
        self.kind = dig(cfg, "strategy", "type_", default="?")
        self.target_rate = dig(cfg, "strategy", "rate")
        self.start = sm.get("start_time", b.get("start_time"))
        self.end = sm.get("end_time", b.get("end_time"))
        self.duration = b.get("duration")
        self.measure = (sm.get("measure_start_time"), sm.get("measure_end_time"))
        totals = m.get("request_totals") or {}
        self.completed = totals.get("successful", 0)
        self.incomplete = totals.get("incomplete", 0)
        self.errored = totals.get("errored", 0)
        self.req_s = dig(m, "requests_per_second", "successful", "mean")
        self.out_tok_s = dig(m, "output_tokens_per_second", "total", "mean")
        self.concurrency = dig(m, "request_concurrency", "successful", "mean")
        self.max_concurrency = dig(cfg, "strategy", "max_concurrency")
        self.ttft = dist(m, "time_to_first_token_ms")
        self.itl = dist(m, "inter_token_latency_ms")
        self.tpot = dist(m, "time_per_output_token_ms")
        self.e2e = dist(m, "request_latency")
        reqs = b.get("requests") or {}
        self.records = {g: [r for r in (reqs.get(g) or []) if isinstance(r, dict)]
                        for g in ("successful", "incomplete", "errored")}

    def measured(self):
        """Completed requests inside GuideLLM's measured window (warm-up/cool-down excluded)."""
        lo, hi = self.measure
        out = []
        for r in self.records["successful"]:
            t = r.get("request_start_time")
            if lo is not None and t is not None and (t < lo - 1e-6 or (hi and t > hi + 1e-6)):
                continue
            out.append(r)
        return out


class Run:
    """One GuideLLM invocation against one server: its json and the server's metrics around it."""

    def __init__(self, server, path):
        self.server = server
        self.path = Path(path)
        opener = gzip.open if self.path.name.endswith(".gz") else open
        with opener(self.path, "rt") as f:
            self.doc = json.load(f)
        if not isinstance(self.doc, dict) or "benchmarks" not in self.doc:
            raise ValueError(f"{path}: not a GuideLLM report (no 'benchmarks')")
        self.name = (dig(self.doc, "config", "metadata", "labels", "run")
                     or self.path.name.removesuffix(".gz").removesuffix(".json"))
        self.workload = dig(self.doc, "config", "metadata", "name", default=self.name)
        self.benches = [Bench(b) for b in self.doc["benchmarks"]]
        self.guidellm = dig(self.doc, "metadata", "guidellm_version", default="?")
        d = self.path.parent
        self.metrics_before = read_prom(d / f"metrics_before_{self.name}.txt")
        self.metrics_after = read_prom(d / f"metrics_after_{self.name}.txt")
        self.snapshot_after_time = snapshot_time(d / f"metrics_after_{self.name}.txt")
        self.data_path = dig(self.doc, "config", "spec", "data", default=[{}])[0].get("path")
        try:  # bench/proc_cpu.py's sampling over the run, when there was one
            self.cpu = json.loads((d / f"cpu_{self.name}.json").read_text())
        except (OSError, ValueError):
            self.cpu = None

    def window(self):
        starts = [b.start for b in self.benches if b.start]
        ends = [b.end for b in self.benches if b.end]
        return (min(starts), max(ends)) if starts and ends else (None, None)

    def sort_key(self):
        for i, w in enumerate(RUN_ORDER):
            if self.name.startswith(w):
                m = re.search(r"-r([0-9.]+)$", self.name)
                return (i, float(m.group(1)) if m else 0.0, self.name)
        return (len(RUN_ORDER), 0.0, self.name)


def load_inputs(inputs):
    """[(server, [Run])] in the order given."""
    servers = collections.OrderedDict()
    for item in inputs:
        label, _, p = item.rpartition("=") if "=" in item else ("", "", item)
        path = Path(p)
        if path.is_dir():
            server = label or path.name
            files = [f for f in sorted(path.glob("*.json")) + sorted(path.glob("*.json.gz"))
                     if not f.name.endswith(".scenario.json") and f.name != "meta.json"]
        elif path.is_file():
            server = label or path.parent.name
            files = [path]
        else:
            raise SystemExit(f"report: {p} is neither a result folder nor a file")
        runs = servers.setdefault(server, [])
        for f in files:
            try:
                runs.append(Run(server, f))
            except (ValueError, OSError) as e:
                print(f"report: skipping {f}: {e}", file=sys.stderr)
    for runs in servers.values():
        runs.sort(key=Run.sort_key)
    return list(servers.items())


# ---------------------------------------------------------------- Prometheus text


PROM_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
PROM_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def read_prom(path):
    """{(name, ((label, value), ...)): float}; {} when the file is absent or empty."""
    try:
        text = Path(path).read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = PROM_LINE.match(line)
        if not m:
            continue
        labels = tuple(sorted(PROM_LABEL.findall(m.group(2) or "")))
        try:
            out[(m.group(1), labels)] = float(m.group(3))
        except ValueError:
            continue
    return out


def snapshot_time(path):
    """The '# snapshot_unix_time T' line bench/gpu/guidellm_bench.sh writes first (or None)."""
    try:
        with open(path) as f:
            m = re.match(r"# snapshot_unix_time ([0-9.]+)", f.readline())
    except OSError:
        return None
    return float(m.group(1)) if m else None


def prom_sum(metrics, name, **want):
    """Sum of a metric over the series whose labels include `want` (None if there is none)."""
    vals = [v for (n, labels), v in metrics.items()
            if n == name and all((k, str(x)) in labels for k, x in want.items())]
    return sum(vals) if vals else None


def prom_delta(run, name, **want):
    a, b = prom_sum(run.metrics_after, name, **want), prom_sum(run.metrics_before, name, **want)
    if a is None:
        return None
    return a - (b or 0.0)


def hist_mean_delta(run, name):
    s, c = prom_delta(run, name + "_sum"), prom_delta(run, name + "_count")
    return s / c if s is not None and c else None


def first_of(run, names, fn):
    for n in names:
        v = fn(run, n)
        if v is not None:
            return v
    return None


def server_breakdown(run):
    """Where the time goes, from the server's /metrics deltas over the run (ms unless named)."""
    if not run.metrics_after:
        return {}
    ms = lambda v: v * 1e3 if v is not None else None  # noqa: E731
    r = {}
    # Folio's names first, then vLLM's, so the same table reads both servers.
    r["ttft_server"] = ms(first_of(run, ["folio_time_to_first_token_seconds",
                                         "vllm:time_to_first_token_seconds"], hist_mean_delta))
    r["itl_server"] = ms(first_of(run, ["folio_inter_token_latency_seconds",
                                        "vllm:inter_token_latency_seconds",
                                        "vllm:time_per_output_token_seconds"], hist_mean_delta))
    r["e2e_server_s"] = first_of(run, ["folio_e2e_request_latency_seconds",
                                       "vllm:e2e_request_latency_seconds"], hist_mean_delta)
    log = read_server_log(run.path.parent)
    lo, hi = run.window()
    if log and log["waits"] and lo:
        waits = [w for t, w in log["waits"] if lo - 1 <= t <= (hi or t) + 1]
        if waits:
            r["queue"] = ms(mean(waits))
    if "queue" not in r:
        r["queue"] = ms(hist_mean_delta(run, "vllm:request_queue_time_seconds"))
    r["prefill"] = ms(hist_mean_delta(run, "vllm:request_prefill_time_seconds"))
    r["decode_s"] = hist_mean_delta(run, "vllm:request_decode_time_seconds")
    # The snapshot after the run is taken as GuideLLM exits: work the server still did on
    # requests GuideLLM had cut off counts, so the window ends there, not at GuideLLM's end.
    end = run.snapshot_after_time or hi
    window = end - lo if lo and end and end > lo else None
    steps = prom_delta(run, "folio_steps_total")
    if steps:
        plan = prom_delta(run, "folio_step_plan_seconds_total") or 0.0
        gpu = prom_delta(run, "folio_step_backend_seconds_total") or 0.0
        ipc = prom_delta(run, "folio_step_ipc_seconds_total") or 0.0
        r.update(plan_ms=plan / steps * 1e3, gpu_ms=gpu / steps * 1e3,
                 ipc_ms=ipc / steps * 1e3, step_ms=(plan + gpu + ipc) / steps * 1e3)
        if window:
            r["gpu_busy"] = gpu / window
        prompt = prom_delta(run, "folio_scheduler_prompt_tokens_total") or 0
        toks = prompt + (prom_delta(run, "folio_scheduler_generation_tokens_total") or 0)
        # Prompt tokens a step: how much of the batch is prefill chunks, which run eagerly
        # at their exact row counts rather than as a decode graph.
        r["prompt_per_step"] = prompt / steps
    else:  # vLLM counts its engine steps in a histogram of tokens a step
        steps = prom_delta(run, "vllm:iteration_tokens_total_count")
        toks = prom_delta(run, "vllm:iteration_tokens_total_sum")
    if steps and toks is not None:
        r.update(steps=steps, tok_per_step=toks / steps)
        if window:
            r["steps_per_s"] = steps / window
    hits = first_of(run, ["folio_prefix_cache_hits_total", "vllm:prefix_cache_hits_total"],
                    prom_delta)
    queries = first_of(run, ["folio_prefix_cache_queries_total",
                             "vllm:prefix_cache_queries_total"], prom_delta)
    if hits is not None and queries:
        r["prefix_hit"] = hits / queries
    r["preempt"] = first_of(run, ["folio_num_preemptions_total", "vllm:num_preemptions_total"],
                            prom_delta)
    # Speculative decoding (vLLM's proposers): the share of drafted tokens the target model
    # accepted, and the tokens a verification step yields (accepted drafts plus its own token).
    drafted = prom_delta(run, "vllm:spec_decode_num_draft_tokens_total")
    accepted = prom_delta(run, "vllm:spec_decode_num_accepted_tokens_total")
    drafts = prom_delta(run, "vllm:spec_decode_num_drafts_total")
    if drafted and accepted is not None:
        r["spec_accept"] = accepted / drafted
    if drafts and accepted is not None:
        r["spec_tok_per_draft"] = 1 + accepted / drafts
    r["gen_tokens"] = first_of(run, ["folio_scheduler_generation_tokens_total",
                                     "vllm:generation_tokens_total"], prom_delta)
    # Folio's frontends: the HTTP loop's time admitting a request (parse, chat template,
    # tokenization, submit) and handling a token's event (detokenization, SSE), and their
    # processes' CPU a generated token.
    admitted = prom_delta(run, "folio_time_to_first_token_seconds_count")
    admit = prom_delta(run, "folio_frontend_seconds_total", phase="admit")
    if admit is not None and admitted:
        r["admit_ms"] = admit / admitted * 1e3
    # vLLM's API server exports its own process's CPU: the same place in its path.
    fe_cpu = first_of(run, ["folio_frontend_cpu_seconds_total", "process_cpu_seconds_total"],
                      prom_delta)
    for key, v in (("events_us", prom_delta(run, "folio_frontend_seconds_total", phase="events")),
                   ("fe_cpu_us", fe_cpu)):
        if v is not None and r.get("gen_tokens"):
            r[key] = v / r["gen_tokens"] * 1e6
    r["finished_length"] = prom_delta(run, "folio_requests_finished_total", reason="length")
    r["finished_stop"] = prom_delta(run, "folio_requests_finished_total", reason="stop")
    r["rejected"] = prom_delta(run, "folio_scheduler_requests_rejected_total")
    # Client-side means over the run's completed requests (all benchmarks of the run).
    reqs = [q for b in run.benches for q in b.measured()]
    if reqs:
        r["ttft_client"] = mean([q.get("time_to_first_token_ms") for q in reqs])
        r["itl_client"] = mean([q.get("inter_token_latency_ms") for q in reqs])
    # The server's histograms cover every request it saw (warm-up and cut-off ones too), the
    # client's means only the completed ones after warm-up: compare them only when nothing was
    # cut off, where the two sets are nearly the same.
    cut = sum(b.incomplete + b.errored for b in run.benches)
    done = sum(b.completed for b in run.benches)
    if (r.get("ttft_client") is not None and r.get("ttft_server") is not None
            and cut <= 0.02 * max(done, 1)):
        r["outside"] = r["ttft_client"] - r["ttft_server"]
        if r.get("queue") is not None and r.get("prefill") is None:
            r["prefill_est"] = r["ttft_server"] - r["queue"] - r.get("admit_ms", 0.0)
    return {k: v for k, v in r.items() if v is not None}


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


# ---------------------------------------------------------------- checks


def request_body(rec):
    args = rec.get("request_args")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return None
    return args.get("body") if isinstance(args, dict) else None


def body_prompt(body):
    if "prompt" in body:
        return body["prompt"] if isinstance(body["prompt"], str) else None
    msgs = body.get("messages") or []
    if not msgs:
        return None
    content = msgs[-1].get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return None


def body_max_tokens(body):
    for k in ("max_completion_tokens", "max_tokens", "max_output_tokens"):
        if isinstance(body.get(k), int):
            return body[k]
    return None


def load_workload(path):
    """{prompt: {output_tokens_count, ...}} of the workload jsonl (a few prompts recur with
    different counts); None when it cannot be read."""
    try:
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except (OSError, json.JSONDecodeError):
        return None
    out = collections.defaultdict(set)
    for r in rows:
        if "prompt" in r and "output_tokens_count" in r:
            out[r["prompt"]].add(r["output_tokens_count"])
    return dict(out)


LOG_LINE = re.compile(r"^(\S+Z) (folio-frontend|folio-scheduler)\[\d+\] DEBUG req=(\S+) "
                      r"(submitted: \d+ prompt tokens, max_tokens (\d+)|submit:|admitted)")


def log_time(stamp):
    t = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ")
    return t.replace(tzinfo=timezone.utc).timestamp()


_server_logs = {}


def read_server_log(folder):
    """Folio's debug log in the folder (server.log[.gz]) -> {'submits': [(t, max_tokens)],
    'waits': [(t_submit, seconds from the scheduler's submit to its first admission)]};
    None when there is no such log."""
    key = str(folder)
    if key in _server_logs:
        return _server_logs[key]
    result = None
    for name in ("server.log", "server.log.gz"):
        p = Path(folder) / name
        if not p.is_file():
            continue
        opener = gzip.open if name.endswith(".gz") else open
        submits, sched_submit, admitted = [], {}, {}
        with opener(p, "rt", errors="replace") as f:
            for line in f:
                m = LOG_LINE.match(line)
                if not m:
                    continue
                t, req = log_time(m.group(1)), m.group(3)
                if m.group(5) is not None:
                    submits.append((t, int(m.group(5))))
                elif m.group(4) == "submit:":
                    sched_submit.setdefault(req, t)
                elif req not in admitted:
                    admitted[req] = t
        waits = [(t0, admitted[r] - t0) for r, t0 in sched_submit.items() if r in admitted]
        result = {"submits": submits, "waits": waits} if submits or waits else None
        break
    _server_logs[key] = result
    return result


def check_run(run, workload, submits):
    """Lines of findings and a pass flag for one run."""
    ok = True
    lines = []
    done = [q for b in run.benches for q in b.records["successful"]]
    with_body = [(q, request_body(q)) for q in done]
    with_body = [(q, body) for q, body in with_body if body is not None]
    no_eos = sum(1 for _, body in with_body if body.get("ignore_eos") is not True)
    # A constrained request (a json_schema workload) ends where its grammar ends: at most
    # max_tokens, and where it ended before them its output must be JSON.
    constrained = [(q, body) for q, body in with_body if body.get("response_format")]
    free = [(q, body) for q, body in with_body if not body.get("response_format")]
    wrong_len = sum(1 for q, body in free if body_max_tokens(body) != q.get("output_tokens"))
    wrong_len += sum(1 for q, body in constrained
                     if not 0 < int(q.get("output_tokens") or 0) <= (body_max_tokens(body) or 0))
    unknown = wrong_data = 0
    if workload is not None:
        for _, body in with_body:
            want = workload.get(body_prompt(body))
            if want is None:
                unknown += 1
            elif body_max_tokens(body) not in want:
                wrong_data += 1
    line = (f"{run.server}/{run.name}: {len(done)} completed, {len(with_body)} with their request "
            f"body; ignore_eos missing in {no_eos}; output tokens != max_tokens in {wrong_len}")
    if workload is not None:
        line += f"; max_tokens != the prompt's output_tokens_count in {wrong_data}"
        line += f"; prompt not in the workload file: {unknown}"
    else:
        line += "; workload file not found (max_tokens not compared with it)"
    lines.append(line)
    bad_json = 0
    if constrained:
        ended = [q for q, body in constrained
                 if int(q.get("output_tokens") or 0) < (body_max_tokens(body) or 0)]
        for q in ended:
            try:
                json.loads(q.get("output") or "")
            except json.JSONDecodeError:
                bad_json += 1
        lines.append(f"{run.server}/{run.name}: {len(constrained)} constrained requests, "
                     f"{len(ended)} ended by their grammar before max_tokens, {bad_json} of those "
                     f"not JSON")
    if not with_body or no_eos or wrong_len or wrong_data or unknown or bad_json:
        ok = False
    if submits is not None:
        lo, hi = run.window()
        seen = collections.Counter(m for t, m in submits
                                   if lo is None or (lo - 2 <= t <= (hi or t) + 2))
        missing = 0
        for _, body in with_body:
            m = body_max_tokens(body)
            if seen[m] > 0:
                seen[m] -= 1
            else:
                missing += 1
        lines.append(f"{run.server}/{run.name}: server log: {len(with_body) - missing} of "
                     f"{len(with_body)} requests' max_tokens seen in the server's submit lines")
        ok = ok and missing == 0
    br = server_breakdown(run)
    if "finished_length" in br:
        lines.append(f"{run.server}/{run.name}: server counters: {br['finished_length']:.0f} "
                     f"finished by length, {br.get('finished_stop', 0):.0f} by stop/EOS, "
                     f"{br.get('gen_tokens', 0):.0f} tokens generated")
    return ok, lines


def run_checks(servers, data_arg):
    all_ok = True
    cache = {}
    for server, runs in servers:
        folder = runs[0].path.parent if runs else None
        log = read_server_log(folder) if folder else None
        submits = log["submits"] if log and log["submits"] else None
        for run in runs:
            path = data_arg or run.data_path
            candidates = [p for p in (path, os.environ.get("FOLIO_WORKLOAD"),
                                      REPO_ROOT / "bundle/data/workload_sharegpt_1000.jsonl",
                                      REPO_ROOT / "assets/data/sharegpt/workload_sharegpt_1000.jsonl") if p]
            workload = None
            for c in candidates:
                if str(c) not in cache:
                    cache[str(c)] = load_workload(c)
                if cache[str(c)] is not None:
                    workload = cache[str(c)]
                    break
            ok, lines = check_run(run, workload, submits)
            all_ok = all_ok and ok
            for line in lines:
                print(("ok   " if ok else "FAIL ") + line)
    return all_ok


# ---------------------------------------------------------------- markdown


def fmt(v, nd=1):
    if v is None:
        return "–"
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return "–"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{nd}f}"


def md_table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


MAIN_HEAD = ["server", "run", "benchmark", "req/s", "output tok/s", "TTFT mean", "TTFT p50",
             "TTFT p99", "ITL mean", "ITL p50", "ITL p99", "e2e p50 (s)", "e2e p99 (s)",
             "done/incompl./err"]


def main_rows(servers):
    rows = []
    for server, runs in servers:
        for run in runs:
            for b in run.benches:
                rows.append([server, run.name, b.label, fmt(b.req_s, 2), fmt(b.out_tok_s),
                             fmt(b.ttft["mean"]), fmt(b.ttft["p50"]), fmt(b.ttft["p99"]),
                             fmt(b.itl["mean"], 2), fmt(b.itl["p50"], 2), fmt(b.itl["p99"], 2),
                             fmt(b.e2e["p50"], 2), fmt(b.e2e["p99"], 2),
                             f"{b.completed}/{b.incomplete}/{b.errored}"])
    return rows


BREAKDOWN_COLS = [
    ("ttft_client", "TTFT client", 1), ("ttft_server", "TTFT server", 1),
    ("outside", "HTTP/client", 1), ("admit_ms", "admit (parse, template, tokenize)", 3),
    ("queue", "queue", 1),
    ("prefill_est", "prefill (TTFT−queue−admit)", 1), ("prefill", "prefill", 1),
    ("itl_client", "ITL client", 2), ("itl_server", "ITL server", 2),
    ("step_ms", "step", 2), ("plan_ms", "plan", 3), ("gpu_ms", "GPU", 2), ("ipc_ms", "IPC", 3),
    ("steps_per_s", "steps/s", 0), ("gpu_busy", "GPU busy %", 0),
    ("tok_per_step", "tok/step", 1), ("prompt_per_step", "of them prompt", 1),
    ("prefix_hit", "prefix hit %", 0),
    ("preempt", "preempt.", 0),
    ("spec_accept", "drafts accepted %", 0), ("spec_tok_per_draft", "tok/verify step", 2),
    ("events_us", "frontend events us/tok", 1), ("fe_cpu_us", "frontend (API server) CPU us/tok", 1),
]


def breakdown_rows(servers):
    table = []
    for server, runs in servers:
        for run in runs:
            br = server_breakdown(run)
            if br:
                table.append((server, run.name, br))
    cols = [c for c in BREAKDOWN_COLS if any(c[0] in br for _, _, br in table)]
    rows = []
    for server, name, br in table:
        row = [server, name]
        for key, _, nd in cols:
            v = br.get(key)
            if key in ("gpu_busy", "prefix_hit", "spec_accept") and v is not None:
                v *= 100
            row.append(fmt(v, nd))
        rows.append(row)
    return ["server", "run"] + [c[1] for c in cols], rows, table


LOOP_PHASES = ("intake", "results", "plan", "events", "wait_gpu", "held_by_events", "idle")


def step_timeline(run):
    """Folio's step timeline over a run, ms a step: the scheduler loop's phases while it had work
    (folio_scheduler_loop_seconds_total, common/loop_phase.h) and the GPU's share; idle is given in
    seconds, since the snapshots around a run also span GuideLLM's start and end, when no step
    runs. None for a server without them."""
    steps = prom_delta(run, "folio_steps_total")
    phases = {p: prom_delta(run, "folio_scheduler_loop_seconds_total", phase=p)
              for p in LOOP_PHASES}
    if not steps or any(v is None for v in phases.values()):
        return None
    per = {p: v / steps * 1e3 for p, v in phases.items() if p != "idle"}
    per["loop"] = sum(per.values())
    per["idle_s"] = phases["idle"]
    per["gpu"] = (prom_delta(run, "folio_step_backend_seconds_total") or 0.0) / steps * 1e3
    return per


def timeline_rows(servers):
    busy = [p for p in LOOP_PHASES if p != "idle"]
    rows = []
    for server, runs in servers:
        for run in runs:
            t = step_timeline(run)
            if t:
                rows.append([server, run.name, fmt(t["loop"], 3), fmt(t["gpu"], 3)] +
                            [fmt(t[p], 3) for p in busy] + [fmt(t["idle_s"], 2)])
    return ["server", "run", "loop a step", "GPU a step"] + busy + ["idle (s)"], rows


def cpu_rows(servers, top=6):
    """The busiest process groups of each run (bench/proc_cpu.py): cores used over the sampled
    window; within GuideLLM's benchmarks, the group's cores and its busiest single process's; and
    that process's peak over one sampling interval (near 1.0: it had a core to itself and no
    more). For a run of one benchmark, the group's CPU a generated token as well (its cores in
    the run over the output tok/s), the cost that sets how many cores a rate needs."""
    rows = []
    for server, runs in servers:
        for run in runs:
            if not run.cpu:
                continue
            groups = list(run.cpu.get("groups", {}).items())[:top]
            window = run_window(run)
            tok_s = run.benches[0].out_tok_s if len(run.benches) == 1 else None
            cells = []
            for g, e in groups:
                inside = group_in_window(e, window)
                per_tok = (f"{inside[0] / tok_s * 1e6:.0f} us/tok, "
                           if inside and tok_s and inside[0] >= 0.05 else "")
                inside = (f"in the run {inside[0]:.2f}, {per_tok}busiest {inside[1]:.2f}; "
                          if inside else "")
                cells.append(f"{g} {e['cores']:.2f} ({inside}peak {e['peak_process_cores']:.2f})")
            rows.append([server, run.name, str(run.cpu.get("cores_online", "?")), "; ".join(cells)])
    head = ["server", "run", "cores",
            "process group: cores (in the benchmarks: the group's, its busiest process's; peak)"]
    return head, rows


# A process at this much of a core for most of a run had no more to give: a Python process
# (GuideLLM's main one gathers every request's results) cannot use a second core.
CLIENT_BOUND_CORES = 0.8


def run_window(run):
    """(first start, last end) of the run's GuideLLM benchmarks in unix seconds, or None."""
    spans = [(b.start, b.end) for b in run.benches if b.start and b.end]
    if not spans:
        return None
    return min(a for a, _ in spans), max(b for _, b in spans)


def cores_in_window(samples, window):
    """A process's mean cores over its samples inside window: [(unix time, cores)]."""
    inside = [c for t, c in samples if window[0] <= t <= window[1]]
    return sum(inside) / len(inside) if inside else None


def group_in_window(group, window):
    """(the group's cores, its busiest process's cores) within window, from proc_cpu's series
    of the processes that used a fifth of a second or more; None without samples there."""
    if not window:
        return None
    vals = [v for v in (cores_in_window(x, window) for x in group.get("series", {}).values())
            if v is not None]
    return (sum(vals), max(vals)) if vals else None


def client_bound(run):
    """(GuideLLM's busiest process's cores within the benchmarks, the server's cores there) when
    that process had at least CLIENT_BOUND_CORES of a core, else None."""
    groups = (run.cpu or {}).get("groups", {})
    window = run_window(run)
    client = group_in_window(groups.get("guidellm", {}), window)
    if client is None or client[1] < CLIENT_BOUND_CORES:
        return None
    server = sum((group_in_window(e, window) or (0.0,))[0] for g, e in groups.items()
                 if g.startswith(("folio", "vllm", "VLLM")))
    return client[1], server


def side_by_side(servers):
    if len(servers) < 2:
        return None
    index = collections.OrderedDict()
    for server, runs in servers:
        for run in runs:
            for b in run.benches:
                index.setdefault((run.name, b.label), {})[server] = b
    names = [s for s, _ in servers]
    head = ["run", "benchmark"]
    for key in ("output tok/s", "TTFT p50", "ITL p50", "e2e p99 (s)"):
        head += [f"{key} {n}" for n in names]
    rows = []
    for (run, label), by in index.items():
        if len(by) < 2:
            continue
        row = [run, label]
        for get, nd in ((lambda b: b.out_tok_s, 0), (lambda b: b.ttft["p50"], 1),
                        (lambda b: b.itl["p50"], 2), (lambda b: b.e2e["p99"], 2)):
            row += [fmt(get(by[n]), nd) if n in by else "–" for n in names]
        rows.append(row)
    return head, rows


ABLATION_KEYS = (("output tok/s", lambda b: b.out_tok_s, 0),
                 ("TTFT p50", lambda b: b.ttft["p50"], 1),
                 ("ITL mean", lambda b: b.itl["mean"], 2),
                 ("e2e p99 (s)", lambda b: b.e2e["p99"], 2))


def pct(a, base):
    return (a / base - 1.0) * 100.0 if a is not None and base else None


def ablation_rows(servers):
    """Every server against the first (the baseline): an ablation run as another server (one
    engine choice switched off) reads as the change it makes, in percent, run by run."""
    if len(servers) < 2:
        return None
    base_name, base_runs = servers[0]
    base = {(r.name, b.label): b for r in base_runs for b in r.benches}
    head = ["server", "run", "benchmark"]
    for key, _, _ in ABLATION_KEYS:
        head += [key, "vs " + base_name]
    rows, deltas = [], []
    for server, runs in servers[1:]:
        for run in runs:
            for b in run.benches:
                ref = base.get((run.name, b.label))
                if ref is None:
                    continue
                row = [server, run.name, b.label]
                d = {}
                for key, get, nd in ABLATION_KEYS:
                    v, change = get(b), pct(get(b), get(ref))
                    d[key] = change
                    row += [fmt(v, nd), "–" if change is None else f"{change:+.1f}%"]
                rows.append(row)
                deltas.append((f"{server} {run.name}", d))
    return head, rows, deltas


def svg_bars(title, items, w=660):
    """items: [(label, {key: percent})] -> inline SVG of horizontal bars, one group per label,
    one bar per key, around a zero line."""
    keys = [k for k, _, _ in ABLATION_KEYS if any(d.get(k) is not None for _, d in items)]
    vals = [d[k] for _, d in items for k in keys if d.get(k) is not None]
    if not vals:
        return f"<p><em>{html.escape(title)}: no data</em></p>"
    lo, hi = min(0.0, min(vals)), max(0.0, max(vals))
    ticks = nice_ticks(lo, hi)
    lo, hi = ticks[0], ticks[-1]
    left, right, top, bar = 230, 150, 30, 9
    pw = w - left - right
    h = top + len(items) * (len(keys) * bar + 8) + 40
    X = lambda v: left + (v - lo) / (hi - lo) * pw if hi > lo else left  # noqa: E731
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
         f'viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">',
         f'<text x="{left}" y="18" font-size="13" font-weight="bold">{html.escape(title)}</text>']
    for t in ticks:
        o.append(f'<line x1="{X(t):.1f}" y1="{top}" x2="{X(t):.1f}" y2="{h - 30}" '
                 f'stroke="{"#888" if t == 0 else "#eee"}"/>')
        o.append(f'<text x="{X(t):.1f}" y="{h - 16}" text-anchor="middle">{tick_label(t)}%</text>')
    y = top
    for label, d in items:
        o.append(f'<text x="{left - 6}" y="{y + len(keys) * bar / 2 + 4:.1f}" '
                 f'text-anchor="end">{html.escape(label)}</text>')
        for i, k in enumerate(keys):
            v = d.get(k)
            if v is not None:
                x0, x1 = sorted((X(0.0), X(v)))
                o.append(f'<rect x="{x0:.1f}" y="{y:.1f}" width="{max(x1 - x0, 0.5):.1f}" '
                         f'height="{bar - 1}" fill="{PALETTE[i % len(PALETTE)]}"/>')
            y += bar
        y += 8
    for i, k in enumerate(keys):
        ly = top + 8 + 15 * i
        o.append(f'<rect x="{left + pw + 12}" y="{ly - 6}" width="14" height="8" '
                 f'fill="{PALETTE[i % len(PALETTE)]}"/>')
        o.append(f'<text x="{left + pw + 30}" y="{ly + 2}">{html.escape(k)}</text>')
    o.append("</svg>")
    return "\n".join(o)


def time_budget(br):
    """A run's first token and a token after it, each split into the parts the server's /metrics
    name, ms: {"first token": [(part, ms)], "a token": [(part, ms)]}, parts summing to the
    client's mean. Folio's step splits into GPU, planning and IPC; a server without step metrics
    (vLLM) only into inside and outside the server. Negative remainders (noise) count as 0."""
    out = {}
    if br.get("outside") is not None and br.get("queue") is not None:
        server = br["ttft_client"] - br["outside"]
        admit = br.get("admit_ms", 0.0)
        out["first token"] = [("HTTP, SSE, client", br["outside"])]
        if "admit_ms" in br:
            out["first token"].append(("parse, template, tokenize", admit))
        out["first token"] += [("waiting for admission", br["queue"]),
                               ("prefill", server - br["queue"] - admit)]
    itl = br.get("itl_client")
    if itl is not None and br.get("gpu_ms") is not None:
        out["a token"] = [("GPU", br["gpu_ms"]), ("planning", br["plan_ms"]), ("IPC", br["ipc_ms"]),
                          ("outside the step", itl - br["step_ms"])]
    elif itl is not None and br.get("itl_server") is not None:
        out["a token"] = [("in the server", br["itl_server"]),
                          ("outside the server", itl - br["itl_server"])]
    return {k: [(p, max(v, 0.0)) for p, v in parts] for k, parts in out.items()}


def svg_shares(title, items, w=660):
    """items: [(label, [(part, ms)])] -> inline SVG of one bar a label, its parts stacked as
    shares of the whole, the whole's ms written after it (the wholes differ by orders of
    magnitude between runs, so shares are what one bar can show beside another)."""
    items = [(label, parts) for label, parts in items if sum(v for _, v in parts) > 0]
    if not items:
        return f"<p><em>{html.escape(title)}: no data</em></p>"
    keys = list(dict.fromkeys(p for _, parts in items for p, _ in parts))
    left, right, top, bar = 230, 90, 30, 14
    legend = 15 * len(keys) + 10
    pw = w - left - right
    h = top + len(items) * (bar + 6) + 24 + legend
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
         f'viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">',
         f'<text x="{left}" y="18" font-size="13" font-weight="bold">{html.escape(title)}</text>']
    y = top
    for label, parts in items:
        total = sum(v for _, v in parts)
        o.append(f'<text x="{left - 6}" y="{y + bar - 3}" text-anchor="end">'
                 f'{html.escape(label)}</text>')
        x = left
        for part, v in parts:
            width = v / total * pw
            o.append(f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="{bar - 1}" '
                     f'fill="{PALETTE[keys.index(part) % len(PALETTE)]}">'
                     f'<title>{html.escape(part)}: {v:.3g} ms</title></rect>')
            x += width
        o.append(f'<text x="{left + pw + 6}" y="{y + bar - 3}">{total:.3g} ms</text>')
        y += bar + 6
    y += 14
    for i, k in enumerate(keys):
        o.append(f'<rect x="{left}" y="{y + 15 * i - 8}" width="14" height="9" '
                 f'fill="{PALETTE[i % len(PALETTE)]}"/>')
        o.append(f'<text x="{left + 20}" y="{y + 15 * i}">{html.escape(k)}</text>')
    o.append("</svg>")
    return "\n".join(o)


def budget_charts(table):
    """The time-budget bars of every run with the figures for them: the first token, a token."""
    budgets = [(f"{server} {name}", time_budget(br)) for server, name, br in table]
    return [svg_shares(f"Where {title}'s time goes (share of the client's mean)",
                       [(label, b[key]) for label, b in budgets if key in b])
            for key, title in (("first token", "the first token"), ("a token", "a token"))
            if any(key in b for _, b in budgets)]


def analysis(servers, table):
    """Observations computed from the numbers: where the time goes, saturation, differences."""
    out = []
    for server, name, br in table:
        parts = []
        if "ttft_server" in br:
            if "outside" in br:
                s = (f"TTFT {br['ttft_client']:.1f} ms at GuideLLM = {br['ttft_server']:.1f} ms "
                     f"from the server's submit to its first token + {br['outside']:.1f} ms "
                     f"outside it (HTTP, SSE and the client; for a server whose clock starts "
                     f"after tokenizing, as vLLM's engine's does, the chat template and "
                     f"tokenization too)")
            else:
                s = (f"server TTFT {br['ttft_server']:.1f} ms over all the requests it saw "
                     f"(requests were cut off, so not set against the client's "
                     f"{fmt(br.get('ttft_client'))} ms)")
            if "admit_ms" in br:
                s += (f"; of it, {br['admit_ms']:.2f} ms admitting the request (parse, chat "
                      f"template, tokenization)")
            if "queue" in br:
                s += f"; {br['queue']:.1f} ms waiting for admission"
                if "prefill_est" in br:
                    s += f" and {br['prefill_est']:.1f} ms of prefill (sharing steps with decodes)"
                elif "prefill" in br:
                    s += f" and {br['prefill']:.1f} ms of prefill"
            parts.append(s)
        if "step_ms" in br and "itl_client" in br:
            outside = br["itl_client"] - br["step_ms"]
            s = (f"decode: ITL {br['itl_client']:.2f} ms against an engine step of "
                 f"{br['step_ms']:.2f} ms (GPU {br['gpu_ms']:.2f}, planning {br['plan_ms']:.3f}, "
                 f"IPC {br['ipc_ms']:.3f})")
            if outside > 0.05 * br["itl_client"]:
                s += (f": {outside:.2f} ms a token lie outside the step (steps that carry "
                      f"prefill chunks, frontend detokenization and SSE, HTTP)")
            else:
                s += ": the token interval is the engine step"
            if br["step_ms"] > 0:
                s += (f"; the GPU is {100 * br['gpu_ms'] / br['step_ms']:.0f}% of each step and "
                      f"busy {100 * br.get('gpu_busy', 0):.0f}% of the run's wall time, "
                      f"{br.get('tok_per_step', 0):.0f} tokens a step")
            parts.append(s)
        elif "itl_client" in br and "itl_server" in br:
            parts.append(f"ITL {br['itl_client']:.2f} ms at the client, {br['itl_server']:.2f} ms "
                         f"in the server")
        if br.get("prefix_hit"):
            parts.append(f"prefix cache hit {100 * br['prefix_hit']:.0f}% of prompt blocks "
                         f"(the same prompts recur across runs)")
        if br.get("preempt"):
            parts.append(f"{br['preempt']:.0f} preemptions")
        if br.get("rejected"):
            parts.append(f"{br['rejected']:.0f} requests rejected by admission control")
        if parts:
            out.append(f"- **{server} {name}**: " + "; ".join(parts) + ".")
    for server, runs in servers:
        for run in runs:
            for b in run.benches:
                if (b.kind == "throughput" and b.max_concurrency and b.concurrency is not None
                        and b.concurrency < 0.5 * b.max_concurrency):
                    out.append(f"- **{server} {run.name} {b.label}**: GuideLLM kept "
                               f"{b.concurrency:.0f} requests in flight on average of the "
                               f"{b.max_concurrency} it was allowed: the client, not the server, "
                               f"set the pace.")
                if b.target_rate and b.req_s is not None and b.kind in ("constant", "poisson"):
                    if b.req_s < 0.8 * b.target_rate:
                        out.append(f"- **{server} {run.name} {b.label}**: saturated: "
                                   f"{b.req_s:.2f} of {b.target_rate:g} req/s completed, "
                                   f"{b.incomplete} cut off at the end, TTFT p99 "
                                   f"{fmt(b.ttft['p99'])} ms (queueing).")
        for run in runs:
            bound = client_bound(run)
            if bound:
                out.append(f"- **{server} {run.name}**: the client bounds this run: GuideLLM's "
                           f"busiest process used {bound[0]:.2f} of a core during the "
                           f"benchmark, the server's processes {bound[1]:.2f} cores in all.")
        peak = max((b for r in runs for b in r.benches if b.out_tok_s), default=None,
                   key=lambda b: b.out_tok_s)
        if peak:
            out.append(f"- **{server}** peak output {peak.out_tok_s:,.0f} tok/s "
                       f"({peak.label}, {fmt(peak.req_s, 2)} req/s).")
    sbs = {}
    for server, runs in servers:
        for run in runs:
            for b in run.benches:
                sbs.setdefault((run.name, b.label), {})[server] = b
    names = [s for s, _ in servers]
    if len(names) >= 2:
        ref = names[0]
        for (run, label), by in sbs.items():
            if ref not in by:
                continue
            for other in names[1:]:
                if other not in by:
                    continue
                a, o = by[ref], by[other]
                bits = []
                for what, x, y in (("output tok/s", a.out_tok_s, o.out_tok_s),
                                   ("TTFT p50", a.ttft["p50"], o.ttft["p50"]),
                                   ("ITL p50", a.itl["p50"], o.itl["p50"]),
                                   ("e2e p99", a.e2e["p99"], o.e2e["p99"])):
                    if x and y:
                        bits.append(f"{what} ×{x / y:.2f}")
                if bits:
                    out.append(f"- **{ref} / {other}, {run} {label}**: " + ", ".join(bits) + ".")
    return out


def meta_lines(meta):
    if not meta:
        return []
    shape = meta.get("model_shape") or {}
    shape_s = ", ".join(f"{k} {v}" for k, v in shape.items())
    return [f"- date: {meta.get('date', '?')}; commit: {meta.get('commit', '?')}",
            f"- GPU: {meta.get('gpu', '?')}",
            f"- model: {meta.get('model', '?')} ({shape_s})",
            f"- GuideLLM {meta.get('guidellm', '?')}, transformers {meta.get('transformers', '?')}"
            + (f", {meta['guidellm_worker_processes']} worker processes"
               if meta.get("guidellm_worker_processes") else "")
            + ("; QUICK smoke-test constraints" if meta.get("quick") else ""),
            "- servers: " + "; ".join(f"`{s}`" for s in meta.get("servers", []))]


def markdown(servers, meta):
    lines = ["# GuideLLM results", ""]
    lines += meta_lines(meta)
    lines += ["", "Times in ms unless marked; TTFT/ITL/e2e over completed requests after warm-up; "
              "output tok/s over all requests (GuideLLM's server throughput).", ""]
    lines += [md_table(MAIN_HEAD, main_rows(servers)), ""]
    sbs = side_by_side(servers)
    if sbs and sbs[1]:
        lines += ["## Side by side", "", md_table(*sbs), ""]
    abl = ablation_rows(servers)
    if abl and abl[1]:
        lines += [f"## Against {servers[0][0]} (each server's change, run by run)", "",
                  md_table(abl[0], abl[1]), ""]
    head, rows, table = breakdown_rows(servers)
    if rows:
        lines += ["## Where the time goes (server /metrics over each run)", "",
                  md_table(head, rows), ""]
    head, rows = timeline_rows(servers)
    if rows:
        lines += ["## Step timeline (Folio: the scheduler loop's phases, ms a step)", "",
                  "`loop a step` is the wall time between steps while the scheduler had work (its "
                  "busy phases); `GPU a step` the worker's backend time, which runs while the loop "
                  "waits (`wait_gpu`) or works on the step before; `idle (s)` the seconds with "
                  "nothing to run, GuideLLM's start-up and wind-down included. "
                  "`held_by_events`: work to plan, held while a frontend's token events were over "
                  "their bound (the frontends or the client not keeping up).", "",
                  md_table(head, rows), ""]
    head, rows = cpu_rows(servers)
    if rows:
        lines += ["## CPU by process (bench/proc_cpu.py over each run)", "", md_table(head, rows),
                  ""]
    obs = analysis(servers, table)
    if obs:
        lines += ["## Analysis", ""] + obs + [""]
    return "\n".join(lines)


# ---------------------------------------------------------------- SVG charts

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#7f7f7f", "#bcbd22"]
DASHES = ["", "6,4", "2,3", "8,3,2,3"]


def nice_ticks(lo, hi, n=5):
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(s * mag for s in (1, 2, 2.5, 5, 10) if s * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = [round(start, 12)]
    while ticks[-1] < hi - step * 1e-9:
        ticks.append(round(ticks[-1] + step, 12))
    return ticks


def log_ticks(lo, hi):
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    ticks = [10.0 ** e for e in range(a, b + 1)]
    if b - a <= 2:
        ticks = sorted(set(ticks + [m * 10.0 ** e for e in range(a, b + 1) for m in (2, 5)]))
    return [t for t in ticks if 10.0 ** a <= t <= 10.0 ** b]


def tick_label(v):
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v / 1000:g}k"
    return f"{v:g}"


def svg_chart(title, series, xlabel, ylabel, xlog=False, ylog=False, w=660, h=380):
    """series: [{'name', 'points': [(x, y)], 'color', 'dash', 'markers'}] -> inline SVG."""
    pts = [(x, y) for s in series for x, y in s["points"]
           if x is not None and y is not None and (not xlog or x > 0) and (not ylog or y > 0)]
    if not pts:
        return f"<p><em>{html.escape(title)}: no data</em></p>"
    # The legend sits right of the plot, as wide as its longest name.
    longest = max((len(s["name"]) for s in series), default=0)
    left, right, top, bottom = 64, 48 + int(6.2 * longest), 30, 48
    w += max(0, right - 190)
    pw, ph = w - left - right, h - top - bottom
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]

    def axis(vals, log, zero):
        lo, hi = min(vals), max(vals)
        if log:
            if lo == hi:
                lo, hi = lo / 2, hi * 2
            ticks = log_ticks(lo, hi)
            lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])
            return ticks, (lambda v: (math.log10(v) - math.log10(lo))
                           / (math.log10(hi) - math.log10(lo)))
        if zero:
            lo = min(0.0, lo)
        ticks = nice_ticks(lo, hi)
        lo, hi = ticks[0], ticks[-1]
        return ticks, (lambda v: (v - lo) / (hi - lo) if hi > lo else 0.5)

    xt, fx = axis(xs, xlog, zero=True)
    yt, fy = axis(ys, ylog, zero=True)
    X = lambda v: left + fx(v) * pw  # noqa: E731
    Y = lambda v: top + ph - fy(v) * ph  # noqa: E731
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
         f'viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">',
         f'<text x="{left}" y="18" font-size="13" font-weight="bold">{html.escape(title)}</text>',
         f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>']
    for t in xt:
        x = X(t)
        o.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#eee"/>')
        o.append(f'<text x="{x:.1f}" y="{top + ph + 14}" text-anchor="middle">'
                 f'{tick_label(t)}</text>')
    for t in yt:
        y = Y(t)
        o.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#eee"/>')
        o.append(f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{tick_label(t)}</text>')
    o.append(f'<text x="{left + pw / 2}" y="{h - 10}" text-anchor="middle">'
             f'{html.escape(xlabel)}</text>')
    o.append(f'<text transform="translate(14,{top + ph / 2}) rotate(-90)" '
             f'text-anchor="middle">{html.escape(ylabel)}</text>')
    for i, s in enumerate(series):
        p = [(x, y) for x, y in s["points"] if x is not None and y is not None
             and (not xlog or x > 0) and (not ylog or y > 0)]
        if not p:
            continue
        dash = f' stroke-dasharray="{s["dash"]}"' if s.get("dash") else ""
        path = " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in p)
        o.append(f'<polyline points="{path}" fill="none" stroke="{s["color"]}" '
                 f'stroke-width="1.6"{dash}/>')
        if s.get("markers"):
            o += [f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3" fill="{s["color"]}"/>'
                  for x, y in p]
        ly = top + 8 + 15 * i
        o.append(f'<line x1="{left + pw + 10}" y1="{ly}" x2="{left + pw + 34}" y2="{ly}" '
                 f'stroke="{s["color"]}" stroke-width="2"{dash}/>')
        o.append(f'<text x="{left + pw + 38}" y="{ly + 4}">{html.escape(s["name"])}</text>')
    o.append("</svg>")
    return "\n".join(o)


def cdf_points(values, n=200):
    xs = sorted(v for v in values if v is not None and v > 0)
    if not xs:
        return []
    idx = sorted(set(int(round(i * (len(xs) - 1) / max(1, n - 1))) for i in range(n)))
    return [(xs[i], (i + 1) / len(xs)) for i in idx]


def charts(servers):
    out = []
    multi = len(servers) > 1
    # Distributions: one CDF a (server, run, benchmark); colour by run, dash by server.
    keys = []
    for _, runs in servers:
        for run in runs:
            for b in run.benches:
                if (run.name, b.label) not in keys:
                    keys.append((run.name, b.label))
    colour = {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(keys)}
    for field, title, label in (("time_to_first_token_ms", "TTFT distribution (CDF)", "TTFT (ms)"),
                                ("inter_token_latency_ms",
                                 "ITL distribution (CDF of each request's mean ITL)", "ITL (ms)")):
        series = []
        for si, (server, runs) in enumerate(servers):
            for run in runs:
                for b in run.benches:
                    name = f"{run.name.replace('sharegpt-', '')} {b.label}"
                    series.append({"name": (f"{server}: " if multi else "") + name,
                                   "points": cdf_points([q.get(field) for q in b.measured()]),
                                   "color": colour[(run.name, b.label)],
                                   "dash": DASHES[si % len(DASHES)]})
        out.append(svg_chart(title, series, label + ", log scale", "fraction of requests",
                             xlog=True, h=max(380, 60 + 15 * len(series))))
    # Against the request rate, offered where the profile sets one (so a saturated server's
    # points do not fold back), else achieved (throughput, synchronous); one point a benchmark.
    def rate_of(b):
        return b.target_rate if b.target_rate else b.req_s

    for title, ylabel, ylog, getters in (
            ("Output throughput vs request rate", "output tok/s", False,
             [("", lambda b: b.out_tok_s)]),
            ("TTFT vs request rate", "TTFT (ms), log scale", True,
             [("p50", lambda b: b.ttft["p50"]), ("p99", lambda b: b.ttft["p99"])]),
            ("ITL vs request rate", "ITL (ms)", False,
             [("p50", lambda b: b.itl["p50"]), ("p99", lambda b: b.itl["p99"])]),
            ("End-to-end latency vs request rate", "e2e (s), log scale", True,
             [("p50", lambda b: b.e2e["p50"]), ("p99", lambda b: b.e2e["p99"])])):
        series = []
        for si, (server, runs) in enumerate(servers):
            bs = sorted((b for r in runs for b in r.benches if rate_of(b)), key=rate_of)
            for gi, (suffix, get) in enumerate(getters):
                series.append({"name": f"{server} {suffix}".strip(),
                               "points": [(rate_of(b), get(b)) for b in bs],
                               "color": PALETTE[si % len(PALETTE)],
                               "dash": DASHES[gi % len(DASHES)], "markers": True})
        out.append(svg_chart(title, series, "requests/s (offered; achieved for throughput and "
                             "synchronous), log scale", ylabel, xlog=True, ylog=ylog))
    return out


def md_to_html_table(head, rows):
    o = ["<table><thead><tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in head)
         + "</tr></thead><tbody>"]
    for r in rows:
        o.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>")
    o.append("</tbody></table>")
    return "\n".join(o)


def inline_md(s):
    s = html.escape(s)
    s = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", s)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", s)


def html_page(servers, meta):
    css = ("body{font-family:sans-serif;max-width:1250px;margin:20px auto;color:#222}"
           "table{border-collapse:collapse;font-size:12px;margin:8px 0 18px}"
           "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}"
           "th{background:#f3f3f3}td:nth-child(-n+3){text-align:left}"
           ".charts{display:flex;flex-wrap:wrap;gap:10px}")
    o = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>GuideLLM results</title>"
         f"<style>{css}</style></head><body>", "<h1>GuideLLM results</h1>"]
    ml = meta_lines(meta)
    if ml:
        o.append("<ul>" + "".join(f"<li>{inline_md(x[2:])}</li>" for x in ml) + "</ul>")
    o.append("<p>Times in ms unless marked; TTFT/ITL/e2e over completed requests after warm-up; "
             "output tok/s over all requests (GuideLLM's server throughput).</p>")
    o.append(md_to_html_table(MAIN_HEAD, main_rows(servers)))
    sbs = side_by_side(servers)
    if sbs and sbs[1]:
        o += ["<h2>Side by side</h2>", md_to_html_table(*sbs)]
    abl = ablation_rows(servers)
    if abl and abl[1]:
        o += [f"<h2>Against {html.escape(servers[0][0])}</h2>", md_to_html_table(abl[0], abl[1])]
    o.append("<h2>Charts</h2><div class='charts'>")
    if abl and abl[2]:
        o.append(svg_bars(f"Change against {servers[0][0]}", abl[2]))
    head, rows, table = breakdown_rows(servers)
    o += budget_charts(table)
    o += charts(servers)
    o.append("</div>")
    if rows:
        o += ["<h2>Where the time goes (server /metrics over each run)</h2>",
              md_to_html_table(head, rows)]
    for title, (head, rows) in (("Step timeline (Folio: the scheduler loop's phases, ms a step)",
                                 timeline_rows(servers)),
                                ("CPU by process", cpu_rows(servers))):
        if rows:
            o += [f"<h2>{title}</h2>", md_to_html_table(head, rows)]
    obs = analysis(servers, table)
    if obs:
        o += ["<h2>Analysis</h2><ul>"] + [f"<li>{inline_md(x[2:])}</li>" for x in obs] + ["</ul>"]
    o.append("</body></html>")
    return "\n".join(o)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="result folders or GuideLLM json files")
    ap.add_argument("--md", help="write the markdown summary here")
    ap.add_argument("--html", help="write the HTML page here")
    ap.add_argument("--meta", help="meta.json of the run (date, commit, GPU, versions)")
    ap.add_argument("--data", help="the workload jsonl (for --check)")
    ap.add_argument("--check", action="store_true", help="verify fixed output lengths")
    a = ap.parse_args()
    servers = load_inputs(a.inputs)
    if not any(runs for _, runs in servers):
        raise SystemExit("report: no GuideLLM results in " + " ".join(a.inputs))
    if a.check:
        sys.exit(0 if run_checks(servers, a.data) else 1)
    meta = None
    if a.meta:
        try:
            meta = json.loads(Path(a.meta).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise SystemExit(f"report: cannot read {a.meta}: {e}")
    md = markdown(servers, meta)
    if a.md:
        Path(a.md).write_text(md)
    if a.html:
        Path(a.html).write_text(html_page(servers, meta))
    print(md)


if __name__ == "__main__":
    main()
