"""folio-scheduler as a process: with the simulated worker (many requests,
kill -9 of the worker mid-stream, admission limits, SIGTERM clean-up) and with
the real CPU worker on the tiny fixture model. sched_client stands in for a
frontend: it registers, creates its event ring, submits and prints every
request's outcome as JSON."""
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import bin_path


class Scheduler:
    def __init__(self, tmp_path, name, *args):
        self.run_dir = tmp_path / "run"
        self.run_dir.mkdir(exist_ok=True)
        self.instance = f"schedtest-{os.getpid()}-{name}"
        self.log = open(tmp_path / f"{name}.log", "w+")
        self.proc = subprocess.Popen(
            [str(bin_path("folio-scheduler")), "--run-dir", str(self.run_dir),
             "--instance", self.instance, *args],
            stdout=self.log, stderr=subprocess.STDOUT)

    def client(self, *args, timeout=120, fid=1):
        out = subprocess.run(
            [str(bin_path("sched_client")), "--run-dir", str(self.run_dir), "--instance",
             self.instance, "--id", str(fid), "--wait-ready", *args],
            capture_output=True, text=True, timeout=timeout)
        lines = [json.loads(l) for l in out.stdout.splitlines() if l.strip()]
        reqs = [l for l in lines if "id" in l]
        summary = [l["summary"] for l in lines if "summary" in l]
        return out.returncode, reqs, summary[0] if summary else None, out.stderr

    def status(self):
        out = subprocess.run(
            [str(bin_path("sched_client")), "--run-dir", str(self.run_dir), "--instance",
             self.instance, "--status"], capture_output=True, text=True, timeout=30)
        return json.loads(out.stdout)

    def worker_pid(self):
        with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
            kids = f.read().split()
        return int(kids[0]) if kids else None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.seek(0)
        return self.proc.returncode, self.log.read()

    def leftovers(self):
        shm = [n for n in os.listdir("/dev/shm") if n.startswith(self.instance)]
        return shm + [p.name for p in self.run_dir.iterdir()]


@pytest.fixture
def sched_factory(tmp_path):
    made = []

    def make(name, *args):
        s = Scheduler(tmp_path, name, *args)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


def test_many_requests_through_the_rings(sched_factory):
    # Steps take their modelled time (about 1 ms), so the queue fills and 64
    # sequences run at once.
    s = sched_factory("many", "--simulate", "--num-kv-blocks", "300", "--max-num-seqs", "64",
                      "--max-waiting-requests", "5000", "--sim-time-scale", "1")
    rc, reqs, summary, err = s.client("--requests", "2000", "--prompt-len", "40",
                                      "--max-tokens", "64", "--temperature", "0.7", "--ignore-eos")
    assert rc == 0, err
    assert summary["finished"] == 2000 and summary["violations"] == 0
    assert all(r["finish"] == "length" and r["completion_tokens"] == 64 for r in reqs)
    st = s.status()
    assert st["kv_blocks_used"] == 0 and st["num_running"] == 0 and st["num_waiting"] == 0
    assert st["requests_finished"] == 2000
    assert st["num_preemptions"] > 0  # 300 blocks cannot hold 64 sequences of 104 tokens
    assert st["steps"] > 0 and st["plan_s"] > 0 and st["backend_s"] >= 0
    rc, log = s.stop()
    assert rc == 0, log
    assert s.leftovers() == []


