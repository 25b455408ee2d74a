"""Federated aggregation through the graph pass (DESIGN §8 "FL gradient
aggregation", §9; issue 30): the analysis half.

A federated round's aggregation step is written as a plain TF function: each
client's update is computed from that client's arguments, then the updates
are combined by a (weighted) sum or mean. Traced and frozen as the converter
does (trace.py), the step's nodes are labelled with the clients whose inputs
they depend on (`owners`):

  no client   public: constants, public arguments (the global model),
              shapes (a value's shape is public metadata, trace.py)
  one client  that client's own computation: runs in plain TF on its device
  several     cross-client: the only place where clients' values meet

The cross-client part must be LINEAR in the clients' values, since that is
what a secure aggregation computes exactly (BatchCrypt seed 003 §4: additive
HE sums ciphertexts; PrivPy §3: additive shares sum locally). `analyse`
finds the reductions, the maximal trees of Add/AddV2/AddN over clients'
terms and Sum/Mean over axis 0 of a Pack of clients' values, and accepts
after them products and quotients by public values (public weights, 1/n),
Sub, Neg and reshapes. Everything else that meets two clients' values (a
Maximum, a product of two clients' values, a division by a sum of private
weights) is refused before anything runs, each node named with what to do;
so is an output that is one client's own value (returning it would hand that
client's plaintext to the driver). The run half is federated_run.py.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, FrozenSet, List, Optional, Sequence, Set, Tuple, Union

import numpy as np
import tensorflow as tf

from .rewrite import Problem, decode_attr
from .trace import PUBLIC_OUTPUT_OPS, Traced, src, topo

Key = Tuple[str, int]

BACKENDS = ("mpc", "batchcrypt", "paillier", "plaintext")
#: the backends whose aggregation is a tf_privpy.he aggregator (federated_run)
HE_BACKENDS = ("batchcrypt", "paillier", "plaintext")
ON_OVERFLOW = ("raise", "nan")
REVEAL_TO = ("driver", "clients")
#: trees of these over clients' values are one reduction
SUM_OPS = frozenset({"Add", "AddV2", "AddN"})
#: reductions over the stacked clients' axis
STACK_REDUCE = frozenset({"Sum", "Mean"})
#: linear in their first input, the other inputs public
UNARY_LINEAR = frozenset({"Identity", "Snapshot", "StopGradient", "Neg", "Reshape",
                          "ExpandDims", "Squeeze", "Transpose", "Sum", "Mean"})
#: a cross value times (or over) a public one
SCALE_OPS = frozenset({"Mul", "RealDiv", "Div"})
_PASS = frozenset({"Identity", "Snapshot", "StopGradient"})


class FederatedConversionError(ValueError):
    """Every node of a federated step that cannot be aggregated securely,
    found before anything runs ("refuse rather than compute wrong")."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        super().__init__(
            f"{len(self.problems)} node(s) of the federated step cannot be aggregated "
            "securely:\n" + "\n".join(str(p) for p in self.problems))


