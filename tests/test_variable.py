"""tp.Variable: private weights kept in TF state on S1 and S2 between steps,
read and assigned by each server on its own device, saved and restored per
server (protocols/mpc/api/variable.py, protocols/mpc/api/checkpoint.py)."""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

import graphcheck
import tf_privpy as tp
from conftest import run
from tolerances import encode_tol, matmul_tol, mul_tol
from tolerances_training import sgd_tol


def frac(ring):
    return tp.get_runtime().config.frac_bits


def close(got, want, tol):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    err = np.abs(got - want)
    assert np.all(err <= tol), f"max error {err.max():.3g} > tolerance {np.min(tol):.3g}"


def storage_shape(shape, ring):
    return list(shape) + ([2] if ring == 128 else [])


# ------------------------------------------------------------- creation
def test_holds_its_shares_in_one_variable_per_server(ring, rng):
    x = rng.uniform(-2, 2, (3, 2))
    v = tp.Variable(tp.share(x), name="dense/kernel")
    servers = tp.servers()
    assert v.name == "dense/kernel" and v.shape == (3, 2) and v.ndim == 2
    assert v.dtype == tf.float64 and v.trainable and len(v) == 3
    for i, (sv, party) in enumerate(zip(v.share_variables, ("S1", "S2"))):
        assert graphcheck.canon(sv.device) == graphcheck.canon(servers[party])
        assert sv.dtype == tf.int64 and sv.shape == storage_shape((3, 2), ring)
        assert not sv.trainable  # TF's optimizers never touch a share
        assert sv.name.startswith(f"dense/kernel/share{i}")
    p = v.read_value()
    assert isinstance(p, tp.PrivateTensor) and p.ring_bits == ring
    close(p.reveal(), x, encode_tol(frac(ring)))
    close(v.value().reveal(), x, encode_tol(frac(ring)))
    assert "share" not in repr(v) and str(x[0, 0])[:6] not in repr(v)


def test_plain_initial_values_are_shared_by_the_client(ring):
    v = tp.Variable([[1.5, -2.0]], trainable=False)
    assert v.dtype == tf.float32 and v.name == "Variable" and not v.trainable
    np.testing.assert_array_equal(v.reveal(), [[1.5, -2.0]])
    assert tp.Variable(np.arange(3), dtype=tf.float32).dtype == tf.float32
    assert tp.Variable(tp.Variable([1, 2])).dtype == tf.int32


# ------------------------------------------------------ training updates
def test_sgd_steps_in_a_tf_function_match_numpy(ring, mode, rng):
    """w.assign_sub(lr * grad) with a private grad, run several times: each
    run updates the shares held on S1 and S2 (the function is traced once)."""
    lr = 0.05
    w0 = rng.uniform(-2, 2, (3, 2))
    grads = [rng.uniform(-3, 3, (3, 2)) for _ in range(4)]
    w = tp.Variable(tp.share(w0), name="w")

    def step(g):
        w.assign_sub(lr * g, read_value=False)

    fn = step if mode == "eager" else tf.function(step)
    want = w0.copy()
    for k, g in enumerate(grads):
        fn(tp.share(g))
        want = want - lr * g
        close(w.reveal(), want, sgd_tol(w0, grads[:k + 1], lr, frac(ring)))
    if mode == "tf_function":
        assert fn.experimental_get_tracing_count() == 1


def test_assign_variants(ring, mode, rng):
    a, b = rng.uniform(-2, 2, (2, 3)), rng.uniform(-2, 2, (2, 3))
    v = tp.Variable(tp.share(a), name="v")
    other = tp.Variable(tp.share(b), name="other")
    pa, pb = tp.share(a), tp.share(b)
    tol = encode_tol(frac(ring))

    def body(pa, pb):
        r1 = v.assign(pb)                      # returns the new value
        r2 = v.assign_add(pa)                  # b + a, private delta
        r3 = v.assign_sub(1.5)                 # public delta, broadcast
        r4 = v.assign_add(other)               # a variable as delta
        return r1, r2, r3, r4

    r1, r2, r3, r4 = run(mode, body, pa, pb)
    close(r1.reveal(), b, tol)
    close(r2.reveal(), a + b, 2 * tol)
    close(r3.reveal(), a + b - 1.5, 2 * tol)
    close(r4.reveal(), a + 2 * b - 1.5, 3 * tol)
    close(v.reveal(), a + 2 * b - 1.5, 3 * tol)
    run(mode, lambda: v.assign(a, read_value=False))
    close(v.reveal(), a, tol)  # plain values are shared by the client first


