"""benchmarks/micro.py, compare.py and functions.py run end to end at tiny
sizes (one ring), so the benchmarks `make bench` runs cannot rot. Speeds are
not checked here: they belong to the benchmarks' own tables."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RUNS = {
    "micro": (["--rings=64", "--mul_n=1000", "--sizes=16", "--reps=1"], "micro.json"),
    "compare": (["--rings=64", "--sizes=100", "--reps=1", "--sort_sizes=16",
                 "--max_groups=16", "--fn_n=100"], "compare.json"),
    "functions": (["--rings=64", "--sizes=20", "--reps=1", "--functions=exp,divide,softmax"],
                  "functions.json"),
    "converter": (["--rings=64", "--models=lenet5", "--batches=2", "--reps=1"],
                  "converter.json"),
    "training": (["--rings=64", "--lr_batches=10", "--models=lr", "--reps=1"],
                 "training.json"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RUNS))
def test_benchmark_runs(name, tmp_path):
    args, out = RUNS[name]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", f"{name}.py"), *args,
                        f"--out={tmp_path}"], env=env, capture_output=True, text=True,
                       timeout=900, cwd=ROOT)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    res = json.load(open(tmp_path / out))
    assert res["machine"]
    if name == "compare":
        row = res["compare"][0]
        assert row["online_bytes_per_cmp"] > 0 and row["with_garbling_tf_function_per_s"] > 0
    if name == "converter":
        row = res["rows"][0]
        assert row["private_ms_per_image"] > 0 and row["plaintext_ms_per_image"] > 0
        assert row["rounds"] > 0 and row["build_s"] > 0
    if name == "training":
        assert res["lr_per_instance"][0]["ms_per_instance"] > 0
        assert res["per_step"][0]["rounds"] > 0
    if name == "functions":
        assert {r["fn"] for r in res["rows"]} == {"exp", "divide", "softmax"}
        assert all(r["tf_plaintext_us_per_elt"] > 0 for r in res["rows"])
