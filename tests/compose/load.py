#!/usr/bin/env python3
"""Streams completions through the load balancer from several threads until a stop file appears,
and writes one JSON line per request with its terminal outcome.

    python3 tests/compose/load.py URL MODEL OUT.jsonl STOPFILE [--threads 4] [--max-tokens 48]

Each line: {"start", "end", "outcome": "ok" | "error", "status", "frontend": the frontend id
taken from the response id (Folio's request ids carry it in their top 16 bits) or null, "detail"}.
"ok" means a streamed completion that ended with a finish_reason and [DONE]; anything else (an
HTTP error, an error event in the stream, a cut connection, a timeout) is an error, so that
tests/compose/test_compose.sh can check that every request ended one way or the other and which
frontend the failed ones were on.
"""

import argparse
import http.client
import json
import os
import threading
import time
import urllib.parse


def frontend_of(resp_id):
    # "cmpl-<16 hex salt><16 hex request id>"; the request id's top 16 bits are the frontend id.
    try:
        return int(resp_id[-16:-12], 16)
    except (TypeError, ValueError):
        return None


def one_request(url, model, max_tokens, timeout):
    u = urllib.parse.urlsplit(url)
    rec = {"start": time.time(), "outcome": "error", "status": None, "frontend": None, "detail": ""}
    body = json.dumps({"model": model, "prompt": "Hello, my name is", "max_tokens": max_tokens,
                       "ignore_eos": True, "stream": True})
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    try:
        conn.request("POST", "/v1/completions", body, {"content-type": "application/json"})
        r = conn.getresponse()
        rec["status"] = r.status
        if r.status != 200:
            rec["detail"] = r.read(300).decode("utf-8", "replace")
            return rec
        finished = done = False
        for raw in r:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                done = True
                break
            ev = json.loads(data)
            if "error" in ev:
                rec["detail"] = ev["error"].get("message", "")
                continue
            if rec["frontend"] is None:
                rec["frontend"] = frontend_of(ev.get("id"))
            if any(c.get("finish_reason") for c in ev.get("choices", [])):
                finished = True
        if finished and done and not rec["detail"]:
            rec["outcome"] = "ok"
        elif not rec["detail"]:
            rec["detail"] = "stream ended without finish_reason/[DONE]"
    except (OSError, http.client.HTTPException, ValueError) as e:
        rec["detail"] = f"{type(e).__name__}: {e}"
    finally:
        conn.close()
        rec["end"] = time.time()
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("stopfile")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()
    lock = threading.Lock()
    out = open(a.out, "a", buffering=1)

    def loop():
        while not os.path.exists(a.stopfile):
            rec = one_request(a.url, a.model, a.max_tokens, a.timeout)
            with lock:
                out.write(json.dumps(rec) + "\n")

    threads = [threading.Thread(target=loop) for _ in range(a.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out.close()


if __name__ == "__main__":
    main()
