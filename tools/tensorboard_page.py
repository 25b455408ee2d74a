"""TensorBoard's Profile tab in a headless browser: starts TensorBoard on
loopback for a logdir, opens the Profile tab's trace viewer in Debian's
chromium (driven by Playwright) and saves a screenshot.

Used by tests/test_tensorboard_page.py, and to make the README's picture:

  python tools/tensorboard_page.py docs/images/tensorboard_profile.png

(that writes a profile of a small private run to a temporary logdir first).
Needs requirements/dev.txt (tensorboard-plugin-profile, playwright) and
Debian's chromium (`apt-get install chromium`; .ci/run installs it).
Playwright's own browser download is never used: chromium is found on PATH
or at $TP_CHROMIUM.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from typing import Iterator, Optional

#: the trace viewer's tool name in tensorboard-plugin-profile 2.14 (streaming,
#: converted from the XSpace files by TF's own converter)
TRACE_VIEWER = "trace_viewer@^"
#: the Profile tab loads Google Charts from the internet before it starts;
#: offline, the browser gets this stand-in (the trace viewer needs no charts)
_CHARTS_STUB = ("window.google = window.google || {};"
                "google.charts = {load() {}, safeLoad() {}, setOnLoadCallback() {}};")


class PageError(RuntimeError):
    """TensorBoard or the browser did not do what was expected."""


def chromium_path() -> str:
    """Debian's chromium: $TP_CHROMIUM, or `chromium` on PATH."""
    path = os.environ.get("TP_CHROMIUM") or shutil.which("chromium") or shutil.which(
        "chromium-browser")
    if not path:
        raise PageError("no chromium found: install Debian's (`apt-get install chromium`; "
                        "`make test` does when it may) or set TP_CHROMIUM to a Chromium binary")
    return path


@contextlib.contextmanager
def tensorboard(logdir: str, timeout_s: float = 120.0) -> Iterator[str]:
    """Runs `tensorboard --logdir logdir` on 127.0.0.1 at a free port and
    yields its URL once it answers; stops it (and anything it started) on
    exit."""
    log = tempfile.TemporaryFile()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tensorboard.main", "--logdir", logdir, "--host", "127.0.0.1",
         "--port", "0", "--load_fast", "false"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
        start_new_session=True)
    try:
        url = None
        deadline = time.monotonic() + timeout_s
        while url is None:
            log.seek(0)
            out = log.read().decode(errors="replace")
            m = re.search(r"TensorBoard \S+ at (http://127\.0\.0\.1:\d+/)", out)
            if m:
                url = m.group(1)
            elif proc.poll() is not None:
                raise PageError(f"tensorboard exited ({proc.returncode}):\n{out[-3000:]}")
            elif time.monotonic() > deadline:
                raise PageError(f"tensorboard did not start in {timeout_s:.0f} s:\n{out[-3000:]}")
            else:
                time.sleep(0.2)
        get_json(url + "data/plugins_listing")  # answers
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def get(url: str, timeout_s: float = 120.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout_s) as r:
        return r.read()


def get_json(url: str):
    return json.loads(get(url))


def profile_api(base: str, route: str, **params) -> str:
    """The URL of one of the profile plugin's data routes (runs, run_tools,
    hosts, data; tensorboard_plugin_profile/profile_plugin.py)."""
    query = urllib.parse.urlencode(params)
    return f"{base}data/plugin/profile/{route}" + (f"?{query}" if query else "")


def trace_events(base: str, run: str, host: str) -> list:
    """The trace viewer's events for a run's host, as the Profile tab gets them."""
    data = get_json(profile_api(base, "data", run=run, tag=TRACE_VIEWER, host=host))
    return data["traceEvents"]


@contextlib.contextmanager
def browser(chromium: Optional[str] = None):
    """A headless Playwright browser on Debian's chromium."""
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium or chromium_path(), headless=True)
        try:
            yield b
        finally:
            b.close()


def open_trace_viewer(b, base: str, width: int = 1600, height: int = 900,
                      timeout_s: float = 120.0):
    """Opens TensorBoard's Profile tab at `base` and chooses the trace viewer
    tool for the first run and host, as a person would (the tab always opens
    on the overview page). Returns (page, trace viewer frame)."""
    page = b.new_page(viewport={"width": width, "height": height})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    def route(r):
        u = r.request.url
        if u.startswith(base):
            r.continue_()
        elif u.endswith("/charts/loader.js"):
            r.fulfill(status=200, content_type="text/javascript", body=_CHARTS_STUB)
        else:  # nothing leaves loopback
            r.abort()
    page.route("**/*", route)
    ms = int(timeout_s * 1000)
    page.goto(base + "#profile", timeout=ms)
    plugin = page.frame_locator("iframe").first  # the Profile tab's iframe
    tools = plugin.locator("sidenav mat-select").nth(1)
    tools.wait_for(timeout=ms)
    # the sidenav fills in the run, its tools and hosts, then shows a tool
    plugin.locator("sidenav mat-select").nth(2).filter(has_text=re.compile(r"\S")).wait_for(
        timeout=ms)
    tools.click()
    plugin.locator("mat-option", has_text="trace_viewer").click()
    deadline = time.monotonic() + timeout_s
    while True:
        frames = [f for f in page.frames if "trace_viewer_index.html" in f.url]
        if frames:
            break
        if time.monotonic() > deadline:
            raise PageError("the trace viewer did not open; page errors: " + "; ".join(errors))
        page.wait_for_timeout(200)
    return page, frames[0]


def process_names(frame, timeout_s: float = 120.0) -> list:
    """The process rows the trace viewer shows (their headers' text), once
    it has drawn them."""
    names = frame.locator("span.process-track-name").filter(visible=True)
    names.first.wait_for(timeout=int(timeout_s * 1000))
    return [" ".join(names.nth(i).inner_text().split()) for i in range(names.count())]


def collapse(page, frame, process: str) -> None:
    """Folds a process row (its header's triangle), as a click on it does."""
    frame.locator("span.process-track-name").filter(visible=True).filter(
        has_text=process).first.click()
    page.wait_for_timeout(500)


def screenshot(base: str, png: str, width: int = 1600, height: int = 1000,
               chromium: Optional[str] = None) -> list:
    """Opens the trace viewer of TensorBoard at `base` in headless chromium,
    folds TF's own /host:CPU row (the parties' rows hold the same events,
    sorted by party) and saves the page as `png`. Returns the process rows
    it showed."""
    with browser(chromium) as b:
        page, frame = open_trace_viewer(b, base, width, height)
        names = process_names(frame)
        collapse(page, frame, "/host:CPU")
        os.makedirs(os.path.dirname(os.path.abspath(png)), exist_ok=True)
        page.screenshot(path=png)
    return names


def _example_profile(logdir: str) -> None:
    """The README's picture: one private dense layer with a ReLU, traced
    once (warmed up first, so the profile holds its run, not its tracing)."""
    import numpy as np
    import tensorflow as tf
    import tf_privpy as tp
    tp.init()
    rng = np.random.default_rng(0)
    x = tp.share(rng.normal(size=(64, 256)).astype(np.float32))
    w = tp.share(rng.normal(size=(256, 128)).astype(np.float32) / 8)

    @tf.function
    def layer(x, w):
        return tp.nn.relu(x @ w)

    layer(x, w)
    with tp.profile(logdir):
        layer(x, w)


def main(argv) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with tempfile.TemporaryDirectory(prefix="tp_tensorboard_") as logdir:
        _example_profile(logdir)
        with tensorboard(logdir) as base:
            names = screenshot(base, argv[1])
    print(f"wrote {argv[1]}; rows: {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