def test_kill9_worker_mid_stream(sched_factory):
    s = sched_factory("kill9", "--simulate", "--num-kv-blocks", "2000", "--sim-time-scale", "20")
    client = subprocess.Popen(
        [str(bin_path("sched_client")), "--run-dir", str(s.run_dir), "--instance", s.instance,
         "--wait-ready", "--requests", "16", "--max-tokens", "2000", "--ignore-eos"],
        stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while time.time() < deadline and s.status()["generation_tokens"] < 100:
        time.sleep(0.05)
    os.kill(s.worker_pid(), signal.SIGKILL)
    out, _ = client.communicate(timeout=30)
    lines = [json.loads(l) for l in out.splitlines()]
    reqs = [l for l in lines if "id" in l]
    assert len(reqs) == 16
    for r in reqs:
        assert r["finish"] == "error" and r["status"] == 503, r
        assert "killed by signal 9" in r["message"]
        assert r["completion_tokens"] > 0
    # /health goes false, then true once the new worker has loaded.
    st = s.status()
    assert st["worker_restarts"] == 1
    assert st["kv_blocks_used"] == 0
    rc, reqs, summary, err = s.client("--requests", "8", "--max-tokens", "5", fid=2)
    assert rc == 0, err
    assert all(r["finish"] in ("stop", "length") for r in reqs)
    assert s.status()["worker_ready"]
    rc, log = s.stop()
    assert rc == 0 and "worker exited: killed by signal 9" in log


def test_counters_go_on_across_a_worker_with_another_pool(sched_factory):
    """An external worker replaced by one with a different KV pool: the scheduler rebuilds its
    policy for the new pool, and its counters (which /metrics exports as Prometheus counters)
    must go on from where they were, not start again from zero."""
    s = sched_factory("pool", "--simulate", "--external-worker", "--num-kv-blocks", "300")
    args = s.run_dir / "worker.args"
    deadline = time.time() + 30
    while not args.exists():
        assert time.time() < deadline, "the scheduler wrote no worker.args"
        time.sleep(0.05)
    text = args.read_text()
    assert "--num-kv-blocks\n300\n" in text
    other = s.run_dir.parent / "worker-200.args"
    other.write_text(text.replace("--num-kv-blocks\n300\n", "--num-kv-blocks\n200\n"))
    first = subprocess.Popen([str(bin_path("folio-worker")), "--args-file", str(args)])
    second = None
    try:
        rc, reqs, summary, err = s.client("--requests", "8", "--max-tokens", "5")
        assert rc == 0 and len(reqs) == 8, err
        before = s.status()
        assert before["kv_blocks_total"] == 300 and before["requests_finished"] == 8
        first.kill()
        first.wait()
        second = subprocess.Popen([str(bin_path("folio-worker")), "--args-file", str(other)])
        deadline = time.time() + 30
        while (st := s.status())["kv_blocks_total"] != 200 or not st["worker_ready"]:
            assert time.time() < deadline, f"the new worker's pool was not taken: {st}"
            time.sleep(0.05)
        for k in ("steps", "requests_finished", "prefix_cache_queries", "generation_tokens"):
            assert st[k] >= before[k], (k, before, st)
        rc, reqs, summary, err = s.client("--requests", "4", "--max-tokens", "5", fid=2)
        assert rc == 0 and len(reqs) == 4, err
        assert s.status()["requests_finished"] == before["requests_finished"] + 4
    finally:
        for w in (first, second):
            if w and w.poll() is None:
                w.kill()
                w.wait()


def test_stuck_step_restarts_the_worker(sched_factory):
    # A simulated step that would take hours stands for a hung GPU step: the
    # worker keeps sending heartbeats, but the step timeout catches it.
    s = sched_factory("stuck", "--simulate", "--num-kv-blocks", "200", "--sim-time-scale",
                      "1000000", "--step-timeout", "1")
    rc, reqs, summary, err = s.client("--requests", "2", "--max-tokens", "5", timeout=60)
    assert len(reqs) == 2, (rc, err)
    for r in reqs:
        assert r["finish"] == "error" and r["status"] == 503, r
        assert "stuck" in r["message"], r
    assert s.status()["worker_restarts"] >= 1
    rc, log = s.stop()
    assert rc == 0, log


def test_admission_limits_answer_429(sched_factory):
    s = sched_factory("admit", "--simulate", "--num-kv-blocks", "200", "--max-num-seqs", "4",
                      "--max-num-batched-tokens", "64", "--max-waiting-requests", "8",
                      "--sim-time-scale", "5")
    rc, reqs, summary, err = s.client("--requests", "60", "--max-tokens", "20", "--ignore-eos")
    assert summary["finished"] == 60 and summary["violations"] == 0
    rejected = [r for r in reqs if r["finish"] == "rejected"]
    served = [r for r in reqs if r["finish"] == "length"]
    assert rejected and served
    assert all(r["status"] == 429 and "busy" in r["message"] for r in rejected)
    # A prompt longer than the model: 400 with a message.
    rc, reqs, summary, err = s.client("--requests", "1", "--prompt-len", "5000", fid=3)
    assert len(reqs) == 1, (rc, err)
    assert reqs[0]["finish"] == "rejected" and reqs[0]["status"] == 400
    assert "prompt has 5000 tokens" in reqs[0]["message"]


def test_abort_frees_blocks(sched_factory):
    s = sched_factory("abort", "--simulate", "--num-kv-blocks", "500", "--sim-time-scale", "5")
    rc, reqs, summary, err = s.client("--requests", "3", "--max-tokens", "500", "--ignore-eos",
                                      "--abort-after", "5")
    assert summary["finished"] == 3 and summary["violations"] == 0
    assert reqs[0]["finish"] == "abort"
    assert [r["finish"] for r in reqs[1:]] == ["length", "length"]
    assert s.status()["kv_blocks_used"] == 0


def test_cpu_worker_end_to_end(sched_factory, tiny_model):
    s = sched_factory("cpu", "--model", str(tiny_model), "--backend", "cpu",
                      "--num-kv-blocks", "256", "--max-num-seqs", "8", "--threads", "1")
    prompt = "1,450,4996,310,263,1243,29889"
    rc, reqs, summary, err = s.client("--requests", "4", "--prompt", prompt, "--max-tokens", "12",
                                      "--ignore-eos")
    assert rc == 0, err
    # Greedy: four identical prompts (the later ones from the prefix cache
    # or batched with the first) give identical tokens.
    assert all(r["finish"] == "length" and r["completion_tokens"] == 12 for r in reqs)
    assert len({tuple(r["tokens"]) for r in reqs}) == 1
    assert all(0 <= t < 32000 for t in reqs[0]["tokens"])
    st = s.status()
    assert st["worker_ready"] and st["kv_blocks_used"] == 0
    rc, log = s.stop()
    assert rc == 0, log


def test_sim_worker_refuses_structured_outputs(sched_factory):
    """The simulated backend applies no grammars and its LoadReply says so: a constrained request
    is a 400 from the scheduler, as on the CUDA backend until it applies the masks."""
    s = sched_factory("nogrammar", "--simulate", "--num-kv-blocks", "100")
    rc, reqs, summary, err = s.client("--requests", "2", "--regex", "[0-9]+")
    assert rc == 0, err
    for r in reqs:
        assert r["finish"] == "rejected" and r["status"] == 400, r
        assert "structured outputs" in r["message"] and "does not apply grammars" in r["message"]
    rc, reqs, summary, err = s.client("--requests", "2", fid=2)
    assert rc == 0 and all(r["finish"] in ("stop", "length") for r in reqs), err


def test_cpu_worker_grammar_across_preemptions(sched_factory, tiny_model):
    """Constrained sequences on the real CPU worker, preempted by recompute again and again (a
    pool of 12 blocks for 8 sequences whose 30-token prompts fill 2 each and which need a third
    within 3 tokens, however long the letter tokens the sampler picks, where 20 blocks and 20-token
    prompts left some runs without a preemption): each readmission brings the grammar
    and the tokens generated so far, which the worker's new matcher replays. So every output still
    matches the regex whole and ends at the EOS the finished grammar leaves alone ('stop'); and
    no grammar fails on the way."""
    from tokenizers import Tokenizer

    s = sched_factory("grammar", "--model", str(tiny_model), "--backend", "cpu",
                      "--num-kv-blocks", "12", "--max-num-seqs", "8", "--threads", "1",
                      "--max-num-batched-tokens", "16")
    regex = "[a-z]{60,90}[.]"
    rc, reqs, summary, err = s.client("--requests", "8", "--prompt-len", "30", "--max-tokens", "120",
                                      "--temperature", "1", "--regex", regex, timeout=300)
    assert rc == 0, err
    tok = Tokenizer.from_file(str(tiny_model / "tokenizer.json"))
    for r in reqs:
        assert r["finish"] == "stop", r
        assert r["tokens"][-1] == 2, r  # the model's EOS
        text = tok.decode(r["tokens"][:-1])
        assert re.fullmatch(regex, text), (text, r["tokens"])
    preemptions = s.status()["num_preemptions"]
    print(f"grammar across preemptions: {preemptions} preemptions")
    assert preemptions > 0
    rc, log = s.stop()
    assert rc == 0, log
    # Prompts come in chunks of 16 tokens, so a sequence often starts on a slot whose matcher is
    # still its predecessor's: the worker drops it quietly, no grammar fails.
    assert "structured output:" not in log, log


def test_bad_model_is_reported_not_looped(tmp_path, sched_factory):
    bad = tmp_path / "bad-model"
    bad.mkdir()
    (bad / "config.json").write_text('{"hidden_size": 64}')
    s = sched_factory("bad", "--model", str(bad))
    assert s.proc.wait(timeout=30) == 2  # a configuration error: folio serve stops
    rc, log = s.stop()
    assert "config.json" in log
