"""Backends: how shares are created, combined and multiplied.

`PrivPyBackend` runs PrivPy's four-server protocols (DESIGN §5): shares live
on S1 and S2, every multiplication is the masked protocol through T1 and T2.
`PlaintextBackend` keeps the same API and fixed-point encoding but computes
in the clear on the client device (value in share 0, zero in share 1): a
debugging aid and the test oracle, never private.

Everything is expressed on `Shares` (pairs of ring tensors); the public API
(tf_privpy) wraps them in PrivateTensor.
"""
from __future__ import annotations

import abc
import contextlib
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from ... import std_ops
from . import circuits
from ..runtime import cost as C
from ..runtime import kernels
from . import leading_one as lo
from ..runtime import shares as sh
from . import thresholds as th
from .assist import PAIRS, SERVERS, send_to_assistant
from .garbled import Pregarbled
from ..runtime.runtime import CLIENT, Runtime, canonical_device
from ..runtime.devscope import device_scope

Shares = sh.Shares


class Backend(abc.ABC):
    """Protocol operations on shares for one runtime."""

    name = "abstract"
    #: the parties holding share 0 and share 1
    holders: Tuple[str, str] = ("S1", "S2")

    def __init__(self, runtime: Runtime):
        self.rt = runtime
        self.cfg = runtime.config
        self.bits = runtime.config.ring_bits
        self.limbs = runtime.config.limbs

    # ------------------------------------------------------------ helpers
    def on(self, i: int):
        """Device scope of the holder of share i."""
        return device_scope(self.rt.device(self.holders[i]))

    def local(self, fn, *shares_args: Shares) -> Shares:
        """Applies fn share-wise: fn(s_i of each arg..., party=i) on holder i."""
        out = []
        for i in range(2):
            with self.on(i):
                out.append(fn(*[a[i] for a in shares_args], party=i))
        C.propagate([t for a in shares_args for t in a], out)
        return out[0], out[1]

    def encode(self, x: tf.Tensor, party: str, name: str = "",
               frac_bits: Optional[int] = None, bound: Optional[float] = None) -> tf.Tensor:
        """Fixed-point encoding of a (public or owned) tensor on `party`.

        A tensor that lives elsewhere (a public operand made by the client's
        program) reaches `party` through the client's channel first."""
        x = self.to_party(x, party)
        with device_scope(self.rt.device(party)):
            if x.dtype not in (tf.float32, tf.float64, tf.int32, tf.int64):
                x = tf.cast(x, tf.float64)
            return kernels.ring_encode(
                x, self.bits, self.cfg.frac_bits if frac_bits is None else frac_bits,
                self.cfg.bound if bound is None else bound, tensor_name=name)

    def to_party(self, x, party: str) -> tf.Tensor:
        """x on `party`'s device: as it is if it already lives there, made
        there if it is a constant (a Python or numpy value: public, known to
        every party's program), else sent by the client (public data of the
        program) through the channel."""
        if not tf.is_tensor(x):   # a constant of the program: each party makes its own
            with device_scope(self.rt.device(party)):
                return tf.convert_to_tensor(x)
        if party == CLIENT or _on_device(x, self.rt.device(party)):
            return x
        if C.active():
            C.declare(C.Cost().send(CLIENT, party, x.shape.num_elements() * x.dtype.size))
        return self.rt.send1(CLIENT, party, x)

    def decode(self, v: tf.Tensor, to: str = CLIENT) -> tf.Tensor:
        with device_scope(self.rt.device(to)):
            return kernels.ring_decode(v, self.bits, self.cfg.frac_bits)

    # ------------------------------------------------------ share / reveal
    @abc.abstractmethod
    def share(self, encoded: tf.Tensor, owner: str = CLIENT) -> Shares:
        """Splits a ring tensor on the owner's device (the client's, or a
        federated data owner's) into the holders' shares."""

    def reveal(self, s: Shares, to: str = CLIENT) -> tf.Tensor:
        """The ring value on the client device (or on data owner `to`'s)."""
        if C.active():
            C.declare(C.reveal_cost(sh.logical_shape(s[0], self.limbs), self.bits, to))
        s0 = self.rt.send1(self.holders[0], to, s[0])
        s1 = self.rt.send1(self.holders[1], to, s[1])
        with device_scope(self.rt.device(to)):
            out = kernels.ring_add(s0, s1, self.bits)
        self.rt.count(rounds=C.advance(s, C.REVEAL_ROUNDS, [out]))
        return out

    # ---------------------------------------------------------- linear ops
    def add(self, x: Shares, y: Shares) -> Shares:
        return self.local(lambda a, b, party: kernels.ring_add(a, b, self.bits), x, y)

    def sub(self, x: Shares, y: Shares) -> Shares:
        return self.local(lambda a, b, party: kernels.ring_sub(a, b, self.bits), x, y)

    def neg(self, x: Shares) -> Shares:
        return self.local(lambda a, party: kernels.ring_neg(a, self.bits), x)

    def add_public(self, x: Shares, c: tf.Tensor, name: str = "",
                   frac_bits: Optional[int] = None) -> Shares:
        """x + c for a public c broadcastable to x's logical shape: only share 0
        changes. c travels as given and is broadcast on S1 (a scalar is 8
        bytes on the wire, not a tensor of x's size). frac_bits: c's
        encoding (default the config's; 0 for integer bit shares)."""
        c0 = self.encode(c, self.holders[0], name, frac_bits=frac_bits)
        with self.on(0):
            z0 = kernels.ring_add(x[0], self._like(c0, x[0]), self.bits)
        return z0, x[1]

    def _like(self, c: tf.Tensor, share: tf.Tensor) -> tf.Tensor:
        """An encoded public c broadcast to the share's logical shape, on the
        share's device (call under its scope)."""
        return sh.like(c, share, self.limbs)

    def public_sub(self, c: tf.Tensor, x: Shares, name: str = "",
                   frac_bits: Optional[int] = None) -> Shares:
        return self.add_public(self.neg(x), c, name, frac_bits)

    def mul_public(self, x: Shares, c: tf.Tensor, kind: str = "mul", public_left: bool = False,
                   strides=(1, 1), padding=(0, 0, 0, 0), c_frac_bits: Optional[int] = None,
                   c_bound: Optional[float] = None, name: str = "") -> Shares:
        """Product with a public operand: local, then local truncation.

        c is encoded with c_frac_bits (default: the config's) fractional bits
        and the product truncated by as many, so extra bits buy precision;
        c_bound (default: the config's bound) is the range c is checked against.
        """
        f = self.cfg.frac_bits if c_frac_bits is None else c_frac_bits

        def fn(s, party):
            cp = self.encode(c, self.holders[party], name, frac_bits=f, bound=c_bound)
            if kind == "mul":
                cp = self._like(cp, s)
            a, b = (cp, s) if public_left else (s, cp)
            return kernels.ring_bilinear(a, b, self.bits, kind, strides, padding,
                                         truncate_party=party if f > 0 else -1, frac_bits=f)

        return self.local(fn, x)

    def reduce_sum(self, x: Shares, axis=None, keepdims: bool = False) -> Shares:
        shape = sh.logical_shape(x[0], self.limbs)
        if not shape.is_fully_defined():
            raise ValueError("reduce_sum needs a fully known shape")
        kept, red = sh.reduce_axes_layout(shape, axis)
        outer = [shape[i] for i in kept]
        inner = int(np.prod([shape[i] for i in red], dtype=np.int64))
        out_shape = [1 if i in red else shape[i] for i in range(shape.rank)] if keepdims else outer

        def fn(s, party):
            t = sh.transpose(s, kept + red, self.limbs) if red else s
            t = sh.reshape(t, [int(np.prod(outer, dtype=np.int64)), inner], self.limbs)
            return sh.reshape(kernels.ring_reduce_sum(t, self.bits), out_shape, self.limbs)

        return self.local(fn, x)

    def garble_ahead(self, shape) -> Pregarbled:
        raise ValueError(f"the {self.name} backend has no garbled circuits to prepare; "
                         "garbling ahead belongs to the privpy backend")

    def prepare_ahead(self, shape):
        """The set-up phase of one later comparison of `shape` (single-use):
        the garbled comparators here; a backend with other comparison
        families prepares the one chosen."""
        return self.garble_ahead(shape)

    def prepare_cost(self, shape) -> C.Cost:
        """What `prepare_ahead(shape)` sends: the garbled tables, offline."""
        n = int(np.prod(tf.TensorShape(shape).as_list(), dtype=np.int64))
        c = C.Cost(rounds=1)
        for t, k in (("T1", n // 2), ("T2", n - n // 2)):
            c.send("S1", t, k * (C.GC_TABLE_BYTES + C.GC_DECODE_BYTES))
        return c

    def map_shares(self, fn, x: Shares) -> Shares:
        """Applies a shape function (reshape, slice, ...) to both shares."""
        return self.local(lambda s, party: fn(s), x)

    def map_many(self, fn, xs: Sequence[Shares]) -> Shares:
        """Applies fn(list of shares) (concat, stack) share-wise."""
        out = []
        for i in range(2):
            with self.on(i):
                out.append(fn([x[i] for x in xs]))
        C.propagate([t for x in xs for t in x], out)
        return out[0], out[1]

    # -------------------------------------------------------- multiplication
    @abc.abstractmethod
    def mul(self, x: Shares, y: Shares, kind: str = "mul", strides=(1, 1),
            padding=(0, 0, 0, 0), truncate: bool = True) -> Shares:
        """Bilinear product of two shared operands, truncated to frac_bits.

        truncate=False: the exact ring product, for an operand that is a
        plain integer (a comparison bit from ltz(integer=True)): its product
        with a fixed-point share is already fixed point, and skipping the
        local truncation removes its failure (about |xy|/2^(l-1) per element,
        DESIGN §3; issue 15)."""

    def mul_bill(self, x_shape, y_shape, out_shape) -> C.Cost:
        """What `mul` sends for operands of these (static) shapes: nothing
        here; the protocol backends override it. For callers that run a
        multiplication inside a graph loop and declare its bill outside."""
        return C.Cost()

    def ltz_bill(self, n: int, pregarbled: bool = False, sized: bool = False) -> C.Cost:
        """What `ltz` sends for n comparisons (see `mul_bill`); sized: the
        call runs inside `batch_sizes` (its size given to `size_parties`)."""
        return C.Cost()

    def ltz_mul(self, z: Shares, vs: Sequence[Shares], pregarbled=None) -> List[Shares]:
        """[z < 0]·v for each v of vs (each of z's shape), exact: what every
        select after a comparison computes (ReLU, max, the sort's
        compare-exchange). Here the comparison's integer bit, then ONE
        multiplication without truncation for all of vs (today's rounds:
        the comparison's, then the multiplication's); a comparison family
        that can start the products before its bit is known overrides it
        (bitwise/protocol.py: ltz_mul)."""
        c = self.ltz(z, pregarbled, integer=True)
        if len(vs) == 1:
            return [self.mul(c, vs[0], truncate=False)]
        # along the last axis: the shapes may be dynamic (a sort loop's body)
        cat = lambda p: sh.concat(p, -1, self.limbs)  # noqa: E731
        prod = self.mul(self.map_many(cat, [c] * len(vs)), self.map_many(cat, list(vs)),
                        truncate=False)
        k = len(vs)

        def part(s, party, i):
            w = sh.dynamic_shape(s, self.limbs)[-1] // k
            return sh.getitem(s, (Ellipsis, slice(i * w, (i + 1) * w)), self.limbs)

        return [self.local(lambda s, party, i=i: part(s, party, i), prod) for i in range(k)]

    def ltz_mul_bill(self, n: int, k: int = 1, sized: bool = False) -> C.Cost:
        """What `ltz_mul` sends for n comparisons and k products of n
        elements each, called in a graph loop (see `mul_bill`; sized: as
        in `ltz_bill`)."""
        e = [n * k]
        return self.ltz_bill(n, sized=sized).then(self.mul_bill(e, e, e))
    def loop_batch_limit(self) -> int:
        """The most comparisons one call may take inside a graph loop whose
        trace does not know the size (the sort loop's layers): such a call
        is one batch, never chunked. Garbled: Config.comparison_batch (2 KB
        of tables each)."""
        return int(self.cfg.comparison_batch)

    def size_parties(self) -> Tuple[str, ...]:
        """Parties besides the share holders that must know a comparison
        batch's (public) size before its data exists, as a dealer of
        correlations does. A graph loop whose body does not know its
        comparisons' sizes at trace time (the sort loop) computes each
        batch's size on each of these parties from its own loop counter and
        gives them by `batch_sizes`, so no message carries it. None here."""
        return ()

    @contextlib.contextmanager
    def batch_sizes(self, sizes: Dict[str, tf.Tensor]) -> Iterator[None]:
        """Inside it, each comparison built is ONE batch of sizes[party]
        elements, an int64 scalar placed on party, for each party of
        `size_parties()`. Nothing to do here (no such party)."""
        yield

    @abc.abstractmethod
    def ltz(self, x: Shares, pregarbled=None, integer: bool = False) -> Shares:
        """Shares of the bit [x < 0], encoded as fixed-point 1.0 or 0.0 (DESIGN §6).

        Every comparison derives from it: x < y is ltz(x - y).

        integer=True: shares of the plain bit 0 or 1 (no 2^f scale), for
        selects: multiplied by a fixed-point value with mul(truncate=False)
        the result needs no truncation, so max, ReLU, sort and where are
        exact in the 64-bit ring too (issue 15). Same protocol and cost: the
        assistants' re-sharing (DESIGN §6 step 4-5) just omits the scale."""

    def leading_one(self, x: Shares, columns: Sequence[int], magnitude: bool = False,
                    width: Optional[int] = None, table=None) -> Shares:
        """Integer bit shares [N, len(columns)] of the leading-one circuit's
        outputs for a flat x [N] (protocols/mpc/privpy/leading_one.py): column j <
        W - 1 is [v >= 2^j], v = x, or with magnitude the one's complement
        x XOR [x < 0] (|x| - 1 for x < 0; column 0 is then [x != 0]), as ring
        integers (fixed point: x·2^f); column W - 1 is [x < 0]. One garbled
        circuit per element, two rounds. width W (default from the bound)
        <= 64. With a public int64 `table` [K + 1, J] (K = len(columns)):
        shares [N, J] of bits @ table[:K] + table[K] instead, fused into the
        protocol's last step (no [N, K] ring tensor of the bits), exact."""
        w = lo.default_width(self.cfg) if width is None else int(width)
        if not 3 <= w <= 64:
            raise ValueError(f"leading_one width must be in [3, 64], got {w}")
        return self._leading_one(x, columns, magnitude, w, table)

    @abc.abstractmethod
    def _leading_one(self, x: Shares, columns: Sequence[int], magnitude: bool, width: int,
                     table) -> Shares:
        """This backend's protocol for `leading_one` (arguments checked)."""

    def thresholds(self, x: Shares, points: Sequence[int], integer: bool = False,
                   width: Optional[int] = None, table=None) -> Shares:
        """Shares [N, K] of the bits [x < θ_k] for a flat x [N] and public
        thresholds θ_k given as ring integers (θ·2^f for fixed point), by ONE
        garbled window-thresholds circuit per element
        (protocols/mpc/privpy/thresholds.py): fixed-point 0/1 like `ltz`, or
        integer bits with integer=True. Two rounds, as one comparison.
        Needs |x| < 2^(W-1) (width W, default from the bound, <= 64) and
        thresholds.window(points, W) not None (else ValueError: compare
        with `ltz` instead). With integer=True and a public int64 `table`
        [K + 1, J]: shares [N, J] of bits @ table[:K] + table[K], fused into
        the protocol's last step as for `leading_one`, exact.

        Example:
          >>> f = backend.cfg.frac_bits
          >>> bits = backend.thresholds(x, [-(3 << f), 0, 3 << f])  # [x < -3], [x < 0], [x < 3]
        """
        w = lo.default_width(self.cfg) if width is None else int(width)
        if not 3 <= w <= 64:
            raise ValueError(f"thresholds width must be in [3, 64], got {w}")
        if table is not None and not integer:
            raise ValueError("a fused table takes integer bits: pass integer=True")
        return self._thresholds(x, points, integer, w, table)

    @abc.abstractmethod
    def _thresholds(self, x: Shares, points: Sequence[int], integer: bool, width: int,
                    table) -> Shares:
        """This backend's protocol for `thresholds` (arguments checked)."""

    def fixed_from_bits(self, c: Shares) -> Shares:
        """Fixed-point shares c·2^f from integer bit shares c: a local
        multiplication by the public integer 2^f, exact in the ring."""
        f = self.cfg.frac_bits

        def fn(s, party):
            scale = kernels.ring_encode(tf.constant(2.0 ** f, tf.float64), self.bits, 0,
                                        2.0 ** (f + 1))
            return kernels.ring_bilinear(s, self._like(scale, s), self.bits, "mul")

        return self.local(fn, c)

    def bits_from_fixed(self, c: Shares) -> Shares:
        """Integer bit shares from fixed-point bit shares c·2^f: local
        truncation of an exact multiple of 2^f, which is exact unless the
        signed sum of the shares wraps, probability about 2^(f+1-l) per
        element (2^-47 in the 64-bit ring, DESIGN §3), where a product
        c·2^f·d·2^f would fail with about |d|·2^(2f+1-l)."""
        return self.truncate(c, self.cfg.frac_bits)

    def truncate(self, x: Shares, k: int) -> Shares:
        """x / 2^k by local truncation of each share (PrivPy §5.2; fails with
        probability about 2^(log2|x| + 1 - l) per element, DESIGN §3): one
        kernel per share, what a product with the public 2^-k encoded with k
        fractional bits computes in five."""
        return self.local(lambda s, party: kernels.ring_truncate(s, self.bits, party, k), x)

    def mul_many(self, pairs: Sequence[Tuple[Shares, Shares]],
                 truncate: bool = True) -> List[Shares]:
        """Independent elementwise products (equal shapes per pair) as ONE
        protocol call: one kernel per step and device, one round trip
        (truncate as in `mul`, for all pairs)."""
        if not pairs:
            return []
        shapes = [sh.logical_shape(x[0], self.limbs) for x, _ in pairs]
        for (x, y), s in zip(pairs, shapes):
            if sh.logical_shape(y[0], self.limbs) != s or not s.is_fully_defined():
                raise ValueError("mul_many needs pairs of equal, fully known shapes")
        if len(pairs) == 1:
            return [self.mul(*pairs[0], truncate=truncate)]
        if all(s == shapes[0] for s in shapes):
            # one Pack per operand and one Unpack per party, not a Reshape per
            # pair and a concat/split (trace time: ops made, not bytes moved);
            # (sh.pack: an operand repeated in every pair is not a Pack)
            z = self.mul(self.map_many(sh.pack, [x for x, _ in pairs]),
                         self.map_many(sh.pack, [y for _, y in pairs]), truncate=truncate)
            out = []
            for i in range(2):
                with self.on(i):
                    out.append(std_ops.unstack(z[i], num=len(pairs), axis=0))
            C.propagate(z, out[0] + out[1])
            return list(zip(out[0], out[1]))
        sizes = [s.num_elements() for s in shapes]
        tail = [2] if self.limbs == 2 else []
        # shapes, sizes and axes as constants made once per graph and server
        const = lambda i, v: self.rt.constant(self.holders[i], v, tf.int32)  # noqa: E731

        def flat(xs):
            out = []
            for i in range(2):
                with self.on(i):
                    out.append(std_ops.concat([std_ops.reshape(x[i], const(i, [-1] + tail)) for x in xs],
                                         const(i, 0)))
            C.propagate([t for x in xs for t in x], out)
            return out[0], out[1]

        fx = flat([x for x, _ in pairs])
        fy = flat([y for _, y in pairs])
        z = self.mul(fx, fy, truncate=truncate)
        out = []
        for i in range(2):
            with self.on(i):
                out.append([std_ops.reshape(p, const(i, s.as_list() + tail)) for p, s in
                            zip(tf.split(z[i], const(i, sizes), axis=const(i, 0)), shapes)])
        C.propagate(z, out[0] + out[1])
        return list(zip(out[0], out[1]))


class PrivPyBackend(Backend):
    """PrivPy's four-server protocols (DESIGN §5, §6).

    Every op that reads a share or a protocol message is built under the
    device scope of the party that owns it, and every tensor that changes
    party goes through the runtime's channel: nothing secret is ever
    computed on, or copied to, the client (tests/test_placement.py)."""

    name = "privpy"
    holders = ("S1", "S2")

    def share(self, encoded: tf.Tensor, owner: str = CLIENT) -> Shares:
        if C.active():
            C.declare(C.share_cost(sh.logical_shape(encoded, self.limbs), self.bits, owner))
        # PrivPy §3: the owner splits with fresh randomness on its own device;
        # only the two shares leave it, each through its channel.
        with device_scope(self.rt.device(owner)):
            s0, s1 = kernels.share_split(encoded, self.bits)
        out = self.rt.send1(owner, "S1", s0), self.rt.send1(owner, "S2", s1)
        self.rt.count(rounds=C.advance([encoded], C.SHARE_ROUNDS, out))
        return out

    def mul(self, x: Shares, y: Shares, kind: str = "mul", strides=(1, 1),
            padding=(0, 0, 0, 0), truncate: bool = True) -> Shares:
        z = self.mul_messages(x, y, kind, strides, padding, truncate)
        with device_scope(self.rt.device("S1")):
            n = z[0].shape.num_elements()  # static when traced shapes are known
            self.rt.count(rounds=C.advance(list(x) + list(y), C.MUL_ROUNDS, z),
                          multiplications=(n // self.limbs if n is not None else
                                           tf.size(z[0], out_type=tf.int64) // self.limbs))
        if C.active():
            C.declare(self.mul_bill(*(sh.logical_shape(v[0], self.limbs) for v in (x, y, z))))
        return z

    def mul_messages(self, x: Shares, y: Shares, kind: str = "mul", strides=(1, 1),
                     padding=(0, 0, 0, 0), truncate: bool = True) -> Shares:
        """`mul`'s protocol (DESIGN §5) without counting or declaring it: for
        a protocol that runs a multiplication inside its own rounds and
        counts and declares the whole (bitwise/protocol.py's ltz_mul)."""
        rt, bits = self.rt, self.bits
        f = self.cfg.frac_bits if truncate else 0  # MulFinish: frac_bits 0 = no truncation
        geo = dict(kind=kind, strides=strides, padding=padding)
        # Step 1-2 (DESIGN §5): each server masks its shares with masks drawn
        # from the S1-S2 stream; no message is needed to agree on them. Each
        # server also takes its stream with its assistant (S1-T1, S2-T2) now,
        # so the nonce can travel with its first message for the check.
        k12, n12, kt_own, nt_own, masked = {}, {}, {}, {}, {}
        for p, (party, t) in enumerate(PAIRS):
            (k12[p], n12[p]), (kt_own[p], nt_own[p]) = rt.key_materials(
                party, [("S1", "S2"), (party, t)])
            with device_scope(rt.device(party)):
                masked[p] = kernels.mul_mask(x[p], y[p], k12[p], n12[p], bits, party=p)
        # T1 gets a = x0 + rx0 (from S1), b = y1 + ry1 (from S2);
        # T2 gets a' = x1 + rx1 (from S2), b' = y0 + ry0 (from S1).
        msgs = {}
        for own, (server, t) in enumerate(PAIRS):
            other = 1 - own
            # kt: T1 shares its mask u with S1, T2 with S2
            left, right, kt, nt = send_to_assistant(rt, own, masked[own][0], masked[other][1],
                                                    n12, nt_own[own])
            with device_scope(rt.device(t)):
                msg = kernels.mul_assist(left, right, kt, nt, bits, **geo)
            if kind == "mul" and msg.shape.rank is None:
                # the kernel's shape function gives up on unknown dims (a
                # sort's loop body); a sealed link needs the rank
                msg.set_shape(tf.broadcast_static_shape(left.shape, right.shape))
            msgs[other] = rt.send1(t, SERVERS[other], msg)  # T1 -> S2, T2 -> S1
        z = []
        for p, party in enumerate(SERVERS):
            with device_scope(rt.device(party)):
                z.append(kernels.mul_finish(x[p], y[p], masked[p][0], msgs[p], k12[p], n12[p],
                                            kt_own[p], nt_own[p], bits, party=p, frac_bits=f,
                                            **geo))
        return z[0], z[1]

    def mul_bill(self, x_shape, y_shape, out_shape) -> C.Cost:
        return C.mul_cost(x_shape, y_shape, out_shape, self.bits)

    def ltz_bill(self, n: int, pregarbled: bool = False, sized: bool = False) -> C.Cost:
        return C.ltz_cost(n, self.bits, int(self.cfg.comparison_batch), pregarbled)

    def ltz(self, x: Shares, pregarbled: Optional[Pregarbled] = None,
            integer: bool = False) -> Shares:
        """PrivPy Protocol 2 (DESIGN §6): [x < 0] by a garbled comparator on
        the low 64 bits of the shares, evaluated by T1 (first half of the
        batch) and T2 (second half), turned back into arithmetic shares
        (of 0/1 with integer=True, of 0/2^f otherwise).

        With `pregarbled` (from `garble_ahead`), the garbled tables are
        already at T1 and T2 and only input labels travel online. The
        protocol is circuits.run's, with the comparator circuit."""
        shape = self.local(lambda s, party: sh.dynamic_shape(s, self.limbs), x)
        out = circuits.run(
            self, x, circuits.comparison(), 0 if integer else self.cfg.frac_bits,
            lambda n, chunk: self.ltz_bill(n, pregarbled is not None),
            chunk=int(self.cfg.comparison_batch), pregarbled=pregarbled)
        return self.local(lambda s, shp, party: sh.reshape(s, shp, self.limbs), out, shape)

    def _leading_one(self, x, columns, magnitude, width, table):
        return lo.privpy_leading_one(self, x, columns, magnitude, width, table=table)

    def _thresholds(self, x, points, integer, width, table):
        return th.privpy_thresholds(self, x, points, width, integer, table=table)

    def garble_ahead(self, shape) -> Pregarbled:
        """Garbles comparators for one later comparison of `shape` now, and
        stores the tables at T1 and T2 (TF variables): the setup phase of
        DESIGN §6. The result is single-use, enforced in TF state by each
        server, so a traced function cannot replay it."""
        return Pregarbled(self, tf.TensorShape(shape))


class PlaintextBackend(Backend):
    """The same operations in the clear on the client device (test oracle)."""

    name = "plaintext"
    holders = ("client", "client")

    def share(self, encoded: tf.Tensor, owner: str = CLIENT) -> Shares:
        with device_scope(self.rt.device(CLIENT)):
            return tf.identity(encoded), tf.zeros_like(encoded)

    def reveal(self, s: Shares, to: str = CLIENT) -> tf.Tensor:
        with device_scope(self.rt.device(CLIENT)):
            return kernels.ring_add(s[0], s[1], self.bits)

    def mul(self, x: Shares, y: Shares, kind: str = "mul", strides=(1, 1),
            padding=(0, 0, 0, 0), truncate: bool = True) -> Shares:
        with device_scope(self.rt.device(CLIENT)):
            a = kernels.ring_add(x[0], x[1], self.bits)
            b = kernels.ring_add(y[0], y[1], self.bits)
            z = kernels.ring_bilinear(a, b, self.bits, kind, strides, padding,
                                      truncate_party=0 if truncate else -1,
                                      frac_bits=self.cfg.frac_bits if truncate else 0)
            return z, tf.zeros_like(z)

    def ltz(self, x: Shares, pregarbled=None, integer: bool = False) -> Shares:
        if pregarbled is not None:
            raise ValueError("pregarbled comparators belong to the privpy backend")
        with device_scope(self.rt.device(CLIENT)):
            v = kernels.ring_decode(kernels.ring_add(x[0], x[1], self.bits), self.bits, 0)
            bit = tf.cast(v < 0, tf.int64)
            z = kernels.ring_encode(bit, self.bits, 0 if integer else self.cfg.frac_bits, 2.0)
            return z, tf.zeros_like(z)

    def _leading_one(self, x, columns, magnitude, width, table):
        bits = lo.plaintext_leading_one(self, x, columns, magnitude, width)
        return bits if table is None else lo.apply_table(self, bits, table)

    def _thresholds(self, x, points, integer, width, table):
        bits = th.plaintext_thresholds(self, x, points, width, integer)
        return bits if table is None else lo.apply_table(self, bits, table)


def _on_device(x: tf.Tensor, device: str) -> bool:
    """Whether x is (eager) or is placed to be (graph) on `device`."""
    if not x.device:
        return False  # unplaced: TF puts it on the first CPU, the client's
    return canonical_device(x.device) == canonical_device(device)
