"""Standalone C++ test programs of the kernels (no TensorFlow): the ring GEMM
against a naive reference, fast AVX-512 path and forced portable path."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_ring_gemm_cc(tmp_path):
    r = subprocess.run(["make", "-s", "-f", "ops/ring/Makefile.standalone", "test",
                        f"OUT={tmp_path}"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.endswith(" 0 failed") and not last.startswith("0 passed"), r.stdout
