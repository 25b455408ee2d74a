"""Optimizer passes on the frozen GraphDef (DESIGN §8, PrivPy §5.6 and §6.2).

PrivPy's front-end rewrites a program's AST before the servers run it
(§6.2: vectorisation, common factor extraction, expression vectorisation)
and offers array, public-product and dot POs (§5.6). Here the same ideas
run on the traced graph, between `trace` and `analyse`, so every model or
tf.function converted gets them without the user rewriting anything. Each
pass returns how many places it changed; `convert(..., passes=...)` turns
them on or off (default: all on) and `PrivateModel.summary()` lists them.

  owner_constants     subgraphs of weights only are computed by the model
                      owner in plaintext and shared as one weight
  fold_batchnorm      BatchNorm folded into the preceding Conv2D / Dense /
                      DepthwiseConv2D (new kernel and bias)
  relu_after_maxpool  MaxPool(f(x)) -> f(MaxPool(x)) for monotone f
  public_products     documented no-op (products by public values are
                      already local in the registry)
  factor_common       a·b + a·c -> a·(b + c)
  sum_to_dot          Sum(x·y, last axis) -> one matrix product
  batch_same_depth    in evaluate(): independent private products, ReLUs
                      and comparisons of one depth in one protocol call

Passes that change arithmetic (folding, factoring, dot) change rounding
only: outputs stay within the same error bounds (tests/test_passes.py).
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Dict, Iterable, List, Optional, Set, Tuple, Union

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import op_def_registry

from .trace import Traced, private_nodes, topo

GRAPH_PASSES = ("owner_constants", "fold_batchnorm", "relu_after_maxpool", "public_products",
                "factor_common", "sum_to_dot")
#: applied while the private graph is built (rewrite.evaluate), not on the GraphDef
EVAL_PASSES = ("batch_same_depth",)
ALL_PASSES = GRAPH_PASSES + EVAL_PASSES

#: ops whose private implementation sends nothing (sums, shapes, selections
#: of shares); everything else private is counted as one level of depth
LOCAL_OPS = {"Add", "AddV2", "Sub", "Neg", "BiasAdd", "BiasAddV1", "Reshape", "Transpose",
             "ExpandDims", "Squeeze", "Pad", "PadV2", "ConcatV2", "Pack", "Tile", "GatherV2",
             "BroadcastTo", "Shape", "StridedSlice", "Sum", "Mean", "AvgPool", "Identity",
             "IdentityN", "StopGradient", "PreventGradient", "Snapshot", "Const",
             "Placeholder", "NoOp", "LogicalNot"}


def resolve(passes) -> Tuple[str, ...]:
    """The enabled passes from convert()'s `passes` argument: None or True
    (all), False or () (none), an iterable of names (those), or a mapping
    name -> bool (all, with those set to False turned off)."""
    if passes is None or passes is True:
        return ALL_PASSES
    if passes is False:
        return ()
    if isinstance(passes, str):
        passes = [passes]
    if isinstance(passes, dict):
        unknown = set(passes) - set(ALL_PASSES)
        chosen = [p for p in ALL_PASSES if passes.get(p, True)]
    else:
        passes = list(passes)
        unknown = set(passes) - set(ALL_PASSES)
        chosen = [p for p in ALL_PASSES if p in passes]
    if unknown:
        raise ValueError(f"unknown pass(es) {sorted(unknown)}; passes are {list(ALL_PASSES)}")
    return tuple(chosen)


# ------------------------------------------------------------------ graph
def _tensor(name: str) -> str:
    """'node' and 'node:0' are the same tensor."""
    node, _, idx = name.partition(":")
    return f"{node}:{idx or 0}"


def _node_of(name: str) -> str:
    return name.lstrip("^").partition(":")[0]


class _Graph:
    """A mutable view of a GraphDef with its consumers, for pattern rewrites."""

    def __init__(self, traced: Traced):
        self.t = traced
        self.gd = traced.graph_def
        self.nodes = {n.name: n for n in self.gd.node}

    def consumers(self, tensor: str) -> List[Tuple[object, int]]:
        """(node, input index) of every data use of `tensor`; the graph's
        outputs count as uses by (None, i)."""
        t = _tensor(tensor)
        uses = [(n, i) for n in self.gd.node for i, inp in enumerate(n.input)
                if not inp.startswith("^") and _tensor(inp) == t]
        uses += [(None, i) for i, o in enumerate(self.t.outputs) if _tensor(o) == t]
        return uses

    def node_uses(self, name: str) -> int:
        """Data uses of any output of node `name`."""
        return sum(1 for n in self.gd.node for inp in n.input
                   if not inp.startswith("^") and _node_of(inp) == name) + \
            sum(1 for o in self.t.outputs if _node_of(o) == name)

    def only_use(self, name: str) -> bool:
        return self.node_uses(name) == 1

    def redirect(self, old: str, new: str, skip: Optional[str] = None) -> None:
        """Every use of tensor `old` reads `new` instead (but node `skip`)."""
        t = _tensor(old)
        for n in self.gd.node:
            if n.name == skip:
                continue
            for i, inp in enumerate(n.input):
                if not inp.startswith("^") and _tensor(inp) == t:
                    n.input[i] = new
        self.t.outputs = [new if _tensor(o) == t else o for o in self.t.outputs]

    def through_identity(self, tensor: str) -> str:
        """The tensor an Identity chain forwards."""
        n = self.nodes.get(_node_of(tensor))
        while n is not None and n.op == "Identity":
            tensor = n.input[0]
            n = self.nodes.get(_node_of(tensor))
        return tensor

    def const(self, tensor: str) -> Optional[Tuple[str, np.ndarray]]:
        """(const node name, value) if `tensor` is a constant (through Identity)."""
        n = self.nodes.get(_node_of(self.through_identity(tensor)))
        if n is None or n.op != "Const":
            return None
        if n.name in self.t.weights:
            return n.name, self.t.weights[n.name]
        return n.name, tf.make_ndarray(n.attr["value"].tensor)

    def is_weight(self, tensor: str) -> bool:
        c = self.const(tensor)
        return c is not None and c[0] in self.t.weights

    def add_const(self, name: str, value: np.ndarray, dtype: tf.DType, weight: bool,
                  layer: str = "") -> str:
        """A new Const node; a weight (private under the policy) if `weight`,
        holding the exact (float64) value in traced.weights."""
        while name in self.nodes:
            name += "_"
        nd = self.gd.node.add()
        nd.name, nd.op = name, "Const"
        nd.attr["dtype"].type = dtype.as_datatype_enum
        nd.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(
            np.asarray(value).astype(dtype.as_numpy_dtype)))
        self.nodes[name] = nd
        if weight:
            self.t.weights[name] = np.asarray(value)
        self.t.layer_of[name] = layer
        return name

    def add_node(self, name: str, op: str, inputs: List[str], layer: str = "",
                 **attrs) -> object:
        while name in self.nodes:
            name += "_"
        nd = self.gd.node.add()
        nd.name, nd.op = name, op
        nd.input.extend(inputs)
        for k, v in attrs.items():
            if isinstance(v, tf.compat.v1.AttrValue):
                nd.attr[k].CopyFrom(v)
            elif isinstance(v, tf.DType):
                nd.attr[k].type = v.as_datatype_enum
            elif isinstance(v, bool):
                nd.attr[k].b = v
            elif isinstance(v, str):
                nd.attr[k].s = v.encode()
        self.nodes[name] = nd
        self.t.layer_of[name] = layer
        return nd

    def replace(self, node, op: str, inputs: List[str], **attrs) -> None:
        """Turns `node` into another op in place, keeping its name (so its
        consumers need no change)."""
        node.op = op
        del node.input[:]
        node.input.extend(inputs)
        keep = {k: node.attr[k] for k in ("T",) if k in node.attr}
        node.attr.clear()
        for k, v in keep.items():
            node.attr[k].CopyFrom(v)
        for k, v in attrs.items():
            if isinstance(v, tf.compat.v1.AttrValue):
                node.attr[k].CopyFrom(v)
            elif isinstance(v, tf.DType):
                node.attr[k].type = v.as_datatype_enum
            elif isinstance(v, bool):
                node.attr[k].b = v

    def prune(self) -> None:
        """Drops nodes the outputs no longer need (the inputs stay)."""
        keep, stack = set(self.t.inputs), [_node_of(o) for o in self.t.outputs]
        while stack:
            name = stack.pop()
            if name in keep or name not in self.nodes:
                continue
            keep.add(name)
            stack.extend(_node_of(i) for i in self.nodes[name].input)
        kept = [n for n in self.gd.node if n.name in keep]
        del self.gd.node[:]
        self.gd.node.extend(kept)
        self.nodes = {n.name: n for n in self.gd.node}
        for w in [w for w in self.t.weights if w not in keep]:
            del self.t.weights[w]

    def shapes(self) -> Dict[str, tf.TensorShape]:
        """Static shapes of every tensor, by importing the graph once."""
        g = tf.Graph()
        with g.as_default():
            tf.graph_util.import_graph_def(self.gd, name="")
        return {t.name: t.shape for op in g.get_operations() for t in op.outputs}

    def topo(self) -> List[object]:
        return topo(self.gd)


# ------------------------------------------------------------------ passes
def owner_constants(g: _Graph, policy) -> int:
    """A node computed from weights (and constants) only is the model
    owner's plaintext: it is computed at conversion and shared as one new
    weight, instead of privately on shared weights (a Keras BatchNorm on a
    Dense output computes rsqrt(var + eps)·gamma, which would otherwise be a
    private inverse square root). The frontier nodes (those read by a node
    that depends on the input) are folded; the rest is pruned."""
    const, weighty = set(), set()
    for n in g.topo():
        data = [_node_of(i) for i in n.input if not i.startswith("^")]
        if n.op == "Const":
            const.add(n.name)
            if n.name in g.t.weights:
                weighty.add(n.name)
        elif n.op not in ("Placeholder", "NoOp") and data and all(d in const for d in data):
            op_def = op_def_registry.get(n.op)
            if op_def is None or op_def.is_stateful or len(op_def.output_arg) != 1 \
                    or op_def.output_arg[0].number_attr or op_def.output_arg[0].type_list_attr:
                continue
            const.add(n.name)
            if any(d in weighty for d in data):
                weighty.add(n.name)
    frontier = []
    for n in g.gd.node:
        for i in n.input:
            s = _node_of(i)
            if not i.startswith("^") and n.name not in const and s in weighty and \
                    g.nodes[s].op not in ("Const", "Identity") and s not in frontier:
                frontier.append(s)
    if not frontier:
        return 0
    need, stack = set(), list(frontier)
    while stack:
        name = stack.pop()
        if name not in need:
            need.add(name)
            stack.extend(_node_of(i) for i in g.nodes[name].input)
    sub = tf.compat.v1.GraphDef(node=[n for n in g.gd.node if n.name in need])
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(sub, name="")
    with tf.compat.v1.Session(graph=graph) as sess:
        values = sess.run([f + ":0" for f in frontier])
    for name, v in zip(frontier, values):
        node = g.nodes[name]
        layer = g.t.layer_of.get(name, "")
        new = g.add_const(name + "/owner_folded", v, tf.as_dtype(v.dtype), True, layer)
        g.redirect(name, new)
    g.prune()
    return len(frontier)


_PRODUCERS = ("Conv2D", "MatMul", "DepthwiseConv2dNative")


def _affine_after(g: _Graph, node) -> Optional[Tuple[str, np.ndarray, np.ndarray, bool]]:
    """(input tensor y, per-channel a, b, whether a or b come from weights) if `node` computes
    y·a + b with a and b known to the model owner: an inference
    FusedBatchNorm, or Keras's unfused BatchNorm (rank-2 input) y·M + S."""
    if node.op.startswith("FusedBatchNorm"):
        if node.attr["is_training"].b or \
                node.attr["data_format"].s.decode() not in ("", "NHWC"):
            return None
        if len(node.input) < 5:
            return None
        params = [g.const(i) for i in node.input[1:5]]
        if any(p is None for p in params):
            return None
        # only output 0 may be used in inference (the others are batch statistics)
        if any(_tensor(i) != f"{node.name}:0" for n in g.gd.node for i in n.input
               if not i.startswith("^") and _node_of(i) == node.name):
            return None
        scale, offset, mean, var = (p[1].astype(np.float64) for p in params)
        eps = node.attr["epsilon"].f if "epsilon" in node.attr else 1e-3
        a = scale / np.sqrt(var + eps)
        return node.input[0], a, offset - mean * a, any(p[0] in g.t.weights for p in params)
    if node.op in ("AddV2", "Add") or node.op == "Mul":
        weight = False
        if node.op == "Mul":
            mul, b = node, None
            use = g.consumers(node.name)
            if len(use) == 1 and use[0][0] is not None and use[0][0].op in ("Add", "AddV2") \
                    and any(g.const(i) is not None for i in use[0][0].input):
                return None  # folded with its offset when the Add is visited
        else:
            for k in (0, 1):
                m = g.nodes.get(_node_of(node.input[k]))
                s = g.const(node.input[1 - k])
                if m is not None and m.op == "Mul" and s is not None and g.only_use(m.name):
                    mul, b, weight = m, s[1].astype(np.float64), s[0] in g.t.weights
                    break
            else:
                return None
        for k in (0, 1):
            c = g.const(mul.input[1 - k])
            if c is not None and g.const(mul.input[k]) is None:
                a = c[1].astype(np.float64)
                return mul.input[k], a, b, weight or c[0] in g.t.weights
    return None


