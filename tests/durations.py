"""Every test's durations to a file: `pytest --durations-file=PATH.json`
(`make test` passes build/test-durations.json) writes PATH.json (each test's
setup, call and teardown seconds, the CPU seconds it used, outcome and
worker) and PATH.txt (the same, slowest first, with the sums). Registered by
conftest.py. Under xdist the controller receives every worker's reports, so
one file holds the whole run.

CPU seconds: user + system time of the process that ran the test and of the
child processes it waited for (servers, examples, benchmarks run as
subprocesses), from the test's start to its last phase's report. A child
not waited for in its own test (a server a module fixture started, a Popen
that subprocess reaps at the next Popen) counts in the test that reaps it,
so single rows can exceed their wall time (one reaped after the last test
counts nowhere). On a machine of C cores, the summed CPU seconds over C is
the wall time no number of workers can beat: it says whether a run was
short of work for its cores (wall above that floor) or had too much work
(at it)."""
from __future__ import annotations

import json
import os
import resource
import time
from typing import Dict

import pytest


def add_option(parser) -> None:
    parser.addoption("--durations-file", default=None, metavar="PATH.json",
                     help="write every test's setup/call/teardown seconds to PATH.json "
                          "and, slowest first, to PATH.txt")


def cpu_seconds() -> float:
    """User + system seconds of this process and its waited-for children."""
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class CpuClock:
    """In the process that runs the tests (an xdist worker, or pytest's own
    with no workers): each phase's report carries ("cpu_s", seconds since the
    test started) in its user_properties, which xdist sends to the
    controller with the report."""

    def __init__(self) -> None:
        self.start = 0.0

    def pytest_runtest_logstart(self, nodeid, location) -> None:
        self.start = cpu_seconds()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        outcome.get_result().user_properties.append(("cpu_s", cpu_seconds() - self.start))


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
        cpu = dict(report.user_properties).get("cpu_s")
        if cpu is not None:   # the last phase's figure covers the whole test
            row["cpu"] = round(cpu, 3)
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
        sums = {p: round(sum(r.get(p, 0.0) for r in rows), 1)
                for p in ("setup", "call", "teardown", "cpu")}
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with open(self.path, "w") as f:
            json.dump({"wall_s": round(wall, 1), "tests": len(rows), "sum_s": sums,
                       "durations": rows}, f, indent=1)
        with open(os.path.splitext(self.path)[0] + ".txt", "w") as f:
            f.write(f"{len(rows)} tests, {wall:.1f} s wall; summed over workers: setup "
                    f"{sums['setup']} s, call {sums['call']} s, teardown {sums['teardown']} s; "
                    f"CPU {sums['cpu']} s (/{os.cpu_count()} cores: "
                    f"{sums['cpu'] / (os.cpu_count() or 1):.1f} s)\n")
            long_rows = [r for r in rows if r.get("long")]
            f.write(f"of which {len(long_rows)} marked long (pytest.ini), summed: "
                    f"{sum(r['total'] for r in long_rows):.1f} s, CPU "
                    f"{sum(r.get('cpu', 0.0) for r in long_rows):.1f} s\n")
            f.write(f"{'total':>8} {'setup':>8} {'call':>8} {'teardown':>8} {'cpu':>8}  test\n")
            for r in rows:
                f.write(f"{r['total']:8.2f} {r['setup']:8.2f} {r['call']:8.2f} "
                        f"{r['teardown']:8.2f} {r.get('cpu', 0.0):8.2f}  {r['test']}"
                        f"{'' if r['outcome'] == 'passed' else '  [' + r['outcome'] + ']'}\n")

    def pytest_terminal_summary(self, terminalreporter) -> None:
        terminalreporter.write_line(f"every test's durations: {self.path} and "
                                    f"{os.path.splitext(self.path)[0]}.txt")


def configure(config) -> None:
    """Registers the recorder in the controlling process only (xdist workers
    send their reports to it)."""
    path = config.getoption("--durations-file")
    if not path:
        return
    # workers get the option too (xdist passes the command line on)
    config.pluginmanager.register(CpuClock(), "tf_privpy_cpu_clock")
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(Recorder(path), "tf_privpy_durations")


# Also a plugin of its own (`pytest -p durations`, with tests/ on the path):
# tests/test_durations_file.py runs it on a scratch suite.
def pytest_addoption(parser) -> None:
    add_option(parser)


def pytest_configure(config) -> None:
    configure(config)