def test_ops_read_the_variable(ring, mode, rng):
    a, x = rng.uniform(-2, 2, (3, 2)), rng.uniform(-2, 2, (2, 3))
    v = tp.Variable(tp.share(a), name="v")
    px = tp.share(x)
    f = frac(ring)

    def body(v, px):
        return (v * tp.transpose(px), px @ v, tp.matmul(v, px),
                tf.matmul(v, px), v + 1.0, -v, v[0], tf.concat([v, v], 0), tf.reduce_sum(v, 0),
                tf.nn.relu(v), 2.0 * v)

    (mul, xv, vx, tf_vx, plus, neg, row, cat, red, relu, dbl) = run(mode, body, v, px)
    close(mul.reveal(), a * x.T, mul_tol(a, x.T, f))
    close(xv.reveal(), x @ a, matmul_tol(x, a, f))
    close(vx.reveal(), a @ x, matmul_tol(a, x, f))
    close(tf_vx.reveal(), a @ x, matmul_tol(a, x, f))
    close(plus.reveal(), a + 1.0, 2 * encode_tol(f))
    close(neg.reveal(), -a, encode_tol(f))
    close(row.reveal(), a[0], encode_tol(f))
    close(cat.reveal(), np.concatenate([a, a]), encode_tol(f))
    close(red.reveal(), a.sum(0), 3 * encode_tol(f))
    close(relu.reveal(), np.maximum(a, 0), encode_tol(f) + 2 * 2.0 ** -f)
    close(dbl.reveal(), 2 * a, 2 * encode_tol(f) + 2 * 2.0 ** -f)
    close((np.ones((3, 2)) * v).reveal(), a, encode_tol(f) + 2 * 2.0 ** -f)
    close(v.reveal(), a, encode_tol(f))
    close(tp.reveal(v), a, encode_tol(f))


# -------------------------------------------------------------- placement
def _sgd_step(w):
    def step(g):
        return w.assign_sub(0.1 * g)
    return step


def test_read_and_assign_run_on_the_share_holders(ring):
    servers = tp.servers()
    w = tp.Variable(tp.share(np.ones((3, 2))), name="w")
    g = tp.share(np.ones((3, 2)))
    concrete = tf.function(_sgd_step(w), autograph=False).get_concrete_function(g)
    bad = graphcheck.graph_violations(concrete, servers, graphcheck.share_inputs(concrete, 1))
    assert not bad, "\n".join(bad[:20])
    placed = {}
    for op in concrete.graph.get_operations():
        if op.type in ("ReadVariableOp", "AssignVariableOp"):
            placed.setdefault(op.type, []).append(
                graphcheck.Parties(servers).of(op.device))
    assert sorted(placed["AssignVariableOp"]) == ["S1", "S2"]
    assert set(placed["ReadVariableOp"]) <= {"S1", "S2"}
    # eagerly: every op that touches a share variable runs on its server
    rec = graphcheck.EagerRecorder(servers, [g.share0, g.share1])
    with rec.active():
        _sgd_step(w)(g)
    assert ("AssignVariableOp", "S1") in rec.ran and ("AssignVariableOp", "S2") in rec.ran
    assert not rec.violations, "\n".join(rec.violations[:20])


def test_the_check_sees_a_share_variable_read_off_its_server(ring):
    w = tp.Variable(tp.share(np.ones((2,))), name="w")

    def leak():  # S1's share variable read with no device scope: on the client
        return [w.share_variables[0].read_value() + 1]

    concrete = tf.function(leak).get_concrete_function()
    bad = graphcheck.graph_violations(concrete, tp.servers(), {})
    assert any("runs on client" in b for b in bad), bad