def fold_batchnorm(g: _Graph, policy) -> int:
    """BatchNorm y·a + b (a = scale/sqrt(var + eps), b = offset - mean·a)
    after a Conv2D / Dense / DepthwiseConv2D whose kernel and bias the model
    owner holds: kernel·a (per output channel) and (bias - mean)·a + offset
    become the layer's new kernel and bias before anything is shared, so
    the BatchNorm costs nothing, not even the one private product of the
    unfused fallback (adapters.batch_norm) (DESIGN §8)."""
    count = 0
    for node in list(g.topo()):
        if node.name not in g.nodes:
            continue
        found = _affine_after(g, node)
        if found is None:
            continue
        y, a, b, params_weight = found
        y = g.through_identity(y)
        bias_node = g.nodes.get(_node_of(y))
        bias = None
        if bias_node is not None and bias_node.op in ("BiasAdd", "BiasAddV1") and \
                g.only_use(bias_node.name):
            c = g.const(bias_node.input[1])
            if c is None or bias_node.attr["data_format"].s.decode() not in ("", "NHWC"):
                continue
            bias = c[1].astype(np.float64)
            prod = g.nodes.get(_node_of(g.through_identity(bias_node.input[0])))
        else:
            prod, bias_node = bias_node, None
        if prod is None or prod.op not in _PRODUCERS or not g.only_use(prod.name):
            continue
        if prod.op != "MatMul" and prod.attr["data_format"].s.decode() not in ("", "NHWC"):
            continue
        if prod.op == "MatMul" and prod.attr["transpose_a"].b:
            continue
        kc = g.const(prod.input[1])
        if kc is None:
            continue
        kernel = kc[1].astype(np.float64)
        if prod.op == "MatMul":
            channels = kernel.shape[0] if prod.attr["transpose_b"].b else kernel.shape[1]
        elif prod.op == "Conv2D":
            channels = kernel.shape[3]
        else:
            channels = kernel.shape[2] * kernel.shape[3]
        a = np.asarray(a)
        if a.size not in (1, channels) or any(d != 1 for d in a.shape[:-1]):
            continue
        a = np.broadcast_to(a.reshape(-1), (channels,))
        b = np.zeros(channels) if b is None else np.asarray(b)
        if b.size not in (1, channels) or any(d != 1 for d in b.shape[:-1]):
            continue
        b = np.broadcast_to(b.reshape(-1), (channels,))
        if prod.op == "MatMul":
            new_k = kernel * (a[:, None] if prod.attr["transpose_b"].b else a)
        elif prod.op == "Conv2D":
            new_k = kernel * a
        else:  # depthwise [kh, kw, C, m]: output channel c·m + j
            new_k = kernel * a.reshape(kernel.shape[2], kernel.shape[3])
        new_b = (bias if bias is not None else 0.0) * a + b
        layer = g.t.layer_of.get(prod.name, "")
        dtype = tf.as_dtype(prod.attr["T"].type)
        # private under the policy if anything it is made of was a weight
        weight = params_weight or kc[0] in g.t.weights or (
            bias_node is not None and g.is_weight(bias_node.input[1]))
        kname = g.add_const(node.name + "/folded_kernel", new_k, dtype, weight, layer)
        bname = g.add_const(node.name + "/folded_bias", new_b, dtype, weight, layer)
        prod.input[1] = kname
        if bias_node is None:
            bias_node = g.add_node(node.name + "/folded_bias_add", "BiasAdd",
                                   [prod.name, bname], layer, T=dtype, data_format="NHWC")
        else:
            bias_node.input[1] = bname
        # the BatchNorm's output is now the layer's own output
        g.replace(node, "Identity", [bias_node.name], T=dtype)
        count += 1
    if count:
        g.prune()
    return count


