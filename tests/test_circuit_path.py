"""One circuit path (issue 25): the comparison, the leading-one circuit and
the window-thresholds circuit all run through circuits.run; every send of a
server pair's messages to an assistant goes through assist.send_to_assistant;
protocol choices are methods of the backends, never a test of their name;
the circuit-path modules touch no other module's private names.

The static checks failed on the code before this change (self.name ==
"privpy" in backend.py, rt._keys / rt._pair in garbled.py,
backend._take_gc_stream / _garble_and_ship in circuits.py and garbled.py,
check_stream called in backend.py and circuits.py). A few seconds."""
import ast
import os
import re

import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from tf_privpy.protocols.mpc.privpy import backend as B
from tf_privpy.protocols.mpc.privpy import circuits

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPC = os.path.join(ROOT, "protocols", "mpc")
#: the modules of the circuit path and the four-server protocols around it
CIRCUIT_PATH = ("privpy/assist.py", "privpy/backend.py", "privpy/circuits.py",
                "privpy/garbled.py", "privpy/leading_one.py", "privpy/thresholds.py",
                "privpy/compare.py", "runtime/runtime.py")


def private_reaches(path):
    """`x._name` in a module where x is not self or cls: another object's
    (another module's) private attribute."""
    tree = ast.parse(open(path).read(), path)
    return [f"{os.path.basename(path)}:{n.lineno}: {ast.unparse(n)}" for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr.startswith("_")
            and not n.attr.startswith("__")
            and not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))]


def mpc_modules():
    for dirpath, _, files in os.walk(MPC):
        for f in files:
            if f.endswith(".py"):
                yield os.path.join(dirpath, f)


def test_the_circuit_path_reaches_no_private_names():
    bad = [r for f in CIRCUIT_PATH for r in private_reaches(os.path.join(MPC, f))]
    assert not bad, "private names of other modules:\n" + "\n".join(bad)


def test_no_protocol_is_chosen_by_backend_name():
    bad = [f"{os.path.relpath(p, ROOT)}:{i}: {line.strip()}" for p in mpc_modules()
           for i, line in enumerate(open(p), 1) if re.search(r"\.name\s*(==|!=)", line)]
    assert not bad, "override a Backend method instead:\n" + "\n".join(bad)


@pytest.mark.parametrize("call,home", [
    # the assistants' checks (assist.py), the bitwise dealer's (bitwise/protocol.py)
    ("check_stream(", ("runtime.py", "channel.py", "assist.py", "protocol.py")),
    ("bit_share_assist(", ("circuits.py", "kernels.py")),          # a circuit's re-sharing
    ("garble_and_ship(", ("circuits.py", "garbled.py")),
])
def test_each_protocol_step_is_written_once(call, home):
    bad = [os.path.relpath(p, ROOT) for p in mpc_modules()
           if os.path.basename(p) not in home and call in open(p).read()]
    assert not bad, f"{call} outside {home}: {bad}"


def test_comparison_leading_one_and_thresholds_share_one_path(monkeypatch):
    """Each protocol runs circuits.run once, and each of its two assistant
    rounds (and each multiplication's) is one assist.send_to_assistant.
    Pinned to the garbled family (its comparator is one of the circuits)."""
    tp.reset()
    tp.init(tp.Config(ring_bits=64, comparison="garbled"))
    try:
        be = tp.get_runtime().backend
        runs, sends = [], []
        real_run, real_send = circuits.run, circuits.send_to_assistant

        def run(backend, x, circuit, *a, **k):
            runs.append((circuit.name, circuit.width))
            return real_run(backend, x, circuit, *a, **k)

        def send(*a, **k):
            sends.append(a[1])
            return real_send(*a, **k)

        monkeypatch.setattr(circuits, "run", run)
        monkeypatch.setattr(circuits, "send_to_assistant", send)
        monkeypatch.setattr(B, "send_to_assistant", send)
        f = be.cfg.frac_bits
        v = np.array([-2.5, -0.25, 0.0, 0.5, 3.0, 7.0])
        x = be.share(be.encode(tf.constant(v), "client"))
        lt = be.reveal(be.ltz(x, integer=True)).numpy()
        lo = be.reveal(be.leading_one(x, [f, f + 2])).numpy()
        th = be.reveal(be.thresholds(x, [-(1 << f), 1 << f], integer=True)).numpy()
        be.mul(x, x)
        np.testing.assert_array_equal(lt, (v < 0).astype(np.int64))
        np.testing.assert_array_equal(
            lo, np.stack([np.abs(v) >= 1, np.abs(v) >= 4], 1).astype(np.int64) * (v >= 0)[:, None]
            + np.stack([np.ones(6), np.ones(6)], 1).astype(np.int64) * (v < 0)[:, None])
        np.testing.assert_array_equal(th, np.stack([v < -1, v < 1], 1).astype(np.int64))
        assert [name for name, _ in runs] == ["compare", "leading_one", "thresholds"], runs
        assert runs[0][1] == 64, runs                     # the comparator is 64 bits wide
        assert sends == [0, 1] * 4, sends                 # T1 then T2, four protocol calls
    finally:
        tp.reset()
        tp.init()


def test_one_garbled_op_set_for_every_circuit():
    """The C++ side mirrors the one path: ops/gc registers one op set
    (GcGarble, GcEncode, GcEvaluate, GcMask) whose `circuit` attribute picks
    a row of the circuit table, instead of a set per circuit family (11 ops
    before this change)."""
    gc = os.path.join(ROOT, "ops", "gc")
    regs = sorted(r for f in os.listdir(gc) if f.endswith(".cc")
                  for r in re.findall(r'REGISTER_OP\("TfPrivpy>(\w+)"\)',
                                      open(os.path.join(gc, f)).read()))
    assert regs == ["GcEncode", "GcEvaluate", "GcGarble", "GcMask"], regs
    table = open(os.path.join(gc, "circuit_table.cc")).read()
    for name in ("compare", "leading_one", "thresholds"):
        assert f'{{"{name}", ' in table, name
