#!/usr/bin/env python3
"""CPU time by process during a benchmark run, so that a saturated run shows which process ran out
of a core: the server's (each frontend, the scheduler, the worker; vLLM's API servers and engine
core) or the client's (GuideLLM's processes).

    proc_cpu.py OUT.json [--interval S]     samples until SIGINT or SIGTERM, then writes OUT.json
    proc_cpu.py --table OUT.json            prints a written file as a table

Every process is sampled (/proc/PID/stat utime + stime) every --interval seconds (0.5); a process
that starts or ends inside the window counts for the samples that saw it. Processes are grouped by
what they are: the comm name for native programs (folio-frontend, folio-scheduler, folio-worker,
VLLM::EngineCore...), the module or script for Python (`python -m guidellm` and the processes it
forks or spawns are "guidellm"; `vllm serve` is "vllm"). Per group: processes seen, CPU seconds,
cores (CPU seconds over the window) and the busiest single process's peak over one sampling
interval, which reads as "one core was full" near 1.0. Each process that used a fifth of a second or
more also keeps its samples (`series`: [unix time, cores] a sampling interval), so that a report can
take its cores within a benchmark's own window (GuideLLM's start-up and wind-down left out): near
1.0 there, one process, such as GuideLLM's main process, was the limit."""
import json
import os
import signal
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def read_procs():
    """{pid: (ppid, comm, cmdline, cpu_seconds)} for every process readable now."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        rest = stat[stat.rindex(")") + 2:].split()
        cpu = (int(rest[11]) + int(rest[12])) / TICK  # utime, stime
        out[int(name)] = (int(rest[1]), comm, [c.decode(errors="replace") for c in cmd if c], cpu)
    return out


def own_group(comm, cmd):
    """The group a process names by itself, or None when it is a Python process that does not say
    (a multiprocessing child: it belongs to its parent's group)."""
    base = os.path.basename(cmd[0]) if cmd else comm
    if not base.startswith("python"):
        return comm
    args = cmd[1:]
    for i, a in enumerate(args):
        if a == "-m" and i + 1 < len(args):
            return args[i + 1].split(".")[0]
        if a == "-c":
            return None  # multiprocessing's spawn and resource tracker
        if not a.startswith("-"):
            return os.path.basename(a).removesuffix(".py")
    return None


def group_of(pid, procs, cache):
    if pid in cache:
        return cache[pid]
    seen, p, g = [], pid, None
    while p in procs and p not in cache:
        seen.append(p)
        ppid, comm, cmd, _ = procs[p]
        g = own_group(comm, cmd)
        if g is not None:
            break
        p = ppid
    else:
        g = cache.get(p, "python")
    for q in seen:
        cache[q] = g
    return g


def sample(out_path, interval):
    stop = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.append(1))
    me = os.getpid()
    first, last, peaks, groups, series = {}, {}, {}, {}, {}
    prev, prev_t = {}, None
    t0 = time.time()
    while True:
        now = time.time()
        procs = read_procs()
        cache = {}
        for pid, (_, _, _, cpu) in procs.items():
            if pid == me:
                continue
            g = group_of(pid, procs, cache)
            key = (pid, procs[pid][1])
            groups[key] = g
            first.setdefault(key, cpu)
            last[key] = cpu
            if prev_t is not None and key in prev and now - prev_t >= 0.2:
                rate = (cpu - prev[key]) / (now - prev_t)
                peaks[g] = max(peaks.get(g, 0.0), rate)
                series.setdefault(key, []).append([round(now, 2), round(rate, 3)])
        prev = {k: v for k, v in last.items() if (k[0] in procs)}
        prev_t = now
        if stop:
            break
        time.sleep(interval)
    wall = time.time() - t0
    table = {}
    for key, g in groups.items():
        used = last[key] - first[key]
        if used <= 0 and g not in table:
            continue
        e = table.setdefault(g, {"processes": 0, "cpu_s": 0.0, "series": {}})
        e["processes"] += 1
        e["cpu_s"] += max(used, 0.0)
        if used >= 0.2 and key in series:
            e["series"][str(key[0])] = series[key]
    for g, e in table.items():
        e["cores"] = e["cpu_s"] / wall if wall > 0 else 0.0
        e["peak_process_cores"] = peaks.get(g, 0.0)
    doc = {"wall_s": wall, "interval_s": interval, "cores_online": os.cpu_count(),
           "groups": dict(sorted(table.items(), key=lambda kv: -kv[1]["cpu_s"]))}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)


def table(path, top=12):
    doc = json.load(open(path))
    lines = [f"CPU by process over {doc['wall_s']:.1f} s ({doc['cores_online']} cores)",
             f"{'group':<24} {'procs':>5} {'cpu s':>8} {'cores':>6} {'busiest 1 proc':>14} "
             f"{'peak 1 proc':>11}"]
    for g, e in list(doc["groups"].items())[:top]:
        lines.append(f"{g[:24]:<24} {e['processes']:>5} {e['cpu_s']:>8.1f} {e['cores']:>6.2f} "
                     f"{e.get('busiest_process_cores', 0.0):>14.2f} "
                     f"{e['peak_process_cores']:>11.2f}")
    return "\n".join(lines)


def main():
    args = sys.argv[1:]
    if args[:1] == ["--table"] and len(args) == 2:
        print(table(args[1]))
        return 0
    if not args or args[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    interval = float(args[args.index("--interval") + 1]) if "--interval" in args else 0.5
    sample(args[0], interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