# ------------------------------------------------------------------ errors
def test_assign_errors(ring, mode):
    v = tp.Variable(tp.share(np.zeros((2, 3))), name="v")
    wrong = tp.share(np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"'v'.assign: the variable has shape \(2, 3\), the "
                                         r"new value has shape \(3, 2\)"):
        run(mode, lambda p: v.assign(p), wrong)
    with pytest.raises(ValueError, match=r"assign_add: the variable has shape \(2, 3\), the "
                                         r"delta has shape \(4,\)"):
        run(mode, lambda: v.assign_add(np.ones(4)))
    with pytest.raises(ValueError, match="shape"):  # broadcasting may not grow it
        run(mode, lambda p: v.assign_sub(p), tp.share(np.zeros((2, 2, 3))))
    with pytest.raises(ValueError, match="shape"):
        v.assign([1.0, 2.0, 3.0])  # a plain value is not broadcast either
    i = tp.Variable([1, 2], name="i")
    with pytest.raises(TypeError, match="float value does not fit an integer variable"):
        i.assign(tp.share([1.5, 2.5]))
    with pytest.raises(TypeError, match="float"):
        i.assign([1.5, 2.5])
    i.assign(tp.share(np.array([3, 4], np.int64)))  # integers of another width: fine
    np.testing.assert_array_equal(i.reveal(), [3, 4])
    with pytest.raises(TypeError, match="PrivateTensor, a tp.Variable or plain values"):
        v.assign(tf.Variable(tf.zeros((2, 3))))
    np.testing.assert_array_equal(v.reveal(), np.zeros((2, 3)))  # nothing was assigned


def test_no_plaintext_conversion_and_no_truth_value(ring):
    v = tp.Variable(tp.share([1.0, 2.0]), name="v")
    with pytest.raises(TypeError, match="tp.Variable .* cannot be converted"):
        tf.convert_to_tensor(v)
    with pytest.raises(TypeError, match="tf.math.cos is not supported on PrivateTensors"):
        tf.math.cos(v)
    with pytest.raises(TypeError, match="no truth value"):
        bool(v)
    with pytest.raises((TypeError, ValueError)):  # not a TF trackable: both shares in one file
        tf.train.Checkpoint(w=v)


def test_values_of_another_runtime_are_refused(ring):
    old_value = tp.share([1.0, 2.0])
    old_var = tp.Variable([1.0, 2.0], name="old")
    tp.reset()
    tp.init(tp.Config(ring_bits=ring))
    v = tp.Variable([0.0, 0.0], name="v")
    with pytest.raises(ValueError, match="runtime #.* is active"):
        v.assign(old_value)
    with pytest.raises(ValueError, match="'old' was created by tf_privpy runtime"):
        old_var.read_value()
    with pytest.raises(ValueError, match="tp.save_variables"):
        v.assign_add(old_var)
    with pytest.raises(ValueError, match="created by tf_privpy runtime"):
        tp.share([1.0, 1.0]) * old_var


def test_created_from_a_traced_value_is_refused(ring):
    @tf.function
    def make(p):
        return tp.Variable(p * 2.0)

    with pytest.raises(ValueError, match="create the variable outside"):
        make(tp.share([1.0]))


# ------------------------------------------------------ save and restore
def _files(path):
    out = {}
    for d, _, fs in os.walk(path):
        for f in fs:
            with open(os.path.join(d, f), "rb") as fh:
                out[os.path.join(d, f)] = fh.read()
    return out


def _words(share: np.ndarray):
    """The share's 8-byte ring words (each uniform: no collision by chance)."""
    return {share.astype("<i8").tobytes()[i:i + 8] for i in range(0, share.size * 8, 8)}


def test_each_server_writes_only_its_own_shares(ring, tmp_path, rng):
    w = tp.Variable(tp.share(rng.uniform(-2, 2, (4, 3))), name="w")
    b = tp.Variable(tp.share(rng.uniform(-2, 2, (3,))), name="b")
    root = str(tmp_path / "ckpt")
    servers = tp.servers()
    rec = graphcheck.EagerRecorder(servers, [])
    with rec.active():
        assert tp.save_variables([w, b], root) == root
    assert not rec.violations, rec.violations
    for op in ("WriteFile", "SaveV2"):  # each server's files by ops on that server
        assert sorted(p for t, p in rec.ran if t == op) == ["S1", "S2"], rec.ran
    assert sorted(os.listdir(root)) == ["S1", "S2"]
    shares = [np.concatenate([v.share_variables[i].numpy().ravel() for v in (w, b)])
              for i in range(2)]
    own, other = {}, {}
    for i, d in enumerate(("S1", "S2")):
        files = _files(os.path.join(root, d))
        assert set(os.path.basename(f) for f in files) == {
            "tp_variables.json", "shares.index", "shares.data-00000-of-00001"}
        blob = b"".join(files.values())
        own[d] = sum(wd in blob for wd in _words(shares[i]))
        other[d] = sum(wd in blob for wd in _words(shares[1 - i]))
    n = shares[0].size
    assert own == {"S1": n, "S2": n}       # the check finds a share where it is
    assert other == {"S1": 0, "S2": 0}     # and no word of the other server's share
    meta = json.load(open(os.path.join(root, "S2", "tp_variables.json")))
    assert meta["share"] == 1 and meta["ring_bits"] == ring
    assert meta["variables"]["w"] == {"shape": [4, 3], "dtype": "float64", "name": "w",
                                      "trainable": True}