#: monotone non-decreasing activations: f(max(window)) = max(f(window));
#: those with f(0) = 0 also commute with a zero-padded ('SAME') window
_MONOTONE_ZERO = {"Relu", "Relu6"}
_MONOTONE = {"Sigmoid", "Tanh"}


def relu_after_maxpool(g: _Graph, policy) -> int:
    """MaxPool(Relu(x)) -> Relu(MaxPool(x)) (DESIGN §6: they commute): the
    ReLU then compares the pooled tensor only, 4x fewer elements for 2x2
    pooling (PrivPy §6.2's spirit: rewrite the anti-pattern before it
    runs). Keras Conv2D(activation="relu") + MaxPooling2D gives exactly
    BiasAdd -> Relu -> MaxPool. The same holds for any monotone
    non-decreasing activation (Relu6, LeakyRelu with alpha in [0, 1];
    Sigmoid and Tanh with VALID pooling, where no padding enters a window)."""
    count = 0
    for mp in list(g.topo()):
        if mp.op != "MaxPool":
            continue
        src = g.through_identity(mp.input[0])
        act = g.nodes.get(_node_of(src))
        if act is None or not g.only_use(act.name):
            continue
        valid = mp.attr["padding"].s.decode() == "VALID"
        ok = act.op in _MONOTONE_ZERO or (act.op in _MONOTONE and valid) or (
            act.op == "LeakyRelu" and 0.0 <= act.attr["alpha"].f <= 1.0)
        if not ok:
            continue
        # every Identity between them must have that one use too
        t = mp.input[0]
        chain_ok = True
        while _node_of(t) != act.name:
            if not g.only_use(_node_of(t)):
                chain_ok = False
            t = g.nodes[_node_of(t)].input[0]
        if not chain_ok:
            continue
        x = act.input[0]
        g.redirect(mp.name, act.name)
        mp.input[0] = x
        act.input[0] = mp.name
        count += 1
    if count:
        g.prune()
    return count


