"""`--durations-file` (tests/durations.py, what `make test` passes): under
xdist's two workers, as `make test` runs, the file lists every test of the
run with its phases and outcome, slowest first, and the .txt beside it sums
them, and each test's CPU seconds (its own process's and its waited-for
children's). Runs a scratch suite of five tests in a subprocess (a few
seconds)."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

SCRATCH = '''
import subprocess
import sys
import time
import pytest

BURN = "import time\\nend = time.process_time() + 0.3\\nwhile time.process_time() < end: pass"

@pytest.fixture
def slow_setup():
    time.sleep(0.3)

def test_sleeps():
    time.sleep(0.5)

def test_slow_setup(slow_setup):
    pass

def test_fails():
    assert False

def test_burns():
    exec(BURN)

def test_child_burns():
    subprocess.run([sys.executable, "-c", BURN], check=True)
'''


def test_every_test_with_its_phases_under_xdist(tmp_path):
    (tmp_path / "test_scratch.py").write_text(SCRATCH)
    out = tmp_path / "build" / "d.json"
    env = dict(os.environ, PYTHONPATH=HERE)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "durations", "-n", "2",
                        "-p", "no:cacheprovider", f"--rootdir={tmp_path}", "-c", os.devnull,
                        f"--durations-file={out}", str(tmp_path / "test_scratch.py")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr          # test_fails fails
    assert f"every test's durations: {out}" in r.stdout
    res = json.loads(out.read_text())
    rows = {row["test"].split("::")[-1]: row for row in res["durations"]}
    assert sorted(rows) == ["test_burns", "test_child_burns", "test_fails", "test_sleeps",
                            "test_slow_setup"]
    assert res["tests"] == 5 and res["wall_s"] > 0
    assert rows["test_sleeps"]["call"] >= 0.5 and rows["test_slow_setup"]["setup"] >= 0.3
    assert rows["test_fails"]["outcome"] == "failed" and rows["test_sleeps"]["outcome"] == "passed"
    # CPU: a busy loop counts here or in a waited-for child; a sleep does not
    assert rows["test_burns"]["cpu"] >= 0.3 and rows["test_child_burns"]["cpu"] >= 0.3
    assert rows["test_sleeps"]["cpu"] < 0.25 and rows["test_slow_setup"]["cpu"] < 0.25
    assert res["sum_s"]["cpu"] >= 0.6
    assert {row["worker"] for row in rows.values()} <= {"gw0", "gw1"}
    totals = [row["total"] for row in res["durations"]]
    assert totals == sorted(totals, reverse=True)
    txt = (tmp_path / "build" / "d.txt").read_text().splitlines()
    assert txt[0].startswith("5 tests")
    # the .txt's rows in the .json's order, slowest first (which is slowest
    # depends on the load: a child's start-up can outlast the 0.5 s sleep)
    order = [row["test"].split("::")[-1] for row in res["durations"]]
    assert all(f"test_scratch.py::{name}" in txt[3 + i] for i, name in enumerate(order)), txt
    assert " CPU " in txt[0] and txt[2].split()[4] == "cpu"
    assert txt[1].startswith("of which 0 marked long")
    assert any(line.endswith("[failed]") for line in txt)
