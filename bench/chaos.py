#!/usr/bin/env python3
"""Chaos under load: `folio serve` with 3 frontends takes a load (GuideLLM's sharegpt-poisson at
32 req/s on the H200, through bench/gpu/chaos.sh; or this script's own Poisson load of streamed
chat requests on the CPU) while the worker is killed (SIGKILL) 3 times, the scheduler once and
one of the frontends once, at random moments. A probe sends a one-token request every 0.1 s.

Reported (a short table last) and checked:
  - cold start: launch to /health 200;
  - requests completed / errored / hung (no answer within the client's timeout): 0 hung;
  - per kill, the time to the probe's next successful request, and for a worker or scheduler
    kill the time until the scheduler logged the new worker ready (weights reloaded);
  - KV blocks in use return to 0 once the load has stopped; the server stops cleanly.
Traffic goes to 127.0.0.1 only. Exit status 0 when every check holds.

    python3 bench/chaos.py --cpu [--build build-cpu]           # here, demo model
    python3 bench/chaos.py --server-cmd 'folio serve ...' --port P --guidellm-scenario S.json
"""
import argparse
import asyncio
import json
import os
import random
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import loadgen as lg  # noqa: E402

KILLS = ["worker"] * 3 + ["scheduler", "frontend"]


def post(port, body, timeout):
    """One blocking POST /v1/completions: (status or None, seconds)."""
    t0 = time.time()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(lg.request_bytes(body, keep_alive=False))
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        return int(data.split(b" ", 2)[1]), time.time() - t0
    except (OSError, IndexError, ValueError):
        return None, time.time() - t0


def probe(port, stop, results):
    body = lg.completion_body(prompt="ping", max_tokens=1)
    while not stop.is_set():
        t = time.time()
        st, _ = post(port, body, timeout=10)
        results.append((t, time.time(), st))
        stop.wait(max(0.0, 0.1 - (time.time() - t)))


def kill_schedule(duration, rng, gap=6.0):
    """Kill times (s after the load starts) in [5, duration - 8], at least gap apart (less
    when the duration is too short for that): uniform points in the room left, spread."""
    room = max(1.0, duration - 13)
    gap = min(gap, room / len(KILLS))
    free = room - gap * (len(KILLS) - 1)
    ts = [5 + x + i * gap for i, x in enumerate(sorted(rng.uniform(0, free) for _ in KILLS))]
    kinds = KILLS[:]
    rng.shuffle(kinds)
    return list(zip(ts, kinds))


def killer(server_pid, t_load, schedule, rng, log):
    for at, kind in schedule:
        time.sleep(max(0.0, t_load + at - time.time()))
        tree = lg.process_tree(server_pid)
        pick = {"worker": "folio-worker", "scheduler": "folio-scheduler",
                "frontend": "folio-frontend"}[kind]
        pids = sorted(p for p, n in tree.items() if n == pick)
        if not pids:
            log.append((time.time(), kind, None))
            continue
        pid = rng.choice(pids)
        os.kill(pid, signal.SIGKILL)
        log.append((time.time(), kind, pid))


async def sse_chat(port, prompt, max_tokens, timeout):
    """'completed', 'errored' or 'hung' for one streamed chat request."""
    body = json.dumps({"messages": [{"role": "user", "content": prompt}],
                       "max_tokens": max_tokens, "ignore_eos": True, "stream": True}).encode()
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(lg.request_bytes(body, "/v1/chat/completions", keep_alive=False))
                status, _, data = await lg.read_response(reader)
            finally:
                writer.close()
    except TimeoutError:
        return "hung"
    except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
        return "errored"
    if status != 200:
        return "errored"
    events = [line[6:] for line in data.decode(errors="replace").split("\n")
              if line.startswith("data: ")]
    if not events or events[-1] != "[DONE]" or any('"error"' in e for e in events):
        return "errored"
    return "completed"


async def poisson_load(port, rate, duration, rng, timeout):
    prompts = ["Tell me about the sea.", "Write a haiku about rain.", "What is 2+2?",
               "Summarize the history of Rome in one paragraph."]
    tasks, t0, t = [], time.monotonic(), 0.0
    while True:
        t += rng.expovariate(rate)
        if t > duration:
            break
        await asyncio.sleep(max(0.0, t0 + t - time.monotonic()))
        tasks.append(asyncio.create_task(
            sse_chat(port, rng.choice(prompts), rng.randint(16, 96), timeout)))
    out = await asyncio.gather(*tasks)
    return {k: out.count(k) for k in ("completed", "errored", "hung")}


TIMEOUT_ERROR = r"\s*(httpx\.)?(Read|Write|Connect|Pool)?Time(out|outError|outException)\b"


def guidellm_totals(path):
    doc = json.loads(Path(path).read_text())
    tot = {"completed": 0, "errored": 0, "incomplete": 0, "hung": 0}
    for b in doc.get("benchmarks", []):
        t = (b.get("metrics") or {}).get("request_totals") or {}
        tot["completed"] += t.get("successful", 0)
        tot["errored"] += t.get("errored", 0)
        tot["incomplete"] += t.get("incomplete", 0)
        for r in (b.get("requests") or {}).get("errored") or []:
            # Only the exception's own name says timeout: a traceback in the record mentions
            # "timeout=" for every read, which once made closed connections count as hung.
            if isinstance(r, dict) and re.match(TIMEOUT_ERROR, str(r.get("error") or "")):
                tot["hung"] += 1
    return tot


