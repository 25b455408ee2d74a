"""benchmarks/he.py --quick runs end to end (every section, tiny sizes), so the
benchmark `make bench` runs cannot rot."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_he_benchmark_quick(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "he.py"), "--quick",
                        f"--out={tmp_path}"], env=env, capture_output=True, text=True,
                       timeout=900, cwd=ROOT)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    for title in ("(a) Client cost per element", "(b) One FL round", "(c) Scalar product",
                  "(d) Vector sum", "Targets (QUICK run"):
        assert title in r.stdout, title
    res = json.load(open(tmp_path / "he_quick.json"))
    assert res["quick"] and set(res["seconds"]) == {"a", "b", "c", "d"}
    a, b, c, d = res["a"], res["b"], res["c"], res["d"]
    assert a["ours_bytes_per_value"] <= 5.2 and a["ours_us_per_value"] > 0
    assert any(not run["gmpy2"] for run in a["phe"])            # this venv's phe, measured
    assert set(b["runs"]) == {"plaintext", "batchcrypt", "paillier"}
    assert b["traffic_x"] > 10                                  # per value sends far more
    assert c["naive"]["total"] > c["online"]["total"] > 0
    assert d["runs"]["generic"]["bytes_per_value"] <= 6.0
