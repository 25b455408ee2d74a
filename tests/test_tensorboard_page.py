"""TensorBoard's Profile tab shows a tp.profile run (issue 13): the profile
of a small private run is served by `tensorboard --logdir` on loopback, the
profile plugin's data routes list the run and give the trace viewer one
process per party (S1, S2, T1, T2, client) with our kernels named, and
headless chromium (Debian's, driven by Playwright) opens the trace viewer
as a person would and is saved as build/test-artifacts/tensorboard_profile.png.

Needs requirements/dev.txt (tensorboard-plugin-profile 2.14, playwright) and
Debian's chromium, which `make test` installs (tools/ensure_chromium.sh) when
it may: without them the test fails and says what is missing, it never
skips. About 30 s.
"""
import importlib.util
import os

import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from test_profiling import WHERE, check_rows, party_rows, rows_of

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARTIFACT = os.path.join(ROOT, "build", "test-artifacts", "tensorboard_profile.png")
WIDTH, HEIGHT = 1600, 1000


def _page_tool():
    spec = importlib.util.spec_from_file_location(
        "tensorboard_page", os.path.join(ROOT, "tools", "tensorboard_page.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tbp = _page_tool()


@pytest.mark.slow
def test_profile_tab_shows_the_party_rows(tmp_path):
    for dist in ("tensorboard_plugin_profile", "playwright"):
        if importlib.util.find_spec(dist) is None:
            pytest.fail(f"{dist} is not installed: `make setup` installs requirements/dev.txt")
    chromium = tbp.chromium_path()  # fails with what to install, never skips

    rng = np.random.default_rng(0)
    x = tp.share(rng.normal(size=(8, 16)).astype(np.float32))
    w = tp.share(rng.normal(size=(16, 8)).astype(np.float32) / 4)
    layer = tf.function(lambda x, w: tp.nn.relu(x @ w))
    # the garbled family's steps: the README's picture and its prose show
    # them (the bitwise family's rows: tests/test_profiling.py)
    with tp.comparison("garbled"):
        layer(x, w)
    logdir = str(tmp_path / "logs")
    with tp.profile(logdir) as prof:
        y = layer(x, w)
    assert np.all(tp.reveal(y).numpy() >= 0)
    run = os.path.basename(prof.run_dir)
    host = os.path.basename(prof.xplane_paths[0])[:-len(".xplane.pb")]

    with tbp.tensorboard(logdir) as base:
        # the profile plugin's data routes, as the Profile tab calls them
        assert run in tbp.get_json(tbp.profile_api(base, "runs"))
        assert tbp.TRACE_VIEWER in tbp.get_json(tbp.profile_api(base, "run_tools", run=run))
        assert tbp.get_json(tbp.profile_api(base, "hosts", run=run,
                                            tag=tbp.TRACE_VIEWER)) == [host]
        by_party = party_rows(rows_of(tbp.trace_events(base, run, host)))
        # S1, S2, T1, T2, client, and each protocol step (mul_mask, mul_assist, mul_finish,
        # gc_garble, gc_evaluate, ...) on its parties and no other
        check_rows(by_party)
        assert all(by_party[p][step] for step, parties in WHERE.items() for p in parties)

        # the page, in headless chromium
        if os.path.exists(ARTIFACT):
            os.remove(ARTIFACT)
        names = tbp.screenshot(base, ARTIFACT, WIDTH, HEIGHT, chromium=chromium)
    shown = {n.split("/device:CUSTOM:")[1].split()[1] for n in names if "/device:CUSTOM:" in n}
    assert shown == {"S1", "S2", "T1", "T2", "client"}, names

    from PIL import Image
    assert os.path.getsize(ARTIFACT) > 20_000
    with Image.open(ARTIFACT) as im:
        assert im.size == (WIDTH, HEIGHT)
        colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
    assert len(colours) > 50  # the rows' slices, not a blank or single-colour page
