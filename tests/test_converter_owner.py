"""Owner-side inputs (issue 27, converters/owner.py): what depends on one
data owner's plaintext input alone runs at the owner, on the client device,
before sharing; the bill shows what that saves against
Policy(owner_side=False); the servers never see the plaintext input."""
import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from tf_privpy.converters import owner
import graphcheck
from kerasutil import seeded
from tolerances import one_hot_gather_tol, owner_dense_tol, public_mul_tol

L = tf.keras.layers
VOCAB, DIM = 7, 4
IDS = np.array([[1, 3, 0], [6, 2, 4]], np.int32)


def _embedding():
    return seeded(lambda: tf.keras.Sequential([L.InputLayer((3,), dtype=tf.int32),
                                               L.Embedding(VOCAB, DIM)]))


def _front_end():
    """Rescaling and Reshape in front (with a crop: the owner shares less),
    then a private Dense."""
    return seeded(lambda: tf.keras.Sequential([
        L.InputLayer((36,)), L.Rescaling(1 / 255.0, offset=-0.5), L.Reshape((6, 6, 1)),
        L.Cropping2D(1), L.Flatten(), L.Dense(3)]))


def _pixels(n=2):
    return np.random.default_rng(3).integers(0, 256, (n, 36)).astype(np.float32)


def test_embedding_on_owner_ids_is_an_exact_one_hot_product(ring):
    """Plaintext ids: the owner shares their one-hot as integer bits, the
    servers multiply it by the table without truncation: no comparisons,
    each output the table entry's encoding (one_hot_gather_tol), and the
    bill's saving is the oblivious lookup's comparisons (2 per id per row)."""
    model = _embedding()
    private = tp.keras.convert(model)
    got = private.predict(IDS, reveal=True).numpy()
    frac = tp.get_runtime().config.frac_bits
    assert np.abs(got - model(IDS).numpy()).max() <= one_hot_gather_tol(frac)
    bill = private.cost(2)
    assert bill.comparisons == 0
    saved = private.owner_saving(2)
    assert saved["comparisons"] == 2 * IDS.size * VOCAB and saved["bytes"] > 0
    assert saved["rounds"] > 0
    line = next(ln for ln in private.summary(2).splitlines() if "owner-side" in ln)
    assert "one-hot for GatherV2 x1" in line and f"saves {saved['bytes']} bytes" in line
    with pytest.raises(ValueError, match=r"outside \[0, 7\).*data owner"):
        private.predict(np.array([[VOCAB, 0, 0], [0, 0, 0]], np.int32))
    with pytest.raises(ValueError, match=r"outside \[0, 7\)"):
        private.predict(np.array([[0, -1, 0], [0, 0, 0]], np.int32))


def test_embedding_on_shared_ids_stays_an_oblivious_lookup(ring):
    """Ids given as a PrivateTensor are private as they are: the oblivious
    lookup, its equalities counted (now exact too: the bits multiply
    without truncation); an id outside the table gives zeros (the servers
    cannot look)."""
    model = _embedding()
    private = tp.keras.convert(model)
    shared = tp.share(IDS)
    frac = tp.get_runtime().config.frac_bits
    got = private.predict(shared, reveal=True).numpy()
    assert np.abs(got - model(IDS).numpy()).max() <= one_hot_gather_tol(frac)
    with tp.stats() as run:
        private.predict(shared)
    assert run.comparisons == 2 * IDS.size * VOCAB
    out = private.predict(tp.share(np.array([[VOCAB, 5, 5], [0, 0, 0]], np.int32)),
                          reveal=True).numpy()
    assert not out[0, 0].any()


def test_rescaling_reshape_front_end_runs_at_the_owner(ring):
    """The front end runs at the owner: no public product (and its
    truncation) left on the servers, fewer bytes (the client shares the
    cropped image and sends no public constants), results within the bound
    of a Dense on the owner's exact float32 values."""
    model = _front_end()
    on = tp.keras.convert(model)
    off = tp.keras.convert(model, policy=tp.Policy(owner_side=False))
    x = _pixels()
    front = tf.keras.Sequential(model.layers[:-1])
    w = model.layers[-1].kernel.numpy()
    tol = owner_dense_tol(front(x).numpy(), w, tp.get_runtime().config.frac_bits)
    err = np.abs(on.predict(x, reveal=True).numpy() - model(x).numpy())
    assert np.all(err <= tol + 1e-6), (err.max(), tol.min())
    saved = on.owner_saving(2)
    assert saved["bytes"] > 0 and saved["bytes"] == off.cost(2).bytes - on.cost(2).bytes
    servers = {canon(v): k for k, v in tp.servers().items() if k != "client"}

    def truncating_products(private):  # local products by a public value, on S1/S2
        return sum(n.op == "TfPrivpy>RingBilinear" and canon(n.device) in servers
                   for n in private.graph(2).node)

    assert truncating_products(on) == 0 < truncating_products(off)
    line = next(ln for ln in on.summary(2).splitlines() if "owner-side" in ln)
    assert "Mul x1" in line and "Reshape" in line and "saves" in line
    assert "owner-side: off" in off.summary(2)


def canon(device):
    return graphcheck.canon(device) if device else ""


