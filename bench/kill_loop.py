#!/usr/bin/env python3
"""The scheduler killed in a loop: `folio serve --frontends 2` (CPU backend) has its scheduler
SIGKILLed N times; after each kill every frontend must register with the restarted scheduler
within --timeout seconds (the scheduler's log says "frontend K (pid P) registered"). A frontend
that does not is reported with its sockets (`ss -xp`), and the loop stops there. Run it on a loaded
machine and an ASan build to shake out races in reconnection (it found nng 1.5's dialer stopping
for good: common/nng_dial.c).

    python3 bench/kill_loop.py [--build build-asan] [--kills 60] [--busy 3]

--busy N runs N spinning processes beside it for the whole loop. Prints a short table last; exit
status 0 when every kill was recovered from.
"""
import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REGISTERED = re.compile(r"frontend \d+ \(pid \d+\) registered")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child(pid, name):
    """The pid of pid's child whose command is `name`, or None."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (d / "cmdline").read_bytes().split(b"\0")[0]
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and os.path.basename(cmd).decode() == name:
            return int(d.name)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--model", help="default: the build's demo model")
    ap.add_argument("--kills", type=int, default=60)
    ap.add_argument("--busy", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=15.0)
    a = ap.parse_args()
    build = REPO / a.build
    model = a.model or str(build / "demo-model")
    busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(a.busy)]
    log = tempfile.NamedTemporaryFile("w+", prefix="kill_loop-", suffix=".log", delete=False)
    serve = subprocess.Popen([str(build / "bin" / "folio"), "serve", "--model", model, "--port",
                              str(free_port()), "--frontends", "2", "--backend", "cpu"],
                             stdout=log, stderr=subprocess.STDOUT)

    def text():
        log.flush()
        return Path(log.name).read_text(errors="replace")

    t0 = time.time()
    while len(REGISTERED.findall(text())) < 2 and time.time() - t0 < 60:
        if serve.poll() is not None:
            for p in busy:
                p.kill()
            print(f"folio serve exited with {serve.returncode}:\n{text()[-2000:]}")
            return 2
        time.sleep(0.1)
    recoveries, stuck = [], None
    try:
        for i in range(a.kills):
            pos = len(text())
            sched = child(serve.pid, "folio-scheduler")
            if sched is None:
                time.sleep(0.2)
                continue
            os.kill(sched, signal.SIGKILL)
            t = time.time()
            while len(REGISTERED.findall(text()[pos:])) < 2 and time.time() - t < a.timeout:
                time.sleep(0.05)
            if len(REGISTERED.findall(text()[pos:])) < 2:
                sockets = subprocess.run("ss -xp | grep folio", shell=True, capture_output=True,
                                         text=True).stdout
                stuck = (i + 1, sockets)
                break
            recoveries.append(time.time() - t)
            time.sleep(0.3 + (i % 7) * 0.1)  # kills at varied moments of the new scheduler's life
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=60)
        for p in busy:
            p.kill()
    if stuck:
        print(f"kill {stuck[0]}: a frontend did not register again within {a.timeout:g} s; "
              f"sockets:\n{stuck[1]}\nserver log: {log.name}")
    r = sorted(recoveries)
    print(f"\n| kills | recovered | stuck | both frontends back after, s (median / max) |")
    print("|---|---|---|---|")
    med = f"{r[len(r) // 2]:.2f} / {r[-1]:.2f}" if r else "-"
    print(f"| {len(r) + (1 if stuck else 0)} | {len(r)} | {1 if stuck else 0} | {med} |")
    print(f"\n{'FAIL' if stuck else 'PASS'}: build {a.build}, {a.busy} busy loops beside it")
    return 1 if stuck else 0


if __name__ == "__main__":
    sys.exit(main())