def test_round_trip_is_bit_identical(ring, tmp_path, rng):
    x = rng.uniform(-2, 2, (4, 3))
    w = tp.Variable(tp.share(x), name="w")
    i = tp.Variable(np.arange(5), name="i")
    before = [[sv.numpy() for sv in v.share_variables] for v in (w, i)]
    revealed = [w.reveal().numpy(), i.reveal().numpy()]
    root = str(tmp_path)
    tp.save_variables({"layer/w": w, "layer/i": i}, root)
    w.assign(np.zeros((4, 3)))
    i.assign_add(7)
    tp.restore_variables({"layer/w": w, "layer/i": i}, root)
    for v, shares in zip((w, i), before):
        for sv, s in zip(v.share_variables, shares):
            np.testing.assert_array_equal(sv.numpy(), s)
    np.testing.assert_array_equal(w.reveal(), revealed[0])
    np.testing.assert_array_equal(i.reveal(), revealed[1])


def test_restored_variable_works_with_fresh_keys(ring, tmp_path, rng):
    """Shares do not depend on the PRG keys: after tp.reset(); tp.init() the
    restored variable is the same value, and products with it are right."""
    a, x = rng.uniform(-2, 2, (3, 2)), rng.uniform(-2, 2, (4, 3))
    w = tp.Variable(tp.share(a), name="w")
    shares = [sv.numpy() for sv in w.share_variables]
    tp.save_variables([w], str(tmp_path))
    tp.reset()
    tp.init(tp.Config(ring_bits=ring))
    fresh = tp.Variable(tf.zeros((3, 2), tf.float64), name="w")
    tp.restore_variables([fresh], str(tmp_path))
    for sv, s in zip(fresh.share_variables, shares):
        np.testing.assert_array_equal(sv.numpy(), s)
    f = frac(ring)
    close(fresh.reveal(), a, encode_tol(f))
    close((tp.share(x) @ fresh).reveal(), x @ a, matmul_tol(x, a, f))
    fresh.assign_sub(0.5 * tp.share(np.ones((3, 2))))
    close(fresh.reveal(), a - 0.5, sgd_tol(a, [np.ones((3, 2))], 0.5, f))


def test_checkpoint_over_sealed_links(tmp_path, rng):
    """With every link sealed (as in distributed mode) a save and a restore
    into a fresh runtime are bit-exact: paths and metadata reach the servers
    as constants on their devices, not as channel messages, and the
    metadata comes back as sealed bytes. Before issue 24 both failed here
    ("cannot seal ... string": the channel seals numbers only)."""
    tp.reset()
    tp.init(tp.Config(encrypt_links=True))
    try:
        rt = tp.get_runtime().runtime
        assert "S1->client" in rt.channels.secured()
        x = rng.uniform(-2, 2, (3, 2))
        w = tp.Variable(tp.share(x), name="w")
        shares = [sv.numpy() for sv in w.share_variables]
        before = rt.channels.counts()
        tp.save_variables([w], str(tmp_path))
        assert rt.channels.counts() == before  # nothing crossed: each server wrote its own
        tp.reset()
        tp.init(tp.Config(encrypt_links=True))
        fresh = tp.Variable(np.zeros((3, 2)), name="w")
        rt = tp.get_runtime().runtime
        before = rt.channels.counts()
        tp.restore_variables([fresh], str(tmp_path))
        for sv, s in zip(fresh.share_variables, shares):
            np.testing.assert_array_equal(sv.numpy(), s)
        moved = {k: (c[0] - before[k][0], c[1] - before[k][1])
                 for k, c in rt.channels.counts().items() if c != before[k]}
        # only the two metadata files came back (a few hundred bytes each)
        assert set(moved) == {("S1", "client"), ("S2", "client")}, moved
        assert all(m == 1 and n < 2048 for m, n in moved.values()), moved
    finally:
        tp.reset()
        tp.init()