def test_policy_off_and_public_inputs_as_before():
    """Policy(owner_side=False) shares the ids as they are (the oblivious
    lookup); Policy(inputs="public") is untouched by the setting."""
    model = _embedding()
    off = tp.keras.convert(model, policy=tp.Policy(owner_side=False))
    assert off.cost(2).comparisons == 2 * IDS.size * VOCAB
    assert off.owner_saving(2) == dict.fromkeys(off.owner_saving(2), 0)
    front = _front_end()
    x = _pixels()
    public = tp.keras.convert(front, policy=tp.Policy(inputs="public"))
    assert "owner-side: off" in public.summary(2)
    assert ("client", "S1") not in public.cost(2).links or \
        public.cost(2).links[("client", "S1")][1] < x[0].size * 16
    with pytest.raises(ValueError, match="owner_side must be True or False"):
        tp.Policy(owner_side="yes")


def test_any_tf_op_runs_at_the_owner():
    """An op with no private implementation (Lgamma) on the owner's input
    runs there; without the policy, or on a PrivateTensor input, it is
    refused before anything runs."""
    w = tf.Variable(np.linspace(-1, 1, 8).reshape(4, 2).astype(np.float32))
    fn = tf.function(lambda x: tf.matmul(tf.math.lgamma(x), w))
    spec = [tf.TensorSpec((2, 4), tf.float32)]
    x = np.random.default_rng(1).uniform(0.5, 3, (2, 4)).astype(np.float32)
    got = tp.convert(fn, spec).predict(x, reveal=True).numpy()
    frac = tp.get_runtime().config.frac_bits
    h = tf.math.lgamma(x).numpy()
    assert np.all(np.abs(got - fn(x).numpy()) <= owner_dense_tol(h, w.numpy(), frac) + 1e-6)
    with pytest.raises(tp.UnsupportedOpError, match="Lgamma"):
        tp.convert(fn, spec, policy=tp.Policy(owner_side=False))
    with pytest.raises(tp.UnsupportedOpError, match="Lgamma"):
        tp.convert(fn, spec).predict(tp.share(x))


def test_two_inputs_only_one_at_the_owner(ring):
    """A front end on one input runs at its owner; what combines two inputs
    is private (they may come from two owners), and so is everything after
    an input given as a PrivateTensor."""
    a, b = tf.keras.Input((4,), name="a"), tf.keras.Input((4,), name="b")
    ha = L.Rescaling(0.5, offset=1.0, name="scale_a")(a)
    hb = L.Rescaling(2.0, name="scale_b")(b)
    joined = L.Concatenate(name="join")([ha, hb])
    model = seeded(lambda: tf.keras.Model([a, b], L.Dense(2, name="out")(joined)))
    rng = np.random.default_rng(2)
    xa, xb = (rng.uniform(-1, 1, (2, 4)).astype(np.float32) for _ in range(2))
    private = tp.keras.convert(model)
    traced = private._traced
    computed = {n.name for n in traced.graph_def.node if n.op != "Const"}

    def side(plain):
        p = owner.plan(traced, private.policy, plain)
        kind = lambda layer: {("owner" if n in p.owner_of else "private" if n in p.private  # noqa
                               else "public") for n, ln in traced.layer_of.items()
                              if ln == layer and n in computed}
        return kind("scale_a"), kind("scale_b"), kind("join")

    assert side([True, True]) == ({"owner"}, {"owner"}, {"private"})
    assert side([True, False]) == ({"owner"}, {"private"}, {"private"})
    frac = tp.get_runtime().config.frac_bits
    h = tf.keras.Model([a, b], joined)([xa, xb]).numpy()
    tol = owner_dense_tol(h, model.get_layer("out").kernel.numpy(), frac)
    want = model([xa, xb]).numpy()
    got = private.predict([xa, xb], reveal=True).numpy()
    assert np.all(np.abs(got - want) <= tol + 1e-6)
    # b shared: its Rescaling is a public product on shares, whose error
    # (public_mul_tol) the Dense carries on
    got = private.predict([xa, tp.share(xb)], reveal=True).numpy()
    extra = np.concatenate([np.zeros_like(xa), public_mul_tol(xb, 2.0, frac)], axis=1)
    w = np.abs(model.get_layer("out").kernel.numpy())
    assert np.all(np.abs(got - want) <= tol + extra @ w + 1e-6)


def test_owner_side_ops_run_on_the_client_only(monkeypatch):
    """Placement: every op that reads the plaintext input, or what the owner
    computed from it, before the share split runs on the client, and
    nothing crosses to a server outside the channel. The check is shown to
    catch a deliberately broken variant that runs the owner's ops on S1's
    device (the plaintext would reach a server)."""
    servers = tp.servers()
    for build, n in ((_front_end, 1), (_embedding, 1)):
        concrete = tp.keras.convert(build()).concrete(2)
        assert graphcheck.plaintext_violations(concrete, servers, n) == []
        assert graphcheck.graph_violations(concrete, servers, {}) == []
        ran = {canon(op.device) for op in concrete.graph.get_operations()
               if op.type in ("Mul", "OneHot")}
        assert ran == {canon(servers["client"])}
    init = owner.Frontier.__init__

    def on_s1(self, *args):
        init(self, *args)
        self.device = servers["S1"]

    monkeypatch.setattr(owner.Frontier, "__init__", on_s1)
    concrete = tp.keras.convert(_front_end()).concrete(2)
    bad = graphcheck.plaintext_violations(concrete, servers, 1)
    assert any("reads the owner's plaintext on S1" in b for b in bad), bad
    assert any("crosses client -> S1" in b for b in
               graphcheck.graph_violations(concrete, servers, {}))
