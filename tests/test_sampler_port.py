"""The GPU correctness check's penalties section (tests/gpu/check_cuda.py --penalties), run with
the CPU backend on both sides. On the H200 that section judges CPU-vs-CUDA divergences with NumPy
ports of both samplers (tests/gpu/sampler_ref.py); the ports are only worth that if the CPU port
reproduces every token the C sampler draws, which this test holds in CI: greedy and seeded
sampling, with top-k/top-p/min-p, every penalty alone and together, across a preemption by
recompute and a reused slot, and the launch-ahead pipeline. It also holds that the penalties
change the penalized rows and only those."""
import subprocess
import sys

from conftest import REPO, bin_path


def test_penalties_section_cpu_against_itself(tmp_path):
    from make_tiny_model import make_tiny_model

    # The fixture the GPU check uses (tests/gpu/run.sh).
    fx = make_tiny_model(tmp_path / "fx", layers=2, hidden=256, heads=4, kv_heads=2,
                         intermediate=512, seed=3)
    work = tmp_path / "work"
    work.mkdir()
    r = subprocess.run(
        [sys.executable, str(REPO / "tests" / "gpu" / "check_cuda.py"), "--penalties",
         str(bin_path("step_driver")), str(fx), str(work), "cpu"],
        capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "penalties: 5/5 passed" in out, out[-4000:]
    # Every row's CPU token reproduced by the port (the counts are printed per check).
    assert out.count("CPU-sampler port reproduces") >= 3, out[-4000:]
    assert "not explained: none" in out
