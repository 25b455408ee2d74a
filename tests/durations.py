"""Every test's durations to a file: `pytest --durations-file=PATH.json`
(`make test` passes build/test-durations.json) writes PATH.json (each test's
setup, call and teardown seconds, outcome and worker) and PATH.txt (the same,
slowest first, with the sums). Registered by conftest.py. Under xdist the
controller receives every worker's reports, so one file holds the whole run."""
from __future__ import annotations

import json
import os
import time
from typing import Dict


def add_option(parser) -> None:
    parser.addoption("--durations-file", default=None, metavar="PATH.json",
                     help="write every test's setup/call/teardown seconds to PATH.json "
                          "and, slowest first, to PATH.txt")


class Recorder:
    """Collects the phase durations of every test report, writes them at the end."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.start = time.time()
        self.tests: Dict[str, dict] = {}

    def pytest_runtest_logreport(self, report) -> None:
        row = self.tests.setdefault(report.nodeid, {"setup": 0.0, "call": 0.0,
                                                   "teardown": 0.0, "outcome": "passed"})
        row[report.when] = round(report.duration, 3)
        node = getattr(report, "node", None)   # xdist: the worker that ran it
        row["worker"] = node.gateway.id if node is not None else None
        # the long runs share the session with the rest: their sum is printed apart
        row["long"] = "long" in report.keywords
        if report.outcome != "passed" and row["outcome"] == "passed":
            row["outcome"] = (report.outcome if report.when == "call"
                              else f"{report.when} {report.outcome}")

    def pytest_sessionfinish(self, session) -> None:
        wall = time.time() - self.start
        rows = sorted(({"test": k, **v,
                        "total": round(v["setup"] + v["call"] + v["teardown"], 3)}
                       for k, v in self.tests.items()), key=lambda r: -r["total"])
        sums = {p: round(sum(r[p] for r in rows), 1) for p in ("setup", "call", "teardown")}
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with open(self.path, "w") as f:
            json.dump({"wall_s": round(wall, 1), "tests": len(rows), "sum_s": sums,
                       "durations": rows}, f, indent=1)
        with open(os.path.splitext(self.path)[0] + ".txt", "w") as f:
            f.write(f"{len(rows)} tests, {wall:.1f} s wall; summed over workers: setup "
                    f"{sums['setup']} s, call {sums['call']} s, teardown {sums['teardown']} s\n")
            long_rows = [r for r in rows if r.get("long")]
            f.write(f"of which {len(long_rows)} marked long (pytest.ini), summed: "
                    f"{sum(r['total'] for r in long_rows):.1f} s\n")
            f.write(f"{'total':>8} {'setup':>8} {'call':>8} {'teardown':>8}  test\n")
            for r in rows:
                f.write(f"{r['total']:8.2f} {r['setup']:8.2f} {r['call']:8.2f} "
                        f"{r['teardown']:8.2f}  {r['test']}"
                        f"{'' if r['outcome'] == 'passed' else '  [' + r['outcome'] + ']'}\n")

    def pytest_terminal_summary(self, terminalreporter) -> None:
        terminalreporter.write_line(f"every test's durations: {self.path} and "
                                    f"{os.path.splitext(self.path)[0]}.txt")


def configure(config) -> None:
    """Registers the recorder in the controlling process only (xdist workers
    send their reports to it)."""
    path = config.getoption("--durations-file")
    if path and not hasattr(config, "workerinput"):
        config.pluginmanager.register(Recorder(path), "tf_privpy_durations")


# Also a plugin of its own (`pytest -p durations`, with tests/ on the path):
# tests/test_durations_file.py runs it on a scratch suite.
def pytest_addoption(parser) -> None:
    add_option(parser)


def pytest_configure(config) -> None:
    configure(config)