def worker_ready_times(log_path):
    """Wall-clock times of the scheduler's "worker pid N ready" lines."""
    out = []
    for line in Path(log_path).read_text(errors="replace").splitlines():
        if "worker pid" in line and " ready" in line:
            m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z", line)
            if m:
                out.append(datetime.fromisoformat(m.group(1) + "+00:00").timestamp())
    return out


def wait_idle(port, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = lg.metrics(port)
        if (m.get("folio_num_requests_running") == 0 and m.get("folio_num_requests_waiting") == 0
                and m.get("folio_kv_blocks_used") == 0):
            return True
        time.sleep(0.5)
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu", action="store_true", help="the CPU backend and the demo model")
    ap.add_argument("--build", default=os.environ.get("FOLIO_BUILD", "build-cpu"))
    ap.add_argument("--server-cmd", help="the folio serve command (with --port)")
    ap.add_argument("--port", type=int)
    ap.add_argument("--guidellm-scenario", help="run GuideLLM with this scenario as the load")
    ap.add_argument("--guidellm-python", default=os.environ.get("GUIDELLM_PYTHON", "python3"))
    ap.add_argument("--guidellm-json", help="GuideLLM's json output (from the scenario)")
    ap.add_argument("--rate", type=float, default=32)
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--timeout", type=float, default=60, help="a request unanswered this long hung")
    ap.add_argument("--cold-start-limit", type=float, default=0, help="check: seconds (0: off)")
    ap.add_argument("--reload-limit", type=float, default=0, help="check: seconds (0: off)")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--log", default="/tmp/folio-chaos.log")
    a = ap.parse_args()
    rng = random.Random(a.seed)

    if a.cpu:
        a.port = lg.free_port()
        cmd = [str(lg.folio_bin(a.build)), "serve", "--host", "127.0.0.1", "--port", str(a.port),
               "--frontends", "3", "--backend", "cpu", "--drain-seconds", "5", "--demo"]
    else:
        cmd = shlex.split(a.server_cmd)
    log = open(a.log, "w")
    t_launch = time.time()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    cold = None
    while time.time() - t_launch < 300 and proc.poll() is None:
        if lg.http_get(a.port, "/health", timeout=2)[0] == 200:
            cold = time.time() - t_launch
            break
        time.sleep(0.02)
    if cold is None:
        print(f"chaos: the server did not become healthy (see {a.log})")
        proc.kill()
        return 1
    time.sleep(1)  # every frontend registered
    post(a.port, lg.completion_body(max_tokens=4), timeout=120)

    stop, probes, kills = threading.Event(), [], []
    pt = threading.Thread(target=probe, args=(a.port, stop, probes))
    pt.start()
    schedule = kill_schedule(a.duration, rng)
    t_load = time.time()
    kt = threading.Thread(target=killer, args=(proc.pid, t_load, schedule, rng, kills))
    kt.start()
    if a.guidellm_scenario:
        gl = subprocess.run([a.guidellm_python, "-m", "guidellm", "run", "--scenario",
                             a.guidellm_scenario, "--disable-progress"],
                            capture_output=True, text=True, timeout=a.duration + 240)
        if gl.returncode != 0:
            print(gl.stdout[-2000:], gl.stderr[-2000:])
        totals = guidellm_totals(a.guidellm_json)
    else:
        totals = asyncio.run(poisson_load(a.port, a.rate, a.duration, rng, a.timeout))
    kt.join()
    idle = wait_idle(a.port, 60)
    stop.set()
    pt.join()
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        rc = "killed"
    log.close()

    ready = worker_ready_times(a.log)
    rows, recover_ok, reload_ok = [], True, True
    for t, kind, pid in kills:
        nxt = [done for sent, done, st in probes if sent >= t and st == 200]
        rec = nxt[0] - t if nxt else None
        rel = None
        if kind in ("worker", "scheduler"):
            after = [r for r in ready if r > t]
            rel = after[0] - t if after else None
            reload_ok &= rel is not None and (not a.reload_limit or rel < a.reload_limit)
        recover_ok &= rec is not None and rec < 30
        rows.append([f"{t - t_load:.1f}", kind, pid or "-", f"{rec:.2f}" if rec else "never",
                     f"{rel:.2f}" if rel else "-"])
    print(f"chaos: {' '.join(cmd[:2])} ... with 3 frontends; load "
          f"{'GuideLLM ' + Path(a.guidellm_scenario).name if a.guidellm_scenario else 'poisson'}"
          f" at {a.rate:g}/s for {a.duration:g} s; seed {a.seed}; probe sent {len(probes)}")
    print()
    print(lg.table(rows, ["kill at s", "process", "pid", "next probe 200 after s",
                          "worker ready after s"]))
    print()
    print(lg.table([[k, v] for k, v in totals.items()], ["requests", "count"]))
    checks = {
        f"cold start {cold:.2f} s" + (f" < {a.cold_start_limit:g} s" if a.cold_start_limit else ""):
            not a.cold_start_limit or cold < a.cold_start_limit,
        f"{len(kills)} kills made": len([k for k in kills if k[2]]) == len(KILLS),
        "0 requests hung": totals.get("hung", 0) == 0,
        "service back after every kill (probe 200 within 30 s)": recover_ok,
        "worker ready again after every worker/scheduler kill" +
        (f" within {a.reload_limit:g} s" if a.reload_limit else ""): reload_ok,
        "KV blocks in use back to 0 when idle": idle,
        f"clean stop (exit {rc})": rc == 0,
    }
    print()
    print(lg.table([[c, "ok" if v else "FAIL"] for c, v in checks.items()], ["check", "result"]))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