def public_products(g: _Graph, policy) -> int:
    """Products by public values kept local (PrivPy §5.6) need no graph
    change: under Policy(weights="public") Env.operand hands the adapters
    the plaintext weight, and the registry's multiply / matmul / conv2d
    multiply shares by a public operand locally (then truncate), with no
    messages; public constants of the graph (Rescaling, 1/n of a mean) are
    public operands under either policy. So this pass is a documented
    no-op; tests/test_passes.py shows zero multiplications for public-weight
    Dense and Conv2D."""
    return 0


def _is_private(t: str, private: Set[str]) -> bool:
    return _node_of(t) in private


def factor_common(g: _Graph, policy) -> int:
    """a·b + a·c -> a·(b + c) (and a·b - a·c -> a·(b - c)): PrivPy §6.2's
    common factor extraction. Applied only where both products are private
    by private (a, b, c all private), the one case where it saves a
    multiplication; chains a·b + a·c + a·d fold one step at a time."""
    count = 0
    for s in list(g.topo()):
        if s.op not in ("Add", "AddV2", "Sub") or len(s.input) != 2:
            continue
        private = private_nodes(g.t, policy)
        m1, m2 = (g.nodes.get(_node_of(i)) for i in s.input)
        if m1 is None or m2 is None or m1 is m2 or m1.op != "Mul" or m2.op != "Mul" or \
                not (g.only_use(m1.name) and g.only_use(m2.name)):
            continue
        pick = None
        for i in (0, 1):
            for j in (0, 1):
                if _tensor(m1.input[i]) == _tensor(m2.input[j]):
                    pick = (m1.input[i], m1.input[1 - i], m2.input[1 - j])
        if pick is None or not all(_is_private(t, private) for t in pick):
            continue
        a, b, c = pick
        op = s.op
        g.replace(m2, op, [b, c])           # m2 becomes b ± c
        g.replace(s, "Mul", [a, m2.name])   # s becomes a·(b ± c), same name
        count += 1
    if count:
        g.prune()
    return count


