"""tp.profile (DESIGN §10): the written logdir has one trace row per party
with our kernels named, per-step scalars equal to the cost bill, and the
converted model's graph with its devices. The rows are read back through
TF 2.14's own XSpace -> trace-viewer conversion, the one TensorBoard's
Profile tab uses. About 15 s in all."""
import collections
import glob
import gzip
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.profiler.internal import _pywrap_profiler
from tensorflow.tsl.profiler.protobuf import trace_events_pb2

import tf_privpy as tp
from conftest import run

PARTIES = ("S1", "S2", "T1", "T2", "client")
#: protocol steps and the parties that run them (DESIGN §5, §6), by the
#: comparison family a product and a ReLU ran with (Config.comparison)
_MUL = {"mul_mask": {"S1", "S2"}, "mul_assist": {"T1", "T2"}, "mul_finish": {"S1", "S2"}}
WHERE_BY_FAMILY = {
    "garbled": dict(_MUL, gc_garble={"S1"}, gc_evaluate={"T1", "T2"}, gc_encode={"S1", "S2"},
                    bit_share_assist={"T1", "T2"}, bit_unmask={"S1", "S2"}),
    # a ReLU's select (bitwise/selects.py): S1's bw_finish yields its shares
    # of the dealt bit r, S2's come in the dealer's message; both select
    # from the opened bits in TF
    "bitwise": dict(_MUL, bw_deal={"T1"}, bw_input={"S1", "S2"}, bw_step={"S1", "S2"},
                    bw_finish={"S1"}, gc_garble=set(), gc_evaluate=set()),
}
#: the garbled family's (tests/test_tensorboard_page.py: the README's picture)
WHERE = WHERE_BY_FAMILY["garbled"]
#: kernel-time family of each comparison family's kernels (profile_rows.family)
TIME_FAMILY = {"garbled": "gc", "bitwise": "bitwise"}


def viewer_rows(xplane_paths):
    """{process name: Counter of event names} as the Profile tab's trace
    viewer gets them from the XSpace files."""
    data = json.loads(_pywrap_profiler.xspace_to_tools_data(
        list(xplane_paths), "trace_viewer@", {})[0])
    return rows_of(data["traceEvents"])


def rows_of(events):
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    rows = collections.defaultdict(collections.Counter)
    for e in events:
        if e.get("ph") == "X":
            rows[names[e["pid"]]][e["name"]] += 1
    return rows


def party_rows(rows):
    """{party: Counter} of the per-party processes ("... <party> [device]")."""
    out = {}
    for name, counter in rows.items():
        if "/device:CUSTOM:" in name:
            out[name.split("/device:CUSTOM:")[1].split()[1]] = counter
    return out


def check_rows(by_party, family="garbled"):
    assert set(by_party) == set(PARTIES)
    for step, parties in WHERE_BY_FAMILY[family].items():
        ran = {p for p, c in by_party.items() if c[step]}
        assert ran == parties, (step, ran)


@pytest.mark.parametrize("family", sorted(WHERE_BY_FAMILY))
def test_one_row_per_party_with_the_protocol_steps(tmp_path, mode, family):
    x, w = tp.share([[1.0, 2.0]]), tp.share([[0.5], [0.25]])
    y = tp.share([1.0, -2.0, 3.0])
    with tp.profile(tmp_path) as prof, tp.comparison(family):
        z, r = run(mode, lambda a, b, c: (a @ b, tp.nn.relu(c)), x, w, y)
    np.testing.assert_allclose(tp.reveal(r).numpy(), [1.0, 0.0, 3.0])
    assert prof.run_dir.startswith(os.path.join(str(tmp_path), "plugins", "profile"))
    assert prof.xplane_paths and all(p.endswith(".xplane.pb") for p in prof.xplane_paths)
    check_rows(party_rows(viewer_rows(prof.xplane_paths)), family)
    # the non-streaming trace viewer's Trace proto names the same processes
    trace = trace_events_pb2.Trace()
    trace.ParseFromString(_pywrap_profiler.xspace_to_tools_data(
        prof.xplane_paths, "trace_viewer", {})[0])
    assert {d.name.split()[1] for d in trace.devices.values()
            if d.name.startswith("/device:CUSTOM:")} == set(PARTIES)
    # the Chrome trace-event copy: one process per party, named by the party
    with gzip.open(prof.trace_json, "rt") as f:
        check_rows(rows_of(json.load(f)["traceEvents"]), family)
    step, = prof.steps
    assert (step.stats.multiplications, step.stats.comparisons) == (1 + 3, 3)
    assert step.time_ms["mul"] > 0 and step.time_ms[TIME_FAMILY[family]] > 0
    assert set(step.party_time_ms) == {"S1", "S2", "T1", "T2"}


def scalars(logdir):
    """{tag: {step: value}} of the event files in logdir, and the graphs."""
    out, graphs = collections.defaultdict(dict), []
    for path in glob.glob(os.path.join(logdir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            if event.graph_def:
                g = tf.compat.v1.GraphDef()
                g.ParseFromString(event.graph_def)
                graphs.append(g)
            for v in event.summary.value:
                out[v.tag][event.step] = tf.make_ndarray(v.tensor).item()
    return out, graphs


def test_converted_model_scalars_equal_its_cost_bill_and_graph_is_written(tmp_path):
    tf.keras.utils.set_random_seed(3)
    model = tf.keras.Sequential([tf.keras.layers.Input((3,)),
                                 tf.keras.layers.Dense(4, activation="relu"),
                                 tf.keras.layers.Dense(2)])
    private = tp.keras.convert(model)
    x = np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)
    bill = private.cost(batch_size=2)
    logdir = str(tmp_path)
    with tp.profile(logdir, graph=private, first_step=5) as prof:
        for _ in range(2):
            private.predict(x)
            prof.step()
    assert len(prof.steps) == 2
    got, graphs = scalars(logdir)
    for step in (5, 6):
        assert got["tf_privpy/rounds"][step] == bill.rounds
        assert got["tf_privpy/multiplications"][step] == bill.multiplications
        assert got["tf_privpy/comparisons"][step] == bill.comparisons
        assert got["tf_privpy/bytes"][step] == bill.bytes
        for (src, dst), (msgs, nbytes) in bill.links.items():
            assert got[f"tf_privpy/bytes/{src}->{dst}"][step] == nbytes
            assert got[f"tf_privpy/messages/{src}->{dst}"][step] == msgs
        assert got["tf_privpy/time_ms/mul"][step] > 0
        assert got["tf_privpy/time_ms/bitwise"][step] > 0   # the default comparison family
    links = {t for t in got if t.startswith("tf_privpy/bytes/")}
    assert links == {f"tf_privpy/bytes/{s}->{d}" for s, d in bill.links}
    # the rewritten graph, each op on its party's device (Graphs tab)
    g, = graphs
    placed = {n.device for n in g.node}
    for party in ("S1", "S2", "T1", "T2"):
        assert tp.servers()[party] in placed, party
    check_rows(party_rows(viewer_rows(prof.xplane_paths)), "bitwise")


def test_profile_errors(tmp_path):
    prof = tp.profiling.Profile(logdir=str(tmp_path))
    with pytest.raises(tp.ProfileError, match="inside its"):
        prof.step()
    with tp.profile(str(tmp_path / "a")):
        with pytest.raises(tp.ProfileError, match="another TensorFlow profile"):
            with tp.profile(str(tmp_path / "b")):
                pass
    with pytest.raises(TypeError, match="converted model"):
        with tp.profile(str(tmp_path / "c"), graph=42):
            pass
