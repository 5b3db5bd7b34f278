"""`folio serve --tls-cert --tls-key`: HTTPS with ALPN, HTTP/2 (nghttp2's client) and HTTP/1.1
(httpx) on one port, with a self-signed certificate made for the test."""

import os
import re
import signal
import socket
import subprocess
import time

import httpx
import pytest

from conftest import bin_path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tls_server(tiny_model, tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    port = free_port()
    log = open(d / "serve.log", "w+")
    proc = subprocess.Popen(
        [str(bin_path("folio")), "serve", "--model", str(tiny_model), "--port", str(port),
         "--backend", "cpu", "--tls-cert", str(cert), "--tls-key", str(key)],
        stdout=log, stderr=subprocess.STDOUT)
    base = f"https://127.0.0.1:{port}"
    deadline = time.time() + 90
    while True:
        assert proc.poll() is None, "folio serve exited"
        try:
            if httpx.get(base + "/health", verify=False, timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.time() < deadline, "no healthy HTTPS server within 90 s"
        time.sleep(0.2)
    yield base
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


def test_http2_over_tls_with_alpn(tls_server):
    out = subprocess.run(["nghttp", "-nv", tls_server + "/v1/models"], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"negotiated protocol: h2", out.stdout, re.I), out.stdout
    assert re.search(r":status: 200", out.stdout), out.stdout


def test_http1_over_tls(tls_server):
    with httpx.Client(verify=False, http2=False) as c:
        r = c.post(tls_server + "/v1/completions", timeout=60,
                   json={"model": c.get(tls_server + "/v1/models").json()["data"][0]["id"],
                         "prompt": "Hello", "max_tokens": 4})
    assert r.status_code == 200 and r.http_version == "HTTP/1.1"
    assert r.json()["usage"]["completion_tokens"] == 4
