"""Each protocol node runs on the device DESIGN §5 gives it (graph check)."""
import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp


def graph_ops(fn, *args):
    return tf.function(fn).get_concrete_function(*args).graph.get_operations()


def device_of(op, servers):
    names = {tf.DeviceSpec.from_string(v).to_string(): k for k, v in servers.items()}
    return names.get(tf.DeviceSpec.from_string(op.device).to_string(), op.device)


@pytest.mark.parametrize("kind", ["mul", "matmul", "conv2d"])
def test_multiplication_placement(ring, kind):
    servers = tp.servers()
    shapes = {"mul": ((4, 4), (4, 4)), "matmul": ((4, 3), (3, 2)),
              "conv2d": ((1, 5, 5, 2), (3, 3, 2, 4))}[kind]
    x, y = tp.share(np.ones(shapes[0])), tp.share(np.ones(shapes[1]))
    fns = {"mul": lambda a, b: a * b, "matmul": lambda a, b: a @ b,
           "conv2d": lambda a, b: tp.nn.conv2d(a, b, 1, "SAME")}
    placed = {}
    for op in graph_ops(fns[kind], x, y):
        if op.type.startswith("TfPrivpy>"):
            party = op.get_attr("party") if op.type in ("TfPrivpy>MulMask",
                                                        "TfPrivpy>MulFinish") else None
            placed.setdefault((op.type, party), []).append(device_of(op, servers))
    placed = {k: sorted(v) for k, v in placed.items()}
    assert placed == {
        # each party takes (key, nonce) of each stream it uses: S1 of S1-S2
        # and S1-T1, S2 of S1-S2 and S2-T2, T1 of S1-T1, T2 of S2-T2
        ("TfPrivpy>StreamNext", None): ["S1", "S1", "S2", "S2", "T1", "T2"],
        ("TfPrivpy>MulMask", 0): ["S1"], ("TfPrivpy>MulMask", 1): ["S2"],
        ("TfPrivpy>MulAssist", None): ["T1", "T2"],
        ("TfPrivpy>MulFinish", 0): ["S1"], ("TfPrivpy>MulFinish", 1): ["S2"],
    }


def test_share_and_reveal_placement(ring):
    servers = tp.servers()
    ops = graph_ops(lambda a: tp.share(a).reveal(), tf.TensorSpec([3], tf.float32))
    placed = {op.type: device_of(op, servers) for op in ops if op.type.startswith("TfPrivpy>")}
    assert placed["TfPrivpy>RingEncode"] == "client"
    assert placed["TfPrivpy>ShareSplit"] == "client"
    assert placed["TfPrivpy>RingDecode"] == "client"


def test_local_ops_stay_on_share_holders(ring):
    servers = tp.servers()
    x = tp.share(np.ones((2, 3)))
    ops = graph_ops(lambda a: tp.reduce_sum(a * 2.0 + 1.0, 0), x)
    devices = {device_of(op, servers) for op in ops if op.type.startswith("TfPrivpy>")}
    assert devices == {"S1", "S2"}