@dataclasses.dataclass(frozen=True)
class FederatedPolicy:
    """How a federated step is converted.

    Args:
      clients: which client owns each argument of the step: a sequence with
        one entry per argument (a client index 0..N-1, or None for a public
        argument such as the global model's weights), or an int N: the
        arguments split into N equal consecutive groups, one per client.
      backend: "mpc" (default): each client secret-shares its update to S1
        and S2 on its own device, the servers add the shares and multiply
        by public weights, only the aggregate is revealed (PrivPy §3);
        "batchcrypt": dACIQ clip, quantize, pack and Paillier-encrypt on
        each client, homomorphic sum on the aggregator (S1), every client
        decrypts (BatchCrypt, seed 003 §4); "paillier": one Paillier
        ciphertext per fixed-point value (stock FATE, BatchCrypt's baseline;
        for comparison); "plaintext": the updates summed in the clear on the
        aggregator (no protection: the reference the others are measured
        against, as build_batchcrypt_fed_avg's aggregation="plaintext").
      reveal_to: mpc: who receives the aggregate: "driver" (default, the
        runtime's client device) or "clients" (each present client gets
        both shares and reconstructs on its own device).
      key_bits, quant_bits, seed: the Paillier backends' modulus, BatchCrypt's
        quantization width r and stochastic-rounding seed (tests only).
      max_clients: batchcrypt: slot padding sized for this many summands
        (default: the step's number of clients).
      on_overflow: batchcrypt: "raise" (default) or "nan" for a decoded slot
        that overflowed.
      fixed_point_bits: paillier: fractional bits of the encoding.

    Example:
      >>> tp.federated.FederatedPolicy(clients=[None, 0, 1, 2], backend="mpc")
    """

    clients: Union[int, Sequence[Optional[int]]]
    backend: str = "mpc"
    reveal_to: str = "driver"
    key_bits: int = 2048
    quant_bits: int = 16
    seed: Optional[int] = None
    max_clients: Optional[int] = None
    on_overflow: str = "raise"
    fixed_point_bits: int = 24

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"FederatedPolicy.backend must be one of {BACKENDS}, "
                             f"got {self.backend!r}")
        if self.on_overflow not in ON_OVERFLOW:
            raise ValueError(f"FederatedPolicy.on_overflow must be one of {ON_OVERFLOW}, "
                             f"got {self.on_overflow!r}")
        if self.reveal_to not in REVEAL_TO:
            raise ValueError(f"FederatedPolicy.reveal_to must be one of {REVEAL_TO}, "
                             f"got {self.reveal_to!r}")

    def arg_clients(self, num_args: int) -> List[Optional[int]]:
        """The owning client of each of the step's `num_args` arguments."""
        if isinstance(self.clients, int):
            n = self.clients
            if n < 2 or num_args % n:
                raise ValueError(f"FederatedPolicy(clients={n}) splits the step's {num_args} "
                                 "arguments into equal groups, one per client (at least 2): "
                                 "give one owner per argument instead")
            return [i // (num_args // n) for i in range(num_args)]
        owners = list(self.clients)
        if len(owners) != num_args:
            raise ValueError(f"FederatedPolicy.clients names {len(owners)} owners but the step "
                             f"takes {num_args} arguments")
        ids = sorted({c for c in owners if c is not None})
        if len(ids) < 2 or ids != list(range(len(ids))):
            raise ValueError(f"FederatedPolicy.clients must name clients 0..N-1 (N >= 2), "
                             f"got {owners}")
        return owners


@dataclasses.dataclass
class Reduction:
    """One cross-client reduction the pass replaces by a secure aggregation.

    `terms[c]`: client c's terms (summed on c's device into its update);
    `weights[c]`: c's public weight in it (the constant its terms were
    multiplied by, 1 if none; None if not a constant), used to renormalise
    over the clients present; `scale`: 1/N of a Mean over the clients'
    stack, else 1."""

    root: str
    op: str
    nodes: List[str]
    terms: Dict[int, List[Key]]
    public: List[Key]
    cross: List[Key]
    scale: float
    weights: Dict[int, Optional[float]]

    def factor(self, present: Sequence[int]) -> float:
        """A dropped client's terms are left out and the others' reweighted
        by sum_all w / sum_present w: the weighted mean over the clients
        whose updates arrived (its weights renormalised)."""
        if set(present) >= set(self.terms):
            return 1.0
        missing = [c for c in self.terms if self.weights[c] is None]
        if missing:
            raise ValueError(
                f"reduction {self.root}: client(s) {missing}'s weights are not constants, so a "
                "dropped client cannot be renormalised over the others; make the weights "
                "constants of the step (or public arguments folded into constants)")
        total = sum(self.weights.values())
        here = sum(w for c, w in self.weights.items() if c in present)
        if here == 0:
            raise ValueError(f"reduction {self.root}: no client with a nonzero weight is present")
        return total / here


@dataclasses.dataclass
class Plan:
    """The analysed step: who computes what (module docstring)."""

    traced: Traced
    arg_client: List[Optional[int]]
    num_clients: int
    owners: Dict[str, FrozenSet[int]]
    reductions: Dict[str, Reduction]
    replaced: Set[str]              # nodes inside a reduction (not evaluated)
    linear: List[str]               # cross nodes computed on the aggregate
    shapes: Dict[Key, tf.TensorShape]
    order: List[object]

    def kind(self, name: str) -> str:
        o = self.owners[name]
        if name in self.reductions:
            return "reduction"
        if name in self.replaced:
            return "replaced"
        return "public" if not o else "client" if len(o) == 1 else "cross"

    def update_elements(self) -> Dict[str, int]:
        """Elements of each reduction's per-client update (static shapes)."""
        out = {}
        for r in self.reductions.values():
            key = next(k for ks in r.terms.values() for k in ks)
            n = self.shapes[key].num_elements()
            if n is None:
                raise ValueError(f"reduction {r.root}: the clients' updates have no static "
                                 f"shape ({self.shapes[key]}); give a full input_signature")
            out[r.root] = n
        return out


def _consts(gd) -> Dict[str, np.ndarray]:
    return {n.name: tf.make_ndarray(n.attr["value"].tensor) for n in gd.node if n.op == "Const"}


def _shapes(gd) -> Dict[Key, tf.TensorShape]:
    """Static output shapes of every node, by importing the frozen graph."""
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(gd, name="")
    return {(op.name, i): t.shape for op in g.get_operations() for i, t in enumerate(op.outputs)}


def _through_pass(key: Key, nodes) -> Key:
    while nodes[key[0]].op in _PASS:
        key = src(nodes[key[0]].input[0])
    return key


def _weight_of(key: Key, nodes, owners, consts) -> Optional[float]:
    """The public constant a client's term was multiplied (or divided) by, 1
    if none, None if the factor is public but not a constant."""
    key = _through_pass(key, nodes)
    n = nodes[key[0]]
    if n.op not in ("Mul", "RealDiv", "Div"):
        return 1.0
    ins = [src(i) for i in n.input if not i.startswith("^")]
    pub = [k for k in ins if not owners[k[0]]]
    if len(pub) != 1 or (n.op != "Mul" and pub[0] != ins[1]):
        return 1.0
    c = _through_pass(pub[0], nodes)[0]
    if c not in consts or np.size(consts[c]) != 1:
        return None
    v = float(np.asarray(consts[c]).reshape(()))
    return abs(v) if n.op == "Mul" else (abs(1.0 / v) if v else None)


def analyse(traced: Traced, arg_client: Sequence[Optional[int]]) -> Plan:
    """The plan of a traced step, or a FederatedConversionError listing every
    node that cannot be aggregated securely."""
    gd = traced.graph_def
    for n in gd.node:
        n.device = ""   # placed by ownership, not by the trace
    nodes = {n.name: n for n in gd.node}
    order = topo(gd)
    consts = _consts(gd)
    owners: Dict[str, FrozenSet[int]] = {}
    for n in order:
        if n.op == "Placeholder":
            c = arg_client[traced.inputs.index(n.name)]
            owners[n.name] = frozenset() if c is None else frozenset({c})
        elif n.op == "Const" or n.op in PUBLIC_OUTPUT_OPS:
            owners[n.name] = frozenset()
        else:
            owners[n.name] = frozenset().union(
                *[owners[src(i)[0]] for i in n.input if not i.startswith("^")])
    users: Dict[str, List[str]] = {}
    for n in gd.node:
        for i in n.input:
            if not i.startswith("^"):
                users.setdefault(src(i)[0], []).append(n.name)
    outputs = {src(o)[0] for o in traced.outputs}
    cross = {k for k, o in owners.items() if len(o) >= 2}
    problems: List[Problem] = []

    def problem(n, why, fix):
        problems.append(Problem(n.name, n.op, traced.layer_of.get(n.name, ""), why, fix))

    def ins(n) -> List[Key]:
        return [src(i) for i in n.input if not i.startswith("^")]

    reductions: Dict[str, Reduction] = {}
    replaced: Set[str] = set()

    def classify(keys, red_nodes):
        terms, public, crossed = {}, [], []
        for k in keys:
            o = owners[k[0]]
            if not o:
                public.append(k)
            elif len(o) == 1:
                terms.setdefault(next(iter(o)), []).append(k)
            else:
                crossed.append(k)
        return terms, public, crossed

    # Sum / Mean over axis 0 of a Pack of the clients' values
    for n in order:
        if n.name not in cross or n.op not in STACK_REDUCE:
            continue
        data = ins(n)
        pk = _through_pass(data[0], nodes)
        pack = nodes[pk[0]]
        if pack.op != "Pack" or pk[0] not in cross:
            continue
        axes = consts.get(_through_pass(data[1], nodes)[0])
        if axes is None or sorted(np.atleast_1d(axes).tolist()) != [0] \
                or decode_attr(pack.attr["axis"]) != 0 or decode_attr(n.attr["keep_dims"]):
            problem(n, "reduces a stack of clients' values over other axes than the clients' "
                    "axis 0 (or keeps dims)", "reduce over axis 0 only (tf.reduce_mean(tf."
                    "stack(updates), axis=0)); reduce each client's update on its own first")
            continue
        if any(u != n.name for u in users.get(pk[0], [])):
            problem(pack, "a stack of the clients' values used by more than its reduction",
                    "stack the updates only to reduce them over axis 0")
            continue
        keys = ins(pack)
        terms, public, crossed = classify(keys, [])
        reductions[n.name] = Reduction(
            n.name, n.op, [pack.name, n.name], terms, public, crossed,
            1.0 / len(keys) if n.op == "Mean" else 1.0,
            {c: _weight_of(ks[0], nodes, owners, consts) if len(ks) == 1 else None
             for c, ks in terms.items()})
        replaced.add(pack.name)

    # Add / AddV2 / AddN trees over the clients' terms
    tree = {k for k in cross if nodes[k].op in SUM_OPS}
    roots = [n for n in order if n.name in tree and (
        n.name in outputs or any(u not in tree for u in users.get(n.name, [])))]
    root_names = {n.name for n in roots}
    for r in roots:
        members, leaves, stack = [], [], [r.name]
        while stack:
            name = stack.pop()
            members.append(name)
            for k in ins(nodes[name]):
                if k[0] in tree and k[0] not in root_names:
                    stack.append(k[0])
                else:
                    leaves.append(k)
        terms, public, crossed = classify(leaves, members)
        weights: Dict[int, Optional[float]] = {}
        for c, ks in terms.items():
            ws = [_weight_of(k, nodes, owners, consts) for k in ks]
            weights[c] = None if any(w is None for w in ws) else float(sum(ws))
        reductions[r.name] = Reduction(r.name, r.op, sorted(members), terms, public, crossed,
                                       1.0, weights)
        replaced.update(m for m in members if m != r.name)

    # what follows the reductions: linear in the aggregates
    linear: List[str] = []
    for n in order:
        if n.name not in cross or n.name in reductions or n.name in replaced:
            continue
        data = ins(n)
        kinds = ["public" if not owners[k[0]] else "client" if len(owners[k[0]]) == 1
                 else "cross" for k in data]
        if "client" in kinds and "cross" not in kinds and n.op not in SUM_OPS:
            problem(n, f"combines the values of clients {sorted(owners[n.name])} by a "
                    f"nonlinear or unsupported {n.op}", "aggregate with sums, means and "
                    "products by public weights only; compute anything else on each client "
                    "before the aggregation, or on the revealed aggregate after the round")
        elif "client" in kinds:
            who = sorted(set().union(*[owners[k[0]] for k, t in zip(data, kinds)
                                       if t == "client"]))
            problem(n, f"combines client {who}'s own value with an aggregate by {n.op}: not a "
                    "sum over clients", "add each client's term into the sum (tf.add_n over "
                    "the clients' updates), or compute it on the client before aggregating")
        elif n.op in UNARY_LINEAR and kinds[0] == "cross" and kinds.count("cross") == 1:
            linear.append(n.name)
        elif n.op in SCALE_OPS and kinds.count("cross") == 1 and (
                n.op == "Mul" or kinds[0] == "cross"):
            linear.append(n.name)
        elif n.op == "Sub":
            linear.append(n.name)
        elif n.op in SCALE_OPS and kinds.count("cross") == 2:
            what = ("divides by a value aggregated across clients (a private weight)"
                    if n.op != "Mul" else "multiplies two values aggregated across clients")
            problem(n, what + ": a secure aggregation computes sums and products by public "
                    "values only", "use public weights (constants or public arguments, e.g. "
                    "the clients' example counts), or return both sums and divide after the "
                    "round")
        else:
            problem(n, f"combines the values of clients {sorted(owners[n.name])} by a "
                    f"nonlinear or unsupported {n.op}", "aggregate with sums, means and "
                    "products by public weights only; compute anything else on each client "
                    "before the aggregation, or on the revealed aggregate after the round")
    for i, o in enumerate(traced.outputs):
        k = src(o)
        if len(owners[k[0]]) == 1:
            (c,) = owners[k[0]]
            problem(nodes[k[0]], f"output {i} is client {c}'s own value: returning it would "
                    "send that client's plaintext to the driver", "aggregate it across the "
                    "clients, or drop it from the step's outputs")
    if not reductions and not problems:
        problems.append(Problem("(graph)", "", "", "no reduction across clients found",
                                "return a sum or (weighted) mean of the clients' updates"))
    if problems:
        raise FederatedConversionError(problems)
    ids = sorted({c for c in arg_client if c is not None})
    return Plan(traced, list(arg_client), len(ids), owners, reductions, replaced, linear,
                _shapes(gd), order)
