"""Child process of tests/test_federated_convert.py's placement test: a
runtime with a driver and three data-owner devices (the session's runtime
has one client device), one mpc round of a converted federated step run with
TF's run metadata, and every cross-device transfer of its partition graphs
checked: what leaves a client's device goes to S1 or S2 and is a share
(TfPrivpy>ShareSplit's output), nothing goes to T1 or T2 or to another data
owner (TF's empty carriers of control edges aside). Argument `broken`: the same round with a client's plaintext update
also sent to S1 through the channel (the check must catch it). Prints a JSON
list of violations."""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import graphcheck  # noqa: E402
import tf_privpy as tp  # noqa: E402
from tf_privpy.protocols.mpc.runtime.placement import canon  # noqa: E402


def main(broken: bool) -> list:
    tp.init(num_clients=4)
    devices = tp.servers()
    for i in range(1, 4):
        devices[f"client{i}"] = tp.get_runtime().runtime.devices[f"client{i}"]
    party = {canon(v): k for k, v in devices.items()}

    def step(x0, x1, x2):   # each client's update is computed on its device
        u = [tf.tanh(x) * 0.5 for x in (x0, x1, x2)]
        return (1.0 * u[0] + 2.0 * u[1] + 3.0 * u[2]) / 6.0

    spec = tf.TensorSpec([8], tf.float32)
    fed = tp.federated.convert(step, [spec] * 3, tp.federated.FederatedPolicy(clients=3))
    if broken:
        rt = tp.get_runtime().runtime
        honest = fed._mpc_aggregate

        def leaky(red, values, present):
            acc = honest(red, values, present)
            for c in present:
                owner = fed.parties()[c]
                u = fed._update(red, values, c, rt.devices[owner])
                leak = rt.send1(owner, "S1", u)   # a client's plaintext update to S1
                with tf.device(rt.devices["S1"]):
                    acc = acc + tf.reduce_sum(leak) * 1e-9
            return acc
        fed._mpc_aggregate = leaky
    xs = [np.linspace(-1, 1, 8, dtype=np.float32) * (i + 1) for i in range(3)]
    (out, report), md = graphcheck.run_metadata(fed.run, *xs)
    want = step(*[tf.constant(x) for x in xs]).numpy()
    assert np.allclose(out, want, atol=1e-4), (out, want)
    bad = []
    if (report.bytes_up_per_client, report.bytes_down_per_client) != fed.bytes_per_client() \
            or report.bytes_up_per_client != 2 * 16 * 8:
        bad.append(f"measured {report} != declared {fed.bytes_per_client()}")
    parts = [pg for fg in md.function_graphs for pg in fg.partition_graphs]
    assert parts, "no partition graph recorded"
    for pg in parts:
        nodes = {n.name: n for n in pg.node}
        for n in pg.node:
            if n.op != "_Send":
                continue
            src = party.get(canon(n.device), n.device)
            dst = party.get(canon(n.attr["recv_device"].s.decode()), "?")
            if not src.startswith("client") or src == dst:
                continue
            producer = nodes[n.input[0].split(":")[0]]
            if producer.op == "Const" and all(i.startswith("^") for i in producer.input):
                # TF's carrier of a control edge (tf.function orders stateful
                # ops such as the clients' ShareSplit): an empty constant, no data
                continue
            if dst in ("S1", "S2") and producer.op == "TfPrivpy>ShareSplit":
                continue
            bad.append(f"{producer.name} ({producer.op}) on {src} is sent to {dst}")
    return bad


if __name__ == "__main__":
    print(json.dumps(main(len(sys.argv) > 1 and sys.argv[1] == "broken")))
