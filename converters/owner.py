"""Owner-side inputs (issue 27): what depends on one data owner's plaintext
input alone is computed by that owner, in plain TF on the client device,
before anything is shared.

A data owner may compute anything on its own data: a Rescaling, a Reshape,
the one-hot of its token ids. Doing it before sharing costs the servers
nothing and is exact (the owner computes in float32 what Keras computes),
while the same nodes run on shares cost truncations, comparisons and
messages. So under Policy(owner_side=True) (the default) the graph splits
three ways for each call, from the kinds of its inputs (`plan`):

  owner-side  nodes whose data inputs are one plaintext input, values
              computed from it alone, or public values (constants, shapes,
              public weights); they run as the TF op they are, on the
              client device, where sharing happens (nothing of the input
              reaches a server's device in plaintext);
  private     nodes that read a private value (a private weight, a
              PrivateTensor input, two owners' inputs: two inputs may come
              from two owners, so what combines them is private), loops and
              function calls, and what follows;
  public      everything else, as before.

Each owner-side value a private node reads (the frontier) is shared once, on
the client, where the input itself was shared before. A gather of a private
table by owner-side indices (a Keras Embedding on the owner's token ids)
shares the one-hot of the indices instead, as integer bits, and the lookup
is one exact private matrix product (no comparisons); the owner checks the
indices first and raises on one outside the table, as TF does on CPU.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Sequence, Set, Tuple

import numpy as np
import tensorflow as tf

from tf_privpy.protocols.mpc.runtime import context
from tf_privpy.protocols.mpc.api import registry
from tf_privpy.protocols.mpc.api import adapters as A

from .trace import PUBLIC_OUTPUT_OPS, Traced, src, topo

Key = Tuple[str, int]

#: nodes that never run at the owner: loops and function calls (their
#: bodies are not in the node; the converter refuses or rewrites them on
#: shares). tf.cond's Switch and Merge on the owner's values are a select
#: the owner computes (both branches, as on shares: rewrite._select_branches)
_NOT_AT_OWNER = frozenset({"If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase",
                           "PartitionedCall", "StatefulPartitionedCall", "Enter", "Exit",
                           "NextIteration", "LoopCond"})
#: ops whose output is not a number the owner could share (a TensorList is a
#: variant): they run on shares, reading the owner's value shared
_NOT_SHAREABLE = ("TensorList",)
#: gathers that become the owner's one-hot times the private table (a
#: training step reads its table by ResourceGather)
_GATHERS = frozenset({"GatherV2", "ResourceGather"})
#: the gather's gradient (IndexedSlices made dense): the transposed
#: one-hot times the private rows, summed per id
_SEGMENT_SUMS = frozenset({"UnsortedSegmentSum"})
#: public metadata of an owner value computed here, as the shape adapters
#: do for a private one, so what folds on it still folds at conversion
_METADATA = frozenset({"Shape", "ShapeN", "Size", "Rank"})


@dataclasses.dataclass
class Plan:
    """Who computes what in one call (see the module docstring)."""

    owner_of: Dict[str, str]          # owner-side node -> the input it derives from
    private: Set[str]                 # nodes computed on shares
    at_owner: Set[str]                # owner-side nodes and public ones that read them
    shared: Set[Key]                  # owner-side values a private node reads: shared once
    one_hot: Dict[str, Key]           # gather node -> its owner-side indices


def _switches_above(n, nodes) -> List[Any]:
    """The Switch nodes a Merge selects between (every Switch among its
    ancestors, by data or control edges: branch constants hang on their
    Switch by control edges); a superset is harmless, it can only make the
    Merge private."""
    seen, stack, out = set(), [i for i in n.input], []
    while stack:
        name = src(stack.pop())[0]
        if name in seen or name not in nodes:
            continue
        seen.add(name)
        m = nodes[name]
        if m.op == "Switch":
            out.append(m)
            continue
        stack.extend(m.input)
    return out


def plan(traced: Traced, policy, plain: Sequence[bool], private_roots: Sequence[str] = (),
         stay_private: frozenset = frozenset()) -> Plan:
    """The split of the graph for inputs of these kinds (plain[i]: input i
    is the owner's plaintext, else a PrivateTensor or public data).
    `private_roots`: more nodes whose values are private (a training step's
    private variables); `stay_private`: op types that never run at the
    owner (a training step's variable updates: a weight or an optimizer
    state is not the owner's to write).

    A node is owner-side when all its data inputs are owner-side values of
    ONE input or public values, and it is not a node that must be private
    (it reads a private value, or it is control flow). PUBLIC_OUTPUT_OPS end
    the dependence, as they end privacy (trace.private_nodes)."""
    order = topo(traced.graph_def)
    nodes = {n.name: n for n in order}
    owner_side = policy.owner_side and policy.inputs == "private"
    inputs = dict(zip(traced.inputs, plain))
    private: Set[str] = set()
    if policy.inputs == "private":
        private.update(name for name, p in inputs.items() if not (p and owner_side))
    if policy.weights == "private":
        private.update(traced.weights)
    private.update(private_roots)
    deps: Dict[str, frozenset] = {}
    owner_of: Dict[str, str] = {}
    for n in order:
        if n.name in inputs:
            if n.name not in private and owner_side:
                deps[n.name] = frozenset([n.name])
                owner_of[n.name] = n.name
            continue
        data = [src(i)[0] for i in n.input if not i.startswith("^")]
        if n.op == "Merge":  # its value also depends on the branch predicate
            data += [src(sw.input[1])[0] for sw in _switches_above(n, nodes)]
        if n.op in PUBLIC_OUTPUT_OPS:
            continue
        if any(s in private for s in data):
            private.add(n.name)
            continue
        d = frozenset().union(*(deps.get(s, frozenset()) for s in data))
        if len(d) > 1 or (d and (n.op in _NOT_AT_OWNER or n.op in stay_private
                                 or n.op.startswith(_NOT_SHAREABLE) or any(
                v.WhichOneof("value") == "func" for v in n.attr.values()))):
            private.add(n.name)
        elif d:
            deps[n.name] = d
            owner_of[n.name] = next(iter(d))
    at_owner, shared, one_hot = set(), set(), {}
    for n in order:
        if n.name in traced.inputs:
            continue
        keys = [src(i) for i in n.input if not i.startswith("^")]
        reads = [k for k in keys if k[0] in owner_of]
        if n.op == "Merge":
            reads += [src(sw.input[1]) for sw in _switches_above(n, nodes)
                      if src(sw.input[1])[0] in owner_of]
        if not reads:
            continue
        if n.name not in private:
            at_owner.add(n.name)
        elif n.op in _GATHERS and len(keys) in (2, 3) and keys[1] in reads \
                and keys[0] not in reads and all(k[0] not in owner_of for k in keys[2:]) \
                and not n.attr["batch_dims"].i:
            one_hot[n.name] = keys[1]   # the indices as a one-hot, not shared as they are
        elif n.op in _SEGMENT_SUMS and len(keys) == 3 and keys[1] in reads \
                and keys[0] not in reads and keys[2][0] not in owner_of:
            one_hot[n.name] = keys[1]   # segment ids: their one-hot, transposed
        else:
            shared.update(reads)
    for o in traced.outputs:  # what predict returns stays private, as without the policy
        if src(o)[0] in owner_of:
            shared.add(src(o))
    return Plan(owner_of, private, at_owner, shared, one_hot)


class _OwnerOnly:
    """What the servers' view of an owner-side value no private node reads
    holds: nothing. Using it is a bug of `plan`, and fails loudly."""

    def __repr__(self):
        return "<owner-side value, not shared>"


OWNER_ONLY = _OwnerOnly()


class Frontier:
    """One call's owner-side evaluation: the owner's plaintext values on the
    client, and what of them is shared, into rewrite.evaluate's `values`
    (which then holds the servers' view: shares, public values)."""

    def __init__(self, p: Plan, traced: Traced, env):
        self.plan = p
        self.traced = traced
        self.env = env      # rewrite.Env: operand() shares a weight once, public() reads it
        self.plain: Dict[Key, Any] = {}
        self.device = context.get_handle().runtime.device("client")
        self._dtypes = {n.name: tf.as_dtype(n.attr["dtype"].type)
                        for n in traced.graph_def.node if n.name in traced.weights}
        #: a value as a private node reads it (a training step sets it: its
        #: variables are references until read)
        self.resolve: Callable[[Any], Any] = lambda v: v

    def start(self, values: Dict[Key, Any]) -> None:
        """The owner's inputs: kept in plaintext, shared if a private node
        reads them as they are (today's sharing of the whole input)."""
        for name in self.traced.inputs:
            if name in self.plan.owner_of:
                self._produce((name, 0), values.pop((name, 0)), values)

    def handles(self, n) -> bool:
        return n.name in self.plan.at_owner or n.name in self.plan.one_hot

    def eval(self, n, node, values: Dict[Key, Any], run: Callable) -> None:
        """Runs node n at the owner (plain TF on the client) or, for a gather
        by owner-side indices, as the one-hot product."""
        keys = [src(i) for i in n.input if not i.startswith("^")]
        if n.name in self.plan.one_hot:
            if n.op in _SEGMENT_SUMS:
                out = self._segment_sum(node, self.resolve(values[keys[0]]),
                                        self.plain[keys[1]], values[keys[2]])
            else:
                axis = values[keys[2]] if len(keys) > 2 else np.int32(0)
                out = self._gather(node, self.resolve(values[keys[0]]), self.plain[keys[1]],
                                   axis)
            values[(n.name, 0)] = out
            return
        if n.op in _METADATA:
            # static shapes, also of a private value read beside the owner's
            # (a training step's ShapeN of x and a kernel)
            raw = [self.plain[k] if k in self.plain else values[k] for k in keys]
            if all(tf.TensorShape(getattr(v, "shape", None)).is_fully_defined() for v in raw):
                self._outputs(n, registry.converter_row(n.op).adapter(None, node, raw), values)
                return
        ins = [self.plain[k] if k in self.plain else self._public(values[k]) for k in keys]
        with tf.device(self.device):
            if n.op == "Switch":     # both branches are computed
                outs = [ins[0], ins[0]]
            elif n.op == "Merge":
                outs = [self._merge(n, keys, ins, values), np.int32(0)]
            elif n.op in ("Identity", "StopGradient", "PreventGradient", "Snapshot") \
                    and len(ins) == 1:
                outs = ins
            else:
                if n.device:   # a device traced into the node would override the owner's
                    n = _undevice(n)
                outs = run(n, ins)
        self._outputs(n, outs, values)

    def _outputs(self, n, outs, values: Dict[Key, Any]) -> None:
        for i, o in enumerate(outs):
            if n.name in self.plan.owner_of:
                self._produce((n.name, i), o, values)
            else:    # public metadata of an owner value
                values[(n.name, i)] = o

    def _merge(self, n, keys, ins, values):
        """tf.cond at the owner: the branch its predicate picks, by
        tf.where (as rewrite._select_branches does on shares)."""
        by_port = {}
        for k, v in zip(keys, ins):
            tag = self.env.branch_tags.get(k, ())
            if tag:
                by_port[tag[-1][1]] = (tag[-1][0], v)
        if set(by_port) != {0, 1} or by_port[0][0] != by_port[1][0]:
            raise ValueError(f"'{n.name}': a Merge that is not a two-way tf.cond; write the "
                             f"branch as tf.where")
        switch = self.env.nodes[by_port[0][0]]
        key = src(switch.input[1])
        pred = self.plain[key] if key in self.plain else self.env.public(values[key])
        return tf.where(pred, by_port[1][1], by_port[0][1])

    def _produce(self, key: Key, value, values: Dict[Key, Any]) -> None:
        self.plain[key] = value
        if key in self.plan.shared:
            values[key] = _share(value, key, self.traced)
        else:
            values[key] = OWNER_ONLY

    def _public(self, v):
        """A public value the owner reads; a public weight in the dtype of
        its frozen node (the passes keep folded weights in float64: the
        owner runs the traced ops on what they were traced with)."""
        if isinstance(v, A.Weight) and v.name in self._dtypes:
            return np.asarray(v.value).astype(self._dtypes[v.name].as_numpy_dtype)
        return self.env.public(v)

    def _gather(self, node, params, ids, axis):
        """tf.gather(private params, owner's ids, axis): the owner checks the
        ids (TF on CPU raises on one outside the table; so does this, at the
        owner, before sharing) and shares their one-hot as integer bits; the
        servers multiply it by the table, exactly."""
        axis = int(np.asarray(self.env.public(axis)))
        params = self.env.operand(params)
        n = A.gather_rows(node, params, ids.shape, axis)
        bits = self._one_hot_bits(node, ids, n, "an index")
        return A.gather_by_one_hot(params, bits, ids.shape, axis)

    def _segment_sum(self, node, data, ids, num):
        """tf.math.unsorted_segment_sum(private data, owner's ids, public
        num): the owner shares the transposed one-hot of its ids as integer
        bits ([num, n]) and the servers multiply it by the rows of data,
        exactly (a training step's dense gradient of an Embedding table).
        An id outside [0, num) raises at the owner, as TF on CPU does for
        one too large (a negative one, which TF drops, is refused too)."""
        num = int(np.asarray(self.env.public(num)))
        data = self.env.operand(data)
        shape = tf.TensorShape(np.shape(ids))
        k = shape.rank
        if not shape.is_fully_defined() or data.shape[:k] != shape:
            raise A.Unsupported("a segment sum whose ids are not a static prefix of the "
                                "data's shape", "give the model static shapes")
        bits = self._one_hot_bits(node, ids, num, "a segment id", transpose=True)
        rows = A.impl("reshape")(data, [shape.num_elements(), -1])
        return A.impl("reshape")(A.impl("matmul")(bits, rows), [num] + data.shape.as_list()[k:])

    def _one_hot_bits(self, node, ids, n: int, what: str, transpose: bool = False):
        """The one-hot of the owner's ids over n rows ([ids' size, n], or
        transposed), checked and shared by the owner as integer bits: an id
        outside [0, n) raises there, before anything is shared (TF on CPU
        raises too); the message names the node, never the data (an error
        may travel)."""
        with tf.device(self.device):
            flat = tf.reshape(tf.convert_to_tensor(ids), [-1])
            ok = tf.reduce_all(tf.logical_and(flat >= 0, flat < tf.cast(n, flat.dtype)))
            check = tf.debugging.Assert(ok, [f"{BAD_INDEX} '{node.name}': {what} outside "
                                             f"[0, {n}), checked by the data owner"])
            with tf.control_dependencies([check]):
                hot = tf.one_hot(flat, n, dtype=tf.int32)
                if transpose:
                    hot = tf.transpose(hot)
            return registry.get("share").impl(hot, name=f"{node.name}/one_hot", bits=True)


def _undevice(n):
    nd = tf.compat.v1.NodeDef()
    nd.CopyFrom(n)
    nd.device = ""
    return nd


#: what the owner's index check says (PrivateModel.predict re-raises it)
BAD_INDEX = "gather by owner-side indices:"

#: dtypes a frontier value is shared as: narrower integers and floats
#: widen exactly; booleans become integer bits
_WIDEN = {tf.uint8: tf.int32, tf.int8: tf.int32, tf.int16: tf.int32, tf.uint16: tf.int32,
          tf.float16: tf.float32, tf.bfloat16: tf.float32}


def _share(value, key: Key, traced: Traced):
    """An owner-side value a private node reads, shared once on the client
    (named for the range check's message: the input's spec name, or the
    node's)."""
    names = dict(zip(traced.inputs, traced.input_specs))
    name = (names[key[0]].name or key[0]) if key[0] in names else key[0]
    t = tf.convert_to_tensor(value)
    if t.dtype == tf.bool:
        return registry.get("share").impl(t, name=name, bits=True)
    if t.dtype in _WIDEN:
        t = tf.cast(t, _WIDEN[t.dtype])
    if t.dtype not in (tf.float32, tf.float64, tf.int32, tf.int64):
        raise ValueError(f"'{key[0]}' computed at the data owner is {t.dtype.name}, which "
                         f"cannot be shared: compute it on numbers, or convert with "
                         f"Policy(owner_side=False)")
    return registry.get("share").impl(t, name=name)
