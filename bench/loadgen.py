"""What bench/overload.py, bench/soak.py and bench/gpu/chaos.sh --cpu share: starting and
stopping `folio serve` on 127.0.0.1, a small HTTP/1.1 client on asyncio streams (cheap enough to
send hundreds of requests a second from one core, which httpx is not), the processes of a
server with their RSS and open files, and /metrics parsing. Traffic goes to 127.0.0.1 only."""

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def folio_bin(build):
    p = Path(build) / "bin" / "folio"
    if not p.exists():
        raise SystemExit(f"{p} is not built (set --build or FOLIO_BUILD)")
    return p


class Server:
    """`folio serve` in its own session, logging to a file; the demo model unless args name
    a --model."""

    def __init__(self, build, args, log_path, env=None):
        self.port = free_port()
        self.log_path = Path(log_path)
        self.log = open(self.log_path, "w")
        cmd = [str(folio_bin(build)), "serve", "--host", "127.0.0.1", "--port", str(self.port),
               *args, *([] if "--model" in args else ["--demo"])]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True, env={**os.environ, **(env or {})})
        self.started = time.time()

    def wait_healthy(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"folio serve exited {self.proc.returncode}: see {self.log_path}")
            if http_get(self.port, "/health")[0] == 200:
                return time.time() - self.started
            time.sleep(0.05)
        raise SystemExit(f"folio serve not healthy within {timeout} s: see {self.log_path}")

    def pids(self):
        """{pid: name} of the launcher and every process below it."""
        return process_tree(self.proc.pid)

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def process_tree(root):
    kids = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(d.name))
        except (OSError, ValueError, IndexError):
            continue
    out, todo = {}, [root]
    while todo:
        p = todo.pop()
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
            name = os.path.basename(cmd[0].decode())
            if name == "folio" and len(cmd) > 1:
                name = "folio-serve"
        except OSError:
            continue
        out[p] = name
        todo += kids.get(p, [])
    return out


def label(pids):
    """Stable column names: folio-frontend-0, -1 by pid order, and so on."""
    by_name = {}
    for p, n in sorted(pids.items()):
        by_name.setdefault(n, []).append(p)
    out = {}
    for n, ps in by_name.items():
        for i, p in enumerate(ps):
            out[p] = n if len(ps) == 1 else f"{n}-{i}"
    return out


def rss_kib(pid):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def shm_count(launcher_pid):
    return len([f for f in os.listdir("/dev/shm") if f.startswith(f"folio-{launcher_pid}-")])


def http_get(port, path, timeout=5):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        return int(head.split()[1]), body
    except (OSError, IndexError, ValueError):
        return None, b""


def metrics(port):
    """{name or name{labels}: value} of one frontend's /metrics."""
    status, body = http_get(port, "/metrics")
    out = {}
    for line in body.decode(errors="replace").splitlines():
        if line and not line.startswith("#"):
            m = re.match(r"^(\S+) (\S+)$", line)
            if m:
                out[m.group(1)] = float(m.group(2))
    return out


def completion_body(prompt="Hello", max_tokens=8, stream=False, **kw):
    return json.dumps({"prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True,
                       "stream": stream, **kw}).encode()


def request_bytes(body, path="/v1/completions", keep_alive=True):
    conn = "keep-alive" if keep_alive else "close"
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Connection: {conn}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


async def read_response(reader):
    """(status, headers dict, body bytes) of one HTTP/1.1 response (length or chunked)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            body += chunk[:-2]
    else:
        body = await reader.read()
    return status, headers, body


async def one_request(port, body, timeout=60):
    """A request on its own connection: (status, headers, body, seconds); status None when the
    connection failed, "timeout" when no answer came within timeout."""
    t0 = time.monotonic()
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            try:
                writer.write(request_bytes(body, keep_alive=False))
                status, headers, data = await read_response(reader)
            finally:
                writer.close()
        return status, headers, data, time.monotonic() - t0
    except TimeoutError:
        return "timeout", {}, b"", time.monotonic() - t0
    except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
        return None, {}, b"", time.monotonic() - t0


def percentile(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def table(rows, headers):
    """A markdown table as a string."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    fmt = lambda r: "| " + " | ".join(c.rjust(w) for c, w in zip(r, widths)) + " |"
    out = [fmt(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    return "\n".join(out + [fmt(r) for r in cells])
