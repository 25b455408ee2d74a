"""Federated aggregation through the graph pass: the run half (issue 30).

`FederatedStep` runs a Plan (federated.py) for one round:

  1. each present client computes its own nodes in plain TF on its device
     and sums its terms of each reduction into its update (plaintext that
     never leaves the device);
  2. the reductions are replaced by a secure aggregation:
     - mpc (PrivPy §3, DESIGN §1): the client encodes and splits its update
       on its device (tp.share(owner=...): fresh masks from the OS CSPRNG)
       and sends one share to S1, one to S2 through its channels (counted in
       tp.stats()); S1 and S2 add the shares locally; a dropped client's
       reweighting and any public weight after the sum are local products
       by public values (one truncation each); the outputs are revealed to
       the driver or to every present client;
     - batchcrypt (seed 003 §4, Algorithm 1): the clients' updates go to the
       existing BatchCrypt aggregator (tf_privpy.he.aggregation): dACIQ clip,
       quantize, pack and encrypt on each client's device, homomorphic sum on
       S1's device, every client decrypts and decodes; paillier and
       plaintext (the baseline and the reference) go to that module's other
       aggregators the same way. tp.federated.build_batchcrypt_fed_avg's
       rounds are this path too: its averaging is a traced step (issue 30);
  3. the nodes after the reductions (products by public weights, 1/n, the
     global model's update) run on the aggregate: on shares (mpc) or on the
     decrypted plaintext (batchcrypt).

A dropped client (its arguments given as None, or left out of `present`):
the round aggregates the clients whose updates arrived, each reduction's
weights renormalised over them (Reduction.factor): a weighted mean stays the
weighted mean of the present clients.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tf_privpy.protocols.mpc.api import registry
from tf_privpy.protocols.mpc.api.value import PrivateTensor
from tf_privpy.protocols.mpc.runtime import context

from .federated import FederatedPolicy, Key, Plan
from .rewrite import Env, Policy, _run_public, lookup, node_of
from .trace import src

#: the BatchCrypt wire format's per-layer metadata and per-client count
#: (protocols/he/he_aggregators.py: _STATS, _F64, _COUNT)
_STATS_BYTES, _F64_BYTES, _COUNT_BYTES = 24, 8, 8


@dataclasses.dataclass
class RoundReport:
    """What one round did: who took part, the bytes each client sent and
    received (measured on the channels for mpc; the BatchCrypt messages'
    lengths for batchcrypt), seconds, and the overflow counters."""

    present: List[int]
    factors: Dict[str, float]
    bytes_up_per_client: int = 0
    bytes_down_per_client: int = 0
    seconds: float = 0.0
    positive_overflows: int = 0
    negative_overflows: int = 0
    clipped: int = 0
    #: batchcrypt: wall seconds of all clients' quantize + pack + encrypt, of
    #: the aggregator's ciphertext sums, and of all clients' decrypt + decode
    #: (the clients take turns in this process: one client's share is about
    #: encrypt_s / clients; AggregationReport)
    encrypt_s: float = 0.0
    aggregate_s: float = 0.0
    decrypt_s: float = 0.0
    #: the HE backends: the aggregator's own report of the round
    #: (tf_privpy.he.aggregation.AggregationReport: values, ciphertexts)
    aggregation: Any = None


class FederatedStep:
    """A federated step whose cross-client reductions run as a secure
    aggregation. Made by tp.federated.convert; call it like the step:
    `step(*args)` returns the step's outputs, `step.run(*args)` also the
    RoundReport; `summary()` says what was rewritten before anything runs."""

    def __init__(self, plan: Plan, policy: FederatedPolicy, aggregator=None):
        self.plan = plan
        self.policy = policy
        self._aggregator = aggregator                  # HE backends: a SecureAggregator
        self._fns: Dict[Tuple, Callable] = {}
        self._nodes = {n.name: n for n in plan.order}
        self._env = Env(Policy(weights="public"))

    # ------------------------------------------------------------ placement
    def _devices(self) -> Dict[str, str]:
        """The runtime's {party: device}. The HE backends also run without
        tp.init (as tf_privpy.he.aggregation does: every party on the default
        device, messages uncounted); mpc needs the servers."""
        if not context.is_initialized() and self.policy.backend != "mpc":
            return {}
        return context.get_handle().runtime.devices

    def parties(self) -> List[str]:
        """Client i's party: "client{i+1}" when the runtime has a data-owner
        device per client beside the driver's (tp.init(num_clients=N+1)),
        else the runtime's data owners round-robin (the driver's device
        doubles as client 0's, as in he_aggregators.place)."""
        devs = self._devices()
        owners = ["client"] + sorted((k for k in devs if k.startswith("client") and k != "client"),
                                     key=lambda k: int(k[len("client"):]))
        n = self.plan.num_clients
        if len(owners) > n:
            return owners[1:n + 1]
        return [owners[i % len(owners)] for i in range(n)]

    def _device(self, party: str) -> str:
        return self._devices().get(party, "")

    # -------------------------------------------------------------- summary
    def bytes_per_client(self) -> Tuple[int, int]:
        """(up, down) bytes per client of one round, declared before it runs."""
        elems = self.plan.update_elements()
        if self.policy.backend == "mpc":
            e = context.get_handle().config.ring_bits // 8
            up = 2 * e * sum(elems.values())
            out = sum(self.plan.shapes[src(o)].num_elements() or 0
                      for o in self.plan.traced.outputs
                      if len(self.plan.owners[src(o)[0]]) >= 2)
            return up, (2 * e * out if self.policy.reveal_to == "clients" else 0)
        from tf_privpy.protocols.he import batchcrypt as _bc
        from tf_privpy.protocols.he import he_aggregators as _he
        values = sum(elems.values())
        if self.policy.backend == "plaintext":
            return 4 * values, 4 * values          # float32 both ways (PlaintextAggregator)
        if self.policy.backend == "paillier":
            ct = _he.serialized_bytes(values, self.policy.key_bits // 4)
            return ct, ct                          # one ciphertext per value, no metadata
        codec = _bc.BatchCryptCodec(self.policy.quant_bits,
                                    self.policy.max_clients or self.plan.num_clients,
                                    self.policy.key_bits)
        layers = len(elems)
        ct = _he.serialized_bytes(codec.num_plaintexts(values), self.policy.key_bits // 4)
        return _STATS_BYTES * layers + ct + _COUNT_BYTES, _F64_BYTES * layers + ct

    def overflow_counters(self) -> List[str]:
        if self.policy.backend == "batchcrypt":
            return ["positive_overflows", "negative_overflows", "clipped"]
        return []

    def summary(self) -> str:
        """What the pass rewrote, the bytes per client and the overflow
        counters, before anything runs."""
        p, pol = self.plan, self.policy
        up, down = self.bytes_per_client()
        rows = [f"federated step: {p.num_clients} clients, backend {pol.backend}"
                + (f", aggregate revealed to the {pol.reveal_to}" if pol.backend == "mpc" else ""),
                "rewritten (secure aggregation):"]
        for r in p.reductions.values():
            w = ", ".join(f"c{c}: {'?' if v is None else f'{v:g}'}"
                          for c, v in sorted(r.weights.items()))
            rows.append(f"  {r.root} [{r.op}] <- {len(r.nodes)} node(s) {r.nodes}: sum of "
                        f"{len(r.terms)} clients' updates ({p.update_elements()[r.root]} "
                        f"values; weights {w})" + (f" x {r.scale:g}" if r.scale != 1 else ""))
        for name in p.linear:
            op = self._nodes[name].op
            where = ("on the aggregate (plaintext)" if pol.backend == "plaintext" else
                     "on the decrypted aggregate" if pol.backend != "mpc" else
                     "on shares (S1, S2; a product by a public value: one truncation)"
                     if op in ("Mul", "RealDiv", "Div", "Mean") else "on shares (S1, S2; local)")
            rows.append(f"  {name} [{self._nodes[name].op}] {where}")
        rows.append(f"bytes per client: {up} up, {down} down"
                    + {"mpc": " (shares: 2 x ring bytes per value)",
                       "batchcrypt": f" (BatchCrypt, {pol.key_bits}-bit Paillier, "
                                     f"r = {pol.quant_bits})",
                       "paillier": f" (one {pol.key_bits}-bit Paillier ciphertext per value)",
                       "plaintext": " (float32 in the clear: NO protection, the reference)"}[
                           pol.backend])
        if pol.backend == "mpc":
            rows.append("overflow: none can happen silently: each update is range-checked when "
                        "shared (|value| < the config's bound, else a ValueError naming it) "
                        "and a sum of N in-range values cannot wrap the ring")
        elif pol.backend == "batchcrypt":
            rows.append("overflow counters: " + ", ".join(self.overflow_counters())
                        + " (RoundReport; on_overflow='raise' refuses a wrapped slot)")
        rows.append("dropped clients: left out, each reduction's weights renormalised over "
                    "the present clients")
        return "\n".join(rows)

    # ------------------------------------------------------------ evaluation
    def _needed(self, targets: Sequence[Key], present: Sequence[int],
                given: Sequence[str]) -> set:
        need, stack = set(), [k[0] for k in targets]
        while stack:
            name = stack.pop()
            if name in need:
                continue
            need.add(name)
            red = self.plan.reductions.get(name)
            if red is not None:
                if name in given:
                    continue
                deps = [k for c in present for k in red.terms.get(c, [])] + red.public + red.cross
            else:
                deps = [src(i) for i in self._nodes[name].input if not i.startswith("^")]
            stack.extend(k[0] for k in deps)
        return need

    def _evaluate(self, inputs: Dict[str, Any], targets: Sequence[Key], present: Sequence[int],
                  aggregate: Callable, given: Dict[str, Any]) -> List[Any]:
        plan, parties = self.plan, self.parties()
        need = self._needed(targets, present, list(given))
        values: Dict[Key, Any] = {}
        driver = self._device("client")
        for n in plan.order:
            if n.name not in need:
                continue
            kind = plan.kind(n.name)
            if n.op == "Placeholder":
                if n.name not in inputs:
                    raise ValueError(f"{n.name} belongs to a dropped client but the round needs it")
                values[(n.name, 0)] = inputs[n.name]
                continue
            if n.op == "Const":
                values[(n.name, 0)] = tf.make_ndarray(n.attr["value"].tensor)
                continue
            if kind == "reduction":
                values[(n.name, 0)] = given[n.name] if n.name in given else aggregate(
                    plan.reductions[n.name], values, present)
                continue
            ins = [values[src(i)] for i in n.input if not i.startswith("^")]
            if kind == "client":
                (c,) = plan.owners[n.name]
                with tf.device(self._device(parties[c])):
                    outs = _run_public(n, ins)
            elif any(isinstance(v, PrivateTensor) for v in ins):
                outs = lookup(n.op)(self._env, node_of(n, plan.traced.layer_of), ins)
            else:
                with tf.device(driver):
                    outs = _run_public(n, ins)
            for i, o in enumerate(outs):
                values[(n.name, i)] = o
        return [values[k] for k in targets]

    def _update(self, red, values, c: int, device: str) -> tf.Tensor:
        """Client c's update to reduction `red`: its terms summed on its device."""
        with tf.device(device):
            ts = [tf.convert_to_tensor(values[k]) for k in red.terms[c]]
            return ts[0] if len(ts) == 1 else tf.add_n(ts)

    def _finish(self, red, acc, values, present):
        """The public and cross terms, the dropout reweighting and 1/N of a
        Mean over the stack, applied to the sum of the clients' updates."""
        for k in red.public + red.cross:
            acc = acc + values[k]
        scale = red.factor(present) * red.scale
        return acc if scale == 1.0 else acc * np.float64(scale)

    def _mpc_aggregate(self, red, values, present):
        parties = self.parties()
        acc = None
        for c in present:
            if c not in red.terms:
                continue
            u = self._update(red, values, c, self._device(parties[c]))
            # PrivPy §3: the client splits its own update on its device; S1
            # and S2 add their shares locally (no message between servers).
            p = registry.get("share").impl(u, name=f"client{c}/{red.root}", owner=parties[c])
            acc = p if acc is None else acc + p
        return self._finish(red, acc, values, present)

    def _fn(self, present: Tuple[int, ...]):
        fn = self._fns.get(present)
        if fn is None:
            plan, parties = self.plan, self.parties()
            names = [nm for nm, c in zip(plan.traced.inputs, plan.arg_client)
                     if c is None or c in present]
            outs = plan.traced.outputs

            def body(*xs):
                vals = self._evaluate(dict(zip(names, xs)), [src(o) for o in outs], present,
                                      self._mpc_aggregate, {})
                res = []
                for v in vals:
                    if not isinstance(v, PrivateTensor):
                        res.append(v)
                    elif self.policy.reveal_to == "clients":
                        got = [registry.get("reveal").impl(v, to=parties[c]) for c in present]
                        res.append(got[0])
                    else:
                        res.append(registry.get("reveal").impl(v))
                return res

            fn = tf.function(body, autograph=False)
            self._fns[present] = fn
        return fn

    def _args(self, args, present):
        plan, parties = self.plan, self.parties()
        if len(args) != len(plan.traced.inputs):
            raise TypeError(f"the step takes {len(plan.traced.inputs)} arguments, got {len(args)}")
        if present is None:
            present = sorted({c for a, c in zip(args, plan.arg_client)
                              if c is not None and a is not None})
        present = tuple(sorted(set(present)))
        if not present or any(c < 0 or c >= plan.num_clients for c in present):
            raise ValueError(f"present must name clients of 0..{plan.num_clients - 1}, "
                             f"got {present}")
        xs = []
        for a, c, spec in zip(args, plan.arg_client, plan.traced.input_specs):
            if c is not None and c not in present:
                continue
            if a is None:
                raise ValueError(f"client {c} is present but its argument is None")
            # a client's data is loaded on its own device (never the driver's)
            with tf.device(self._device(parties[c]) if c is not None else self._device("client")):
                xs.append(tf.identity(tf.convert_to_tensor(a, spec.dtype)))
        return xs, present

    def run(self, *args, present: Optional[Sequence[int]] = None):
        """One round: (the step's outputs, a RoundReport).

        Args:
          *args: the step's arguments; a dropped client's may be None.
          present: the clients whose updates arrive (default: those whose
            arguments are not None).
        """
        xs, present = self._args(args, present)
        t0 = time.perf_counter()
        if self.policy.backend == "mpc":
            rt = context.get_handle().runtime
            before = rt.channels.counts()
            outs = self._fn(present)(*xs)
            after = rt.channels.counts()
            parties = self.parties()
            report = self._report(present)
            if len(set(parties)) == len(parties) and "client" not in parties:
                # one device per client: what its channels counted
                sent = [sum(after[k][1] - before[k][1] for k in after if k[0] == parties[c])
                        for c in present]
                got = [sum(after[k][1] - before[k][1] for k in after if k[1] == parties[c])
                       for c in present]
                report.bytes_up_per_client, report.bytes_down_per_client = max(sent), max(got)
            else:
                # clients share a device (and the driver's public messages):
                # the channels cannot tell them apart, so the declaration
                report.bytes_up_per_client, report.bytes_down_per_client = \
                    self.bytes_per_client()
        else:
            outs, report = self._he(xs, present)
        report.seconds = time.perf_counter() - t0
        outs = [o.numpy() if hasattr(o, "numpy") else np.asarray(o) for o in outs]
        return tf.nest.pack_sequence_as(self.plan.traced.output_structure, outs), report

    def __call__(self, *args, present: Optional[Sequence[int]] = None):
        return self.run(*args, present=present)[0]

    def _report(self, present) -> RoundReport:
        return RoundReport(list(present), {r: red.factor(present)
                                           for r, red in self.plan.reductions.items()})

    # ------------------------------------------------- batchcrypt, paillier
    def _he(self, xs, present):
        plan, parties = self.plan, self.parties()
        names = [nm for nm, c in zip(plan.traced.inputs, plan.arg_client)
                 if c is None or c in present]
        reds = list(plan.reductions.values())
        shapes = {r.root: self.plan.shapes[next(k for ks in r.terms.values() for k in ks)]
                  for r in reds}
        slots = [(c, r.root) for c in present for r in reds if c in r.terms]
        terms = sorted({k for c, root in slots for k in plan.reductions[root].terms[c]})

        def phase1(*args):
            vals = self._evaluate(dict(zip(names, args)), terms, present, None, {})
            got = dict(zip(terms, vals))
            return [self._update(plan.reductions[root], got, c, self._device(parties[c]))
                    for c, root in slots]

        p1 = self._fns.setdefault(("batchcrypt-clients", present),
                                  tf.function(phase1, autograph=False))
        ups = dict(zip(slots, [u.numpy() for u in p1(*xs)]))
        # a client without a term in a reduction contributes zeros to it
        updates = [[ups.get((c, r.root), np.zeros(shapes[r.root], np.float32)) for r in reds]
                   for c in present]
        mean, agg = self._aggregator.aggregate(updates, [1.0] * len(present))
        # uniform weights: the aggregate is the mean of the updates; times m, their sum
        sums = [tf.constant(np.asarray(m, np.float64) * len(present), tf.float32) for m in mean]

        def phase2(*args):
            vals = dict(zip(names, args[len(reds):]))
            public_terms = [k for r in reds for k in r.public + r.cross]
            got = dict(zip(public_terms, self._evaluate(vals, public_terms, present, None, {})))
            fin = {r.root: self._finish(r, v, got, present) for r, v in zip(reds, args)}
            return self._evaluate(vals, [src(o) for o in plan.traced.outputs], present, None,
                                  fin)

        p2 = self._fns.setdefault(("batchcrypt-aggregate", present),
                                  tf.function(phase2, autograph=False))
        outs = p2(*sums, *xs)
        report = self._report(present)
        report.bytes_up_per_client = agg.bytes_up_per_client
        report.bytes_down_per_client = agg.bytes_down_per_client
        report.positive_overflows = agg.positive_overflows
        report.negative_overflows = agg.negative_overflows
        report.clipped = agg.clipped
        report.encrypt_s, report.aggregate_s, report.decrypt_s = \
            agg.encrypt_s, agg.aggregate_s, agg.decrypt_s
        report.aggregation = agg
        return outs, report