def _saved(tmp_path, name="ckpt", shape=(2, 3)):
    root = str(tmp_path / name)
    v = tp.Variable(tp.share(np.full(shape, 1.25)), name="v")
    tp.save_variables([v], root)
    return root, v


def test_restore_refuses_what_does_not_fit(ring, tmp_path):
    root, v = _saved(tmp_path)
    v.assign(np.full((2, 3), 7.0))
    with pytest.raises(tp.CheckpointError, match=r"'v' was saved with shape \(2, 3\), the "
                                                 r"variable has shape \(3, 2\)"):
        tp.restore_variables([tp.Variable(np.zeros((3, 2)), name="v")], root)
    with pytest.raises(tp.CheckpointError, match=r"has no variable \['u'\]; it holds \['v'\]"):
        tp.restore_variables({"u": v}, root)
    with pytest.raises(tp.CheckpointError, match="saved as float64, the variable is int32"):
        tp.restore_variables([tp.Variable(np.zeros((2, 3), np.int32), name="v")], root)
    with pytest.raises(FileNotFoundError, match="no tf_privpy checkpoint of S1's shares"):
        tp.restore_variables([v], str(tmp_path / "nowhere"))
    # one server's directory missing
    os.rename(os.path.join(root, "S2"), os.path.join(root, "gone"))
    with pytest.raises(FileNotFoundError, match="S2's shares at .*S2"):
        tp.restore_variables([v], root)
    # swapped server directories
    os.rename(os.path.join(root, "S1"), os.path.join(root, "S2"))
    os.rename(os.path.join(root, "gone"), os.path.join(root, "S1"))
    with pytest.raises(tp.CheckpointError, match="swapped"):
        tp.restore_variables([v], root)
    # S1's directory from one save, S2's from another
    other, _ = _saved(tmp_path, "other")
    mixed = str(tmp_path / "mixed")
    os.makedirs(mixed)
    os.rename(os.path.join(root, "S2"), os.path.join(mixed, "S1"))
    os.rename(os.path.join(other, "S2"), os.path.join(mixed, "S2"))
    with pytest.raises(tp.CheckpointError, match="different saves"):
        tp.restore_variables([v], mixed)
    # no failed restore changed the variable
    np.testing.assert_array_equal(v.reveal(), np.full((2, 3), 7.0))


@pytest.mark.parametrize("change", ["ring", "frac_bits", "backend"])
def test_restore_refuses_another_config(ring, tmp_path, change):
    root, _ = _saved(tmp_path)
    config = {"ring": tp.Config(ring_bits=192 - ring),
              "frac_bits": tp.Config(ring_bits=ring, frac_bits=12),
              "backend": tp.Config(ring_bits=ring, backend="plaintext")}[change]
    tp.reset()
    tp.init(config)
    v = tp.Variable(np.zeros((2, 3)), name="v")
    with pytest.raises(tp.CheckpointError, match=f"was saved with ring 2\\^{ring}.*"
                                                 "Restore it in a runtime with that config"):
        tp.restore_variables([v], root)


def test_save_arguments(ring, tmp_path):
    a, b = tp.Variable([1.0], name="same"), tp.Variable([2.0], name="same")
    with pytest.raises(ValueError, match="two variables named 'same'"):
        tp.save_variables([a, b], str(tmp_path))
    with pytest.raises(TypeError, match="takes tp.Variables"):
        tp.save_variables([tp.share([1.0])], str(tmp_path))
    with pytest.raises(ValueError, match="not a usable checkpoint key"):
        tp.save_variables({"_tp/id": a}, str(tmp_path))
    with pytest.raises(RuntimeError, match="outside tf.function"):
        tf.function(lambda: tp.save_variables([a], str(tmp_path)))()
    tp.save_variables({"a": a, "b": b}, str(tmp_path))
    b.assign([0.0])
    tp.restore_variables({"b": b}, str(tmp_path))  # a subset restores
    np.testing.assert_array_equal(b.reveal(), [2.0])