def sum_to_dot(g: _Graph, policy) -> int:
    """Sum(x·y, last axis) -> x @ y: PrivPy §5.6's dot PO and §6.2's
    expression vectorisation. An elementwise private product costs one
    multiplication per element of x·y; the matrix product one per output
    element (the sum is taken on shares before the cross terms travel), so
    k times fewer multiplications and bytes for a reduced length k. Handles
    y of shape [k] (a weight vector: x [..., k] @ y[k, 1]) and x, y of the
    same shape (a batched dot, BatchMatMulV2)."""
    count = 0
    shapes = None
    for sm in list(g.topo()):
        if sm.op != "Sum":
            continue
        mul = g.nodes.get(_node_of(sm.input[0]))
        axes = g.const(sm.input[1])
        if mul is None or mul.op != "Mul" or axes is None or not g.only_use(mul.name):
            continue
        private = private_nodes(g.t, policy)
        x, y = mul.input[0], mul.input[1]
        if not (_is_private(x, private) and _is_private(y, private)):
            continue
        shapes = shapes or g.shapes()
        sx, sy = shapes[_tensor(x)], shapes[_tensor(y)]
        if sx.rank is None or sy.rank is None:
            continue
        rank = max(sx.rank, sy.rank)
        ax = [int(v) % rank for v in np.atleast_1d(axes[1])]
        if ax != [rank - 1]:
            continue
        if sx.rank < sy.rank:
            x, y, sx, sy = y, x, sy, sx
        k = sx[-1]
        if k is None or k < 2 or sy[-1] != k:
            continue
        keep = sm.attr["keep_dims"].b
        out = sx.as_list()[:-1] + ([1] if keep else [])
        if sum(d is None for d in out) > 1:
            continue
        target = [-1 if d is None else d for d in out]
        dtype = tf.as_dtype(mul.attr["T"].type)
        layer = g.t.layer_of.get(sm.name, "")
        i32 = lambda v, n: g.add_const(sm.name + "/dot/" + n, np.asarray(v, np.int32),  # noqa
                                       tf.int32, False, layer)
        if sy.rank == 1:
            c = g.const(y)
            if c is not None:
                ycol = g.add_const(sm.name + "/dot/y_column", c[1].reshape(k, 1), dtype,
                                   c[0] in g.t.weights, layer)
            else:
                ycol = g.add_node(sm.name + "/dot/y_column", "Reshape",
                                  [y, i32([k, 1], "col_shape")], layer, T=dtype,
                                  Tshape=tf.int32).name
            rows = g.add_node(sm.name + "/dot/x_rows", "Reshape", [x, i32([-1, k], "rows")],
                              layer, T=dtype, Tshape=tf.int32).name
            prod = g.add_node(sm.name + "/dot/MatMul", "MatMul", [rows, ycol], layer, T=dtype,
                              transpose_a=False, transpose_b=False).name
        elif sx.is_compatible_with(sy) and sx.rank == sy.rank:
            xr = g.add_node(sm.name + "/dot/x_row", "ExpandDims", [x, i32(-2, "row_axis")],
                            layer, T=dtype, Tdim=tf.int32).name
            yc = g.add_node(sm.name + "/dot/y_col", "ExpandDims", [y, i32(-1, "col_axis")],
                            layer, T=dtype, Tdim=tf.int32).name
            prod = g.add_node(sm.name + "/dot/BatchMatMulV2", "BatchMatMulV2", [xr, yc], layer,
                              T=dtype, adj_x=False, adj_y=False).name
        else:
            continue
        g.replace(sm, "Reshape", [prod, i32(target, "out_shape")], Tshape=tf.int32)
        count += 1
    if count:
        g.prune()
    return count


_PASS_FNS = {"owner_constants": owner_constants, "fold_batchnorm": fold_batchnorm,
             "relu_after_maxpool": relu_after_maxpool, "public_products": public_products,
             "factor_common": factor_common, "sum_to_dot": sum_to_dot}


def run(traced: Traced, policy, enabled: Iterable[str]) -> Tuple[Traced, Dict[str, int]]:
    """Applies the enabled GraphDef passes in order to a copy of `traced`;
    returns it and {pass: places changed} for the passes that changed
    something."""
    gd = tf.compat.v1.GraphDef()
    gd.CopyFrom(traced.graph_def)
    t = dataclasses.replace(traced, graph_def=gd, outputs=list(traced.outputs),
                            weights=dict(traced.weights), layer_of=dict(traced.layer_of))
    report: Dict[str, int] = collections.OrderedDict()
    for name in GRAPH_PASSES:
        if name not in enabled:
            continue
        g = _Graph(t)
        n = _PASS_FNS[name](g, policy)
        if n:
            report[name] = n
    return t, report
